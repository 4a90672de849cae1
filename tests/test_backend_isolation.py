"""The killable SDK worker survives a parent that already ran parallel CPU ops."""

from __future__ import annotations

from pathlib import Path

import torch

from neuronprobe.process.isolation import run_isolated


def _softmax_sum(progress) -> float:
    return float(torch.softmax(torch.ones(256, 256), -1).sum())


def test_forked_step_does_not_hang_after_parallel_work_in_the_parent(tmp_path: Path):
    torch.softmax(torch.randn(512, 512), -1)  # starts the parent's OpenMP pool
    result = run_isolated(_softmax_sum, (), limit_s=30, workdir=tmp_path, name="softmax")
    assert result.status == "ok", result
    assert result.value == 256.0
