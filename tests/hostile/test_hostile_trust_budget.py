"""The op budget (issue 34.7): a forward that loops for ever on fake tensors is stopped at its line, exit 2.

Such a loop allocates nothing real, so the memory bound never fires; it ran to the
30-minute ``--timeout``. The budget (``DEFAULT_OP_BUDGET``, lowered here through
``NEURONPROBE_OP_BUDGET`` to keep the test fast) stops it as a typed error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from neuronprobe.capture.graph import RunawayForward, capture, op_budget_limit
from neuronprobe.defaults import DEFAULT_OP_BUDGET, OP_BUDGET_ENV

HOSTILE = Path(__file__).parent
REPO = HOSTILE.parents[1]


def test_a_runaway_forward_is_stopped_at_its_line_with_exit_2(tmp_path):
    model = HOSTILE / "loop_forever.py"
    before = model.read_bytes()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "neuronprobe", "analyze", str(model), "--backend", "static", "-o", str(tmp_path / "r"), "--timeout", "600"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, OP_BUDGET_ENV: "300", "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("error: tests/hostile/loop_forever.py:7: the forward recorded more than 300 ops")
    assert "runaway loop" in lines[0] and OP_BUDGET_ENV in lines[0]
    assert time.monotonic() - started < 300  # the budget, not --timeout 600, ended it
    assert model.read_bytes() == before and not (tmp_path / "r").exists()


class Loops(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            x = x * 2  # the runaway line


class Small(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2).sin()


def test_the_budget_stops_in_process_and_leaves_torch_as_it_was(monkeypatch):
    monkeypatch.setenv(OP_BUDGET_ENV, "50")
    original = torch.fx.Graph.create_node
    with pytest.raises(RunawayForward, match=r"test_hostile_trust_budget.py:\d+: the forward recorded more than 50 ops \(x = x \* 2  # the runaway line\)"):
        capture(Loops(), (torch.ones(2),), {})
    assert torch.fx.Graph.create_node is original
    assert "aten::sin" in {c.op for c in capture(Small(), (torch.ones(2),), {}).calls}  # a real model fits the budget


@pytest.mark.parametrize("value", ["", "0", "-5", "many", "1e9"])
def test_an_unusable_override_falls_back_to_the_default(monkeypatch, value):
    monkeypatch.setenv(OP_BUDGET_ENV, value)
    assert op_budget_limit() == DEFAULT_OP_BUDGET
