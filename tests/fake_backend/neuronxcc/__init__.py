"""FAKE neuronx-cc for neuronprobe's tests: not the Neuron compiler.

The real package is the Neuron compiler (``neuronx-cc``). This fake only
provides ``__version__`` and a ``driver`` that behaves like the compiler's
command line as far as torch-neuronx's ``trace`` and ``analyze`` see it:
exit status, ``[NCC_*]`` diagnostics on its output, a ``.neff`` file.
"""

__neuronprobe_fake__ = True
__version__ = "2.26.0.0+fake"
