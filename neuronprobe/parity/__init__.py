"""Numerical parity before the hardware run (issue 25): the fp32 reference on the CPU against emulated Neuron precisions.

* :mod:`.precision`: a Precision (auto-cast, auto-cast type, served dtype, mixed-precision accumulation), the SDK defaults, the flags.
* :mod:`.emulate`: run a forward on the CPU as Neuron would compute it under a Precision.
* :mod:`.drift`: every module's output against the reference, and the first module past the tolerance.
* :mod:`.metrics`: NxD Inference's logit tolerances, greedy divergence, top-1 stability.
* :mod:`.run`: the whole run, as the report's ParitySection.
"""
