"""Issue 33.6: values fake tensors cannot know are host reads at their lines, not the user's error; host syncs,
uploads and graph executions are counted as torch-xla 2.9 counts them (TransferFromDeviceTime,
TransferToDeviceTime, ExecuteTime; measured with scripts/measure_train_counts.py)."""

from __future__ import annotations

import pytest
from helpers import MODELS, expectations

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.errors import ModelLoadError
from neuronprobe.training import TrainOptions


def _line(path, marker: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if f"# {marker}" in text)


def _train(tmp_or_name, backend: str = "static"):
    path = tmp_or_name if not isinstance(tmp_or_name, str) else MODELS / tmp_or_name
    return analyze_spec(str(path), AnalyzeOptions(backend=backend, train=TrainOptions()))


def test_an_assert_on_boxes_is_a_host_read_at_its_line_not_an_error():
    path = MODELS / "train_box_assert.py"
    report = _train("train_box_assert.py")  # before issue 33: exit 2, "train_step() raised AssertionError"
    t = report.train
    # the two asserts and the two .item() reads: four device-to-host transfers, each running the pending graph
    # first, and the six torch.tensor(..., device=) targets: uploads, which neither sync nor execute a graph
    assert (t.host_syncs_per_step, t.graphs_per_step, t.uploads_per_step) == (4, 5, 6)
    for line, verdict, op in expectations(path):
        (found,) = [f for f in report.findings if f.line == line and f.file == "tests/models/train_box_assert.py"]
        assert (found.verdict, str(found.phase)) == (verdict, "loop") and found.op == (op or "<python branch on tensor value>")
        assert "host every step" in found.message and "5 graph executions instead of 1" in found.message
    # the assert in the forward: the forward capture's finding, which carries the read's per-step cost
    forward = [f for f in report.findings if f.line == _line(path, "FORWARD-READ")]
    assert len(forward) == 1 and forward[0].phase == "forward" and forward[0].verdict == "control_flow"
    assert "in the training step this line is a host read" in forward[0].message
    assert not [lim for lim in report.not_analysed if lim.what == "training step"]  # the fake run decided it


def test_a_step_that_fails_on_a_stand_in_runs_again_on_the_real_batch():
    path = MODELS / "train_box_check.py"
    report = _train("train_box_check.py")  # the stand-in reads False: the fake step raised "degenerate boxes"
    ((line, verdict, _),) = expectations(path)
    (found,) = [f for f in report.findings if f.phase == "loop"]
    assert (found.line, found.verdict, found.op) == (line, verdict, "<python branch on tensor value>")
    (note,) = [lim.why for lim in report.not_analysed if lim.what == "training step"]
    assert note.startswith(f"the fake-tensor step could not know the value read at tests/models/train_box_check.py:{line}")
    assert "ran again on the example batch with real tensors" in note
    # the real run records the step's ops, and its reads as reads (not as aten::_local_scalar_dense ops)
    assert report.train.host_syncs_per_step == 1 and report.train.graphs_per_step == 2
    assert {p for p in report.summary.phases} >= {"forward", "backward", "optimizer", "loop"}
    assert not [r for r in report.ops if r.op.startswith("aten::_local_scalar_dense")]


def test_a_real_error_after_a_stand_in_is_still_the_users(tmp_path):
    model = tmp_path / "bad_boxes.py"
    model.write_text(
        "import torch\n"
        "def get_model():\n    return torch.nn.Linear(4, 4)\n"
        "def get_example_inputs():\n    return (torch.zeros(3, 4),)\n"
        "def train_step(model, optimizer, batch):\n"
        "    (boxes,) = batch\n"
        "    if not bool((boxes[:, 2:] > boxes[:, :2]).all()):\n"
        "        raise ValueError('degenerate boxes')\n"
        "    model(boxes).sum().backward()\n"
    )
    with pytest.raises(ModelLoadError, match=r"bad_boxes\.py:9: train_step\(\) raised ValueError: degenerate boxes"):
        _train(model)


def test_uploads_are_not_host_syncs():
    path = MODELS / "train_uploads.py"
    report = _train("train_uploads.py")
    t = report.train
    # torch-xla 2.9 on this step: TransferToDeviceTime 18, TransferFromDeviceTime 1, ExecuteTime 2
    # (before issue 33 the .to(x.device) copies read as 18 host syncs and 19 graph executions)
    assert (t.uploads_per_step, t.host_syncs_per_step, t.graphs_per_step) == (18, 1, 2)
    assert [f.line for f in report.findings if f.phase == "loop"] == [line for line, _, _ in expectations(path)]
    assert not [f for f in report.findings if f.line == _line(path, "UPLOAD")]


def test_the_counts_agree_with_torch_xla_on_the_device(xla_env):
    report = _train("train_box_assert.py", backend="xla-cpu")
    t = report.train
    # torch-xla's ExecuteTime and TransferFromDeviceTime for the one step the worker runs: what neuronprobe predicts
    assert (t.observed_graphs_per_step, t.observed_host_syncs_per_step) == (t.graphs_per_step, t.host_syncs_per_step) == (5, 4)
    # TransferToDeviceTime holds the six targets, and on a first step the Python scalar constants torch-xla has not
    # cached yet (the optimizer's lr, betas, bias corrections): at least the step's own uploads, never fewer
    assert t.uploads_per_step == 6 and t.observed_uploads_per_step >= 6
