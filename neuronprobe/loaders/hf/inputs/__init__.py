"""Example inputs for an ``hf:`` forward: primitives (:mod:`.primitives`), one module per family of inputs
(:mod:`.segmentation`, :mod:`.grids`, :mod:`.image_text`, :mod:`.audio`, :mod:`.other`), the assembly
(:mod:`.make`) and the repairs a forward's error drives (:mod:`.repairs`)."""
