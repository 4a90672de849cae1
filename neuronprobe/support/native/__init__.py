"""TorchNeuron, the native PyTorch backend on trn2/trn3 (device ``neuron``, the PrivateUse1 key).

* :mod:`.stack`: which stack a target and SDK release run (``--stack xla|native``).
* :mod:`.table`: the native support table (bundled, from a release's
  ``torch_api_compatibility.md``, or a Neuron host's own registrations), with its age.
* :mod:`.resolve`: registered names matched to real overloads through torch's dispatch table.
* :mod:`.classify`: a captured call's verdict on the native stack (kernel, CPU fallback,
  64-bit narrowing), with the release each rule describes.
"""
