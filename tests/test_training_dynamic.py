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


def test_the_masks_backward_is_judged_by_its_tensor_arguments_like_the_forward() -> None:
    """The gradient of ``h[h > 0]`` is ``index_put(zeros, [mask], grad, accumulate=True)``: its ``indices`` are a bool
    tensor, so the rule on the argument's dtype (``bool-mask-write``: torch-xla replaces a bool index with nonzero())
    applies in the backward as it does to a forward ``x[mask] = v``. The step's recorder names each tensor argument
    (capture.graph.describe_call), so a rule's condition on a tensor argument can hold there."""
    report = neuronprobe.analyze(str(MODEL), train=True, backend="static")
    backward = [f for f in report.findings if f.phase is Phase.BACKWARD]
    assert [(f.rule, f.verdict, f.op, f.line) for f in backward] == [("bool-mask-write", Verdict.DYNAMIC_SHAPE, "aten::index_put", _expect_line())]
    assert report.train is not None and report.train.graphs_per_step == 3  # each dynamic-shape op splits the step's graph
