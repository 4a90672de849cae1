"""FAKE torch_xla for neuronprobe's tests: the parts neuronprobe touches, NOT PyTorch/XLA.

The "XLA device" is the CPU. From the first ``xla_device()`` / ``device()``
call on, every aten op the process runs is recorded as lazy IR
(fake_neuron_common.recorder); ``mark_step()`` / ``sync()`` cuts a graph,
"compiles" it through a Neuron persistent cache
(``<cache>/neuronxcc-<version>/MODULE_<hash>+<flags>/model.neff``, ``model.done``)
and updates the metrics (``UncachedCompile``, ``CachedCompile``, ``CompileTime``,
``aten::*`` counters for the fixture's fallback ops, ``xla::*`` for the rest).
"""

__neuronprobe_fake__ = True
__version__ = "2.9.0+fake"

from torch_xla import _lazy


def device(index: int | None = None):
    return _lazy.device()


def sync() -> None:
    _lazy.mark_step()
