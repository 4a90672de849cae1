"""Each problem construct is found with its verdict, at the user's file and line, with a fix."""

from __future__ import annotations

import pytest
from helpers import MODELS, expectations

import neuronprobe

CASES = [
    "index_put_accumulate.py",
    "nonzero.py",
    "bool_mask.py",
    "unique.py",
    "sparse.py",
    "data_branch.py",
    "float64.py",
    "fft.py",
    "quantile.py",
]


@pytest.fixture(scope="module")
def reports():
    return {name: neuronprobe.analyze(str(MODELS / name), backend="static") for name in CASES}


@pytest.mark.parametrize("name", CASES)
def test_each_marked_line_has_its_finding(reports, name):
    report = reports[name]
    path = MODELS / name
    for line, verdict, op in expectations(path):
        at_line = [f for f in report.findings if f.line == line and f.file and f.file.endswith(name)]
        assert at_line, f"no finding at {name}:{line}; got {[(f.verdict, f.file, f.line) for f in report.findings]}"
        assert verdict in {f.verdict for f in at_line}
        if op:
            assert op in {f.op for f in at_line}, [f.op for f in at_line]
        for f in at_line:
            assert f.fix, "every finding carries a fix"
            assert f.rule, "every finding names its rule"
            assert f.source_line and "EXPECT" in f.source_line, "the finding quotes the user's source line"


def test_index_put_without_accumulate_is_lowered(tmp_path):
    model = tmp_path / "plain_index_put.py"
    model.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x, idx, y):\n"
        "        x = x.clone()\n"
        "        x[idx] = y\n"
        "        return x\n"
        "def get_model():\n    return M()\n"
        "def get_example_inputs():\n    return (torch.randn(4, 8), torch.tensor([0, 2]), torch.randn(2, 8))\n"
    )
    report = neuronprobe.analyze(str(model), backend="static")
    assert report.findings == []
    assert any(r.op == "aten::index_put_" and r.verdict == "lowered" for r in report.ops)


def test_sparse_fallback_costs_transfers(reports):
    report = reports["sparse.py"]
    # to_sparse moves the dense 8x8 float32 input down (256 B) and its sparse result back.
    assert report.summary.fallback_bytes_per_call > 0
    assert report.summary.fallback_bytes_per_call == sum(f.bytes_per_call for f in report.findings)
    assert report.verdict == "runs_with_fallbacks"


def test_data_branch_falls_back_to_dynamo_and_reports_the_export_failure(reports):
    report = reports["data_branch.py"]
    assert report.capture.method == "export+dynamo"
    assert "GuardOnDataDependentSymNode" in (report.capture.export_error or "")
    assert report.graph_breaks and report.graph_breaks[0].line == expectations(MODELS / "data_branch.py")[0][0]
    assert any(limit.what == "torch.export capture" for limit in report.not_analysed)
    # The linear layer before the branch was still captured, by dynamo, under export's module path spelling.
    linear = next(r for r in report.ops if r.op in ("aten::addmm", "aten::linear"))
    assert linear.modules == ["proj"]


def test_dynamic_shape_cuts_the_device_graph(reports):
    assert reports["nonzero.py"].summary.device_graphs == 2


def test_custom_op_is_never_silently_lowered(tmp_path):
    model = tmp_path / "custom.py"
    model.write_text(
        "import torch\n"
        "@torch.library.custom_op('npt_test::scale', mutates_args=())\n"
        "def scale(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
        "@scale.register_fake\n"
        "def _(x):\n    return torch.empty_like(x)\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return scale(x) + 1  # custom op\n"
        "def get_model():\n    return M()\n"
        "def get_example_inputs():\n    return (torch.randn(4),)\n"
    )
    report = neuronprobe.analyze(str(model), backend="static")
    custom = [f for f in report.findings if f.op == "npt_test::scale"]
    assert len(custom) == 1 and custom[0].verdict == "cpu_fallback" and custom[0].rule == "custom-op"
    assert custom[0].line == 10


def test_mlp_has_no_findings():
    report = neuronprobe.analyze(str(MODELS / "mlp.py"), backend="static")
    assert report.findings == []
    assert report.summary.support_percentage == 100.0
    assert report.verdict == "runs"


