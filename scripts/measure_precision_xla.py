"""Measure on torch-xla 2.9 CPU what the risky low-precision constructs do in float16 and bfloat16.

Run with the torch-xla 2.9 stack (PJRT_DEVICE=CPU, e.g. ~/.cache/neuronprobe/xla-cpu/venv/bin/python);
its output is the torch-xla provenance of neuronprobe/support/data/precision_rules.json. Not part of
the package or the tests.
"""

import os

os.environ.setdefault("PJRT_DEVICE", "CPU")
import torch
import torch.nn.functional as F
import torch_xla

dev = torch_xla.device()


def show(name, fn):
    try:
        print(f"{name}: {fn().cpu().tolist()}", flush=True)
    except Exception as exc:  # a construct torch refuses is itself the measurement
        print(f"{name}: raises {type(exc).__name__}: {str(exc)[:120]}", flush=True)


def measure(dtype):
    zeros = torch.zeros(3, dtype=dtype, device=dev)
    mask = torch.tensor([1.0, 0.0, 1.0], dtype=dtype, device=dev)
    keep = torch.tensor([True, False, True], device=dev)
    nothing = torch.zeros(3, dtype=torch.bool, device=dev)
    print(f"--- {dtype}")
    show("(1 - mask) * -1e9", lambda: (1.0 - mask) * -1e9)
    show("where(mask, 0, -1e9)", lambda: torch.where(keep, zeros, -1e9))
    show("masked_fill(mask, -1e9)", lambda: zeros.masked_fill(keep, -1e9))
    show("full(-1e9)", lambda: torch.full((3,), -1e9, dtype=dtype, device=dev))
    show("softmax of a fully masked row", lambda: torch.where(nothing, zeros, -1e9).softmax(-1))
    show("rsqrt(zeros + 1e-12)", lambda: torch.rsqrt(zeros + 1e-12))
    show("(ones) * 1e5", lambda: (zeros + 1) * 1e5)
    show("(0.5) * 1e5", lambda: (zeros + 0.5) * 1e5)
    show("LayerNorm(eps=1e-12) of a constant row", lambda: torch.nn.LayerNorm(3, eps=1e-12).to(dtype).to(dev)(zeros[None] + 1))
    show("F.normalize of a zero row", lambda: F.normalize(zeros[None], dim=-1))


measure(torch.float16)
measure(torch.bfloat16)
