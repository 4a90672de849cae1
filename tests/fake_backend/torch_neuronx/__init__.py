"""FAKE torch-neuronx (XLA-era surface) for neuronprobe's tests: NOT the Neuron SDK.

It mimics the documented API of torch-neuronx 2.x on trn1/inf2 closely enough
to drive neuronprobe's live backend on a machine without Trainium:
``trace`` (keyword-only options, ``RuntimeError("neuronx-cc failed with N")``,
a traced module that accepts only its example shapes), ``dynamic_batch``,
``analyze`` (the documented dict), ``PartitionerConfig``/``partition``,
``move_trace_to_device``. Models run on the CPU; which ops fail is the fake's
fixture data (see fake_neuron_common). The marker below tells neuronprobe this
is never hardware.
"""

__neuronprobe_fake__ = True

from torch_neuronx._version import __version__
from torch_neuronx.xla_impl.analyze import analyze
from torch_neuronx.xla_impl.partitioner import PartitionerConfig, partition
from torch_neuronx.xla_impl.trace import dynamic_batch, move_trace_to_device, trace

__all__ = ["PartitionerConfig", "__version__", "analyze", "dynamic_batch", "move_trace_to_device", "partition", "trace"]