def test_python_api_takes_a_module_and_inputs():
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    report = neuronprobe.analyze(model, (torch.randn(2, 4),), name="seq")
    assert report.model == "seq"
    assert report.summary.ops_total >= 2
    assert {r.verdict for r in report.ops} <= {"lowered", "decomposed"}
    with_kwargs = neuronprobe.analyze(model, {"input": torch.randn(2, 4)})
    assert with_kwargs.summary.ops_total == report.summary.ops_total


def test_trn2_sort_is_a_compile_error_with_its_code(tmp_path):
    model = tmp_path / "sorter.py"
    model.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.sort(x, dim=-1).values\n"
        "def get_model():\n    return M()\n"
        "def get_example_inputs():\n    return (torch.randn(4, 8),)\n"
    )
    trn2 = neuronprobe.analyze(str(model), target="trn2", backend="static", stack="xla")
    assert [(f.verdict, f.ncc_code, f.line) for f in trn2.findings] == [("compile_error", "NCC_EVRF029", 4)]
    # issue 36: trn2 defaults to TorchNeuron (SDK 2.33+), where sort has no Neuron kernel and runs on the host
    native = neuronprobe.analyze(str(model), target="trn2", backend="static")
    assert [(f.verdict, f.line) for f in native.findings] == [("cpu_fallback", 4)] and native.support_table.stack == "native"
    trn1 = neuronprobe.analyze(str(model), target="trn1", backend="static")
    assert [(f.verdict, f.rule) for f in trn1.findings] == [("compile_error", "sort")]


def test_reanalysing_an_edited_file_in_one_process_reports_the_new_lines(tmp_path):
    path = tmp_path / "edited.py"
    source = (MODELS / "nonzero.py").read_text()
    path.write_text(source)
    first = neuronprobe.analyze(str(path), backend="static")
    path.write_text("# a comment pushes every line down\n" + source)
    second = neuronprobe.analyze(str(path), backend="static")
    assert [f.line for f in second.findings] == [f.line + 1 for f in first.findings]
    assert second.findings[0].source_line == first.findings[0].source_line


def test_reports_are_written_readable_by_others(tmp_path):
    import os
    import stat

    from neuronprobe.files import write_atomic

    target = write_atomic(tmp_path / "r.json", "{}")
    mode = stat.S_IMODE(os.stat(target).st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_composite_ops_name_the_parts_they_decompose_into():
    report = neuronprobe.analyze(str(MODELS / "mlp.py"), backend="static")
    linear = next(r for r in report.ops if r.op == "aten::linear")
    assert linear.verdict == "decomposed" and "aten::addmm" in linear.reason
    quantile = neuronprobe.analyze(str(MODELS / "quantile.py"), backend="static").findings[0]
    assert (quantile.rule, quantile.verdict) == ("composite-part", "compile_error")
    assert "aten::sort" in quantile.message


def test_custom_op_without_a_fake_kernel_is_found_at_its_line(tmp_path):
    model = tmp_path / "nofake.py"
    model.write_text(
        "import torch\n"
        "@torch.library.custom_op('npt_nofake::twice', mutates_args=())\n"
        "def twice(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return twice(x) + 1\n"
        "def get_model():\n    return M()\n"
        "def get_example_inputs():\n    return (torch.randn(4),)\n"
    )
    report = neuronprobe.analyze(str(model), backend="static")
    assert [(f.op, f.verdict, f.rule, f.line) for f in report.findings] == [("npt_nofake::twice", "cpu_fallback", "custom-op", 7)]
    assert "register_fake" in report.findings[0].fix
    assert any(limit.what == "torch.export capture" for limit in report.not_analysed)


def test_a_capture_that_records_nothing_is_never_called_green():
    from neuronprobe.report.model import CaptureInfo, Report

    report = Report(model="m", target="trn1", capture=CaptureInfo(method="export+dynamo", export_error="X: y", nodes=0))
    assert report.verdict == "not_analysed"
    assert Report(model="m", target="trn1", capture=CaptureInfo(method="export", nodes=3)).verdict == "runs"
