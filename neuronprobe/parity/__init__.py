"""Numerical parity before the hardware run (issue 25): the fp32 reference on the CPU against emulated Neuron precisions.

* :mod:`.precision`: a Precision (auto-cast, auto-cast type, served dtype, mixed-precision accumulation), the SDK defaults, the flags.
* :mod:`.emulate`: run a forward on the CPU as Neuron would compute it under a Precision.
* :mod:`.drift`: every module's output against the reference, and the first module past the tolerance.
* :mod:`.metrics`: NxD Inference's logit tolerances, greedy divergence, top-1 stability.
* :mod:`.run`: the whole run, as the report's ParitySection.
* :mod:`.api`: ``neuronprobe.parity(model, ...)``, the command's flags as keywords (the package itself is callable).
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    """``neuronprobe.parity(...)`` is the command as a function (:func:`neuronprobe.parity.api.parity`): the package and the
    function share the name, and a package imported once is what ``neuronprobe.parity`` is, so the package is callable."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from neuronprobe.parity.api import parity

        return parity(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
