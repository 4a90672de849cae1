"""--train through data-dependent sizes: findings at the user's line, not "the model code raised".

The training step runs on fake tensors; a boolean mask (``h[h > 0]``) has a size no fake
tensor knows. With a shape environment the size becomes an unbacked symbol and the step
runs on, so the mask is a dynamic_shape finding in the forward, as ``analyze`` without
``--train`` reports it.
"""

from __future__ import annotations

from pathlib import Path

import neuronprobe
from neuronprobe.vocabulary import Phase, Verdict

MODEL = Path(__file__).resolve().parent / "models" / "train_bool_mask.py"


def _expect_line() -> int:
    return next(i for i, line in enumerate(MODEL.read_text().splitlines(), 1) if "# EXPECT" in line)


def test_a_boolean_mask_in_a_training_step_is_a_dynamic_shape_finding() -> None:
    report = neuronprobe.analyze(str(MODEL), train=True, backend="static")
    forward = [f for f in report.findings if f.phase is Phase.FORWARD]
    assert [(f.verdict, f.op, f.line) for f in forward] == [(Verdict.DYNAMIC_SHAPE, "aten::index.Tensor", _expect_line())]
    assert report.train is not None
    assert any(f.phase is Phase.BACKWARD for f in report.findings)  # the mask's backward scatters (index_put)
