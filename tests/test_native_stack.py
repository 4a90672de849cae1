"""TorchNeuron, the native stack (issue 36): the stack choice, the native table and its sources, eager verdicts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from helpers import MODELS, expectations, refused
from typer.testing import CliRunner

import neuronprobe
from neuronprobe.cli import app
from neuronprobe.errors import InputError
from neuronprobe.report.diff import diff_reports
from neuronprobe.report.model import Report, load_report
from neuronprobe.support.native import stack as stacks
from neuronprobe.support.native.table import bundled, native_table, read_support_table
from neuronprobe.vocabulary import Verdict

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "native"
COMPAT = DATA / "torch_api_compatibility.md"
DUMP = DATA / "registrations_dump.json"
CASES = [
    "native_sort.py",
    "native_linalg.py",
    "native_float64.py",
    "native_int64_range.py",
    "native_cast_loop.py",
    "native_int64_input.py",
    "native_min_dim.py",
]


@pytest.fixture(autouse=True)
def no_installed_table(tmp_path, monkeypatch):
    """No `setup native-table` output of the machine running the tests: the bundled table answers."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg")))
    try:
        return {name: neuronprobe.analyze(str(MODELS / name), backend="static", target="trn2") for name in [*CASES, "native_mlp.py", "nonzero.py"]}
    finally:
        mp.undo()


# --- the stack choice -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "sdk", "stack"),
    [
        ("trn1", None, "xla"),
        ("inf2", "2.33.0", "xla"),
        ("trn2", None, "native"),
        ("trn2", "2.33.0", "native"),
        ("trn2", "2.32.0", "xla"),
        ("trn3", "2.34.0", "native"),
    ],
)
def test_the_default_stack_follows_the_target_and_release(target, sdk, stack):
    assert stacks.default_stack(target, sdk) == stack


def test_a_native_stack_where_torchneuron_does_not_run_is_refused():
    with pytest.raises(InputError, match="trn2 and trn3 only"):
        stacks.check_stack("native", "trn1")
    with pytest.raises(InputError, match=r"public from Neuron 2\.33\.0"):
        stacks.check_stack("native", "trn2", "2.32.0")
    assert stacks.check_stack("xla", "trn2") == "xla"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--stack", "native"], "trn2 and trn3 only, not on --target trn1"),
        (["--stack", "cuda", "--target", "trn2"], "--stack 'cuda': unknown stack"),
        (["--target", "trn2", "--backend", "xla-cpu"], "--backend xla-cpu observes torch-xla"),
        (["--target", "trn1", "--support-table", str(COMPAT)], "is for --stack native"),
        (["--target", "trn2", "--sdk", "2.31.0", "--stack", "native"], "public from Neuron 2.33.0"),
    ],
)
def test_bad_stack_choices_exit_2_with_one_sentence(args, needle, tmp_path):
    line = refused(["analyze", str(MODELS / "native_sort.py"), "-o", str(tmp_path), *args], MODELS / "native_sort.py")
    assert needle in line
    assert not list(tmp_path.iterdir()), "nothing half-written"


def test_the_report_names_the_stack_and_the_table_and_round_trips(reports):
    report = reports["native_sort.py"]
    info = report.support_table
    assert (info.stack, info.origin) == ("native", "bundled")
    assert info.age_days == (date.today() - date(2026, 4, 21)).days
    assert "parmoham-aws/test-repo-parmoham@98154b86" in info.version and "days old" in info.version
    assert report.backend.name == "static"
    again = Report.from_json(report.to_json())
    assert again == report and again.support_table.stack == "native"


def test_an_xla_report_says_xla_and_older_reports_load_as_xla(tmp_path):
    old = json.loads((Path(__file__).parent / "data" / "report_schema_v2.json").read_text())
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    assert load_report(str(path)).support_table.stack == "xla"


def test_the_console_backend_line_shows_the_stack(tmp_path):
    result = CliRunner().invoke(app, ["analyze", str(MODELS / "native_linalg.py"), "--target", "trn2", "--backend", "static", "-o", str(tmp_path), "--no-html"])
    assert result.exit_code == 0, result.output
    assert "backend static · stack native" in result.output
    saved = load_report(str(tmp_path / "native_linalg.json"))
    assert saved.support_table.stack == "native"


def test_diff_never_compares_two_stacks_silently(reports):
    native = reports["native_sort.py"]
    xla = neuronprobe.analyze(str(MODELS / "native_sort.py"), backend="static", target="trn2", stack="xla")
    assert xla.support_table.stack == "xla"
    d = diff_reports(xla, native)
    assert not d.comparable and "different stack (xla vs native)" in d.not_comparable_reason
    assert d.regressions == []
    assert diff_reports(native, native).comparable


# --- eager verdicts at the user's line ---------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_each_marked_line_has_its_native_finding(reports, name):
    report = reports[name]
    for line, verdict, op in expectations(MODELS / name):
        at_line = [f for f in report.findings if f.line == line and f.file and f.file.endswith(name)]
        assert at_line, f"no finding at {name}:{line}: {[(f.verdict, f.rule, f.line) for f in report.findings]}"
        assert verdict in {f.verdict for f in at_line}
        assert op in {f.op for f in at_line}
        assert all(f.fix and f.rule.startswith("native-") for f in at_line)


def test_a_fallback_says_its_bytes_per_call_and_its_rule(reports):
    (sort,) = [f for f in reports["native_sort.py"].findings if f.op == "aten::sort"]
    assert sort.verdict is Verdict.CPU_FALLBACK and sort.rule == "native-composite-part"
    assert "aten::sort.stable" in sort.message or "sort.values_stable" in sort.message
    # (4, 16) float32 in, values (4, 16) float32 and indices (4, 16) int64 out
    assert sort.bytes_per_call == 4 * 16 * 4 * 2 + 4 * 16 * 8
    (qr,) = [f for f in reports["native_linalg.py"].findings if f.op == "aten::linalg_qr"]
    assert qr.rule == "native-registered-fallback" and qr.bytes_per_call == 3 * 8 * 8 * 4


def test_a_cast_in_a_loop_counts_every_round_trip(reports):
    casts = [f for f in reports["native_cast_loop.py"].findings if f.rule == "native-64bit-cast"]
    assert sorted((f.line, f.count) for f in casts) == [(9, 3), (10, 3)]
    assert {"casts float32 to int64", "casts int64 to float32"} == {
        m for f in casts for m in ("casts float32 to int64", "casts int64 to float32") if m in f.message
    }


def test_int64_beyond_int32_and_float64_are_precision_notes_that_do_not_block(reports):
    (big,) = [f for f in reports["native_int64_range.py"].findings if f.rule == "native-int64-range"]
    assert big.verdict is Verdict.PRECISION
    assert str(2**31) in big.message and "wraps" in big.message
    (f64,) = reports["native_float64.py"].findings
    assert (f64.verdict, f64.rule) == (Verdict.PRECISION, "native-float64")
    assert reports["native_float64.py"].verdict.value == "runs"


def test_kernels_run_on_the_device_and_eager_data_dependent_sizes_are_no_problem(reports):
    assert reports["native_mlp.py"].findings == []
    assert reports["native_mlp.py"].summary.support_percentage == 100.0
    nonzero = reports["nonzero.py"]
    assert not [f for f in nonzero.findings if f.verdict is Verdict.DYNAMIC_SHAPE]
    assert any(o.op == "aten::nonzero" and o.verdict is Verdict.LOWERED for o in nonzero.ops)


# --- the bundled table, built from the source -------------------------------------------------------


def test_the_bundled_table_resolves_names_through_the_dispatcher():
    t = bundled()
    assert "max.dim" in t.neuron_kernel and "min.dim" not in t.neuron_kernel  # addendum: min registered, min.dim falls back
    assert "linalg_qr" in t.registered_cpu_fallback
    assert {"view_as_real", "view_as_complex"} <= t.silent_fallback and "view_as_real" in t.no_kernel
    assert "argsort.stable" in t.host_kernels
    doc = json.loads((ROOT / "neuronprobe" / "support" / "data" / "native_table.json").read_text())
    assert doc["source"]["commit"].startswith("98154b86") and doc["counts"]["registered_names"] == 403
    assert {"div", "eq", "softmax", "mul_"} <= set(doc["unmatched_registrations"]) and doc["counts"]["unmatched"] == 26


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_the_build_script_reads_only_what_torchneuron_registers(tmp_path):
    repo = tmp_path / "tn"
    ops = repo / "torch_neuronx" / "python_ops"
    (ops / "legacy").mkdir(parents=True)
    (repo / "torch_neuronx" / "csrc").mkdir()
    (ops / "mlir.py").write_text(
        'from x import register_aten, neuron_op\n@register_aten(["aten::mm", "aten::mm.out"])\ndef f(a, b): ...\n'
        '# @register_aten(["aten::bmm"])\n@neuron_op("aten::div")\nclass D: ...\n'
    )
    (ops / "legacy" / "old.py").write_text('@neuron_op("aten::topk")\nclass T: ...\n')
    (ops / "__init__.py").write_text('aten_lib.impl("gather", g, "PrivateUse1")\naten_lib.impl("rms_norm", g, "AutogradPrivateUse1")\n')
    (ops / "cpu_fallback_registrations.py").write_text('def register_cpu_fallback_ops(lib):\n    ops = [("linalg_qr", None)]\n')
    (repo / "torch_neuronx" / "csrc" / "B.cpp").write_text(
        'TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {\n  m.impl("clone", &c);\n  // m.impl("copy_", &c);\n}\n'
        'TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("contiguous", &c); }\n'
    )
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    out = tmp_path / "table.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_native_table.py"), str(repo / ".git"), "--out", str(out), "--repo", "me/tn"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert set(doc["neuron_kernel"]) == {"mm", "mm.out", "gather", "clone"}
    assert doc["unmatched_registrations"] == ["div"]
    assert doc["registered_cpu_fallback"] == ["linalg_qr"]
    assert "defined but not called" in doc["provenance"][1]
    assert doc["source"]["repository"] == "me/tn" and len(doc["source"]["commit"]) == 40


# --- a release's table, and the installed release's ---------------------------------------------------


def test_a_release_compatibility_table_overrides_the_bundled_one():
    t = read_support_table(COMPAT)
    assert (t.origin, t.release, t.dated) == ("file", "torch-neuronx 2.13.3", "2026-11-02")
    assert "sort.stable" in t.neuron_kernel and "sort.values_stable" in t.neuron_kernel  # Y torch.sort
    assert t.dtype_fallback["cumsum"] == frozenset({"int64"}) and "cumsum" in t.neuron_kernel
    assert "quantize_per_tensor" in t.unsupported and "manual_seed" not in t.neuron_kernel


def test_analyze_with_a_release_table_uses_it_and_says_so(tmp_path):
    report = neuronprobe.analyze(str(MODELS / "native_sort.py"), backend="static", target="trn2", support_table=COMPAT)
    assert report.support_table.origin == "file" and "torch-neuronx 2.13.3" in report.support_table.version
    assert not [f for f in report.findings if f.op == "aten::sort"], "the release's table says torch.sort runs natively"


def test_a_table_that_is_not_one_is_refused(tmp_path):
    bad = tmp_path / "t.md"
    bad.write_text("# nothing here\n| a | b |\n")
    line = refused(["analyze", str(MODELS / "native_sort.py"), "--target", "trn2", "--support-table", str(bad), "-o", str(tmp_path / "o")], bad)
    assert "no rows with a status of Y, CPU_FALLBACK or N" in line


def test_setup_native_table_from_a_recorded_dump_is_used_by_later_analyses(tmp_path, monkeypatch):
    result = CliRunner().invoke(app, ["setup", "native-table", "--from-dump", str(DUMP)])
    assert result.exit_code == 0, result.output
    written = tmp_path / "xdg" / "neuronprobe" / "native-table.json"
    assert "torch-neuronx 2.13.3.0 as installed" in result.output and written.is_file()
    t = native_table()
    assert t.origin == "installed" and t.dated == "2026-11-20"
    assert {"sort.stable", "mm", "addmm"} <= t.neuron_kernel and "div" not in t.neuron_kernel
    report = neuronprobe.analyze(str(MODELS / "native_sort.py"), backend="static", target="trn2")
    assert report.support_table.origin == "installed"
    assert report.support_table.age_days == (date.today() - date(2026, 11, 20)).days
    assert "torch-neuronx 2.13.3.0 as installed" in report.support_table.version


def test_setup_native_table_from_the_fake_sdk_reads_its_live_registrations(tmp_path, monkeypatch):
    fake = Path(__file__).parent / "fake_backend"
    monkeypatch.setenv("PYTHONPATH", f"{fake / 'native'}:{fake}")
    out = tmp_path / "t.json"
    line = refused(["setup", "native-table", "--path", str(out)])
    assert "test fake, not the SDK" in line and not out.exists()
    monkeypatch.setenv("NEURONPROBE_ALLOW_FAKE_SDK", "1")
    result = CliRunner().invoke(app, ["setup", "native-table", "--path", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert "FAKE SDK" in doc["release"]
    assert set(doc["neuron_kernel"]) >= {"mm", "addmm"} and "sort.stable" not in doc["neuron_kernel"]


def test_setup_native_table_without_torchneuron_exits_2(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent / "fake_backend" / "placeholder"))
    line = refused(["setup", "native-table", "--path", str(tmp_path / "t.json")])
    assert "no TorchNeuron to read here" in line


# --- the nightly config and parity ----------------------------------------------------------------


def _config(tmp_path: Path, text: str):
    from neuronprobe.nightly.run import load_config

    (tmp_path / "native_mlp.py").write_text((MODELS / "native_mlp.py").read_text())
    path = tmp_path / "night.toml"
    path.write_text(text)
    return load_config(path)


def test_the_nightly_config_takes_a_stack_per_model_and_uses_it(tmp_path):
    from neuronprobe.nightly.run import analyze_model

    config = _config(tmp_path, "target = 'trn2'\n[[models]]\nmodel = 'native_mlp.py'\n[[models]]\nname = 'x'\nmodel = 'native_mlp.py'\nstack = 'xla'\n")
    native, xla = config.models
    assert (config.stack_of(native), config.stack_of(xla)) == (None, "xla")
    assert analyze_model(native, config, None, "test").support_table.stack == "native"
    assert analyze_model(xla, config, None, "test").support_table.stack == "xla"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("stack = 'cuda'\n[[models]]\nmodel = 'native_mlp.py'\n", "`stack` must be one of xla, native"),
        ("stack = 'native'\n[[models]]\nmodel = 'native_mlp.py'\n", "models 'native_mlp': --stack native: TorchNeuron runs on trn2 and trn3 only"),
    ],
)
def test_a_bad_nightly_stack_is_a_config_error(tmp_path, text, needle):
    from neuronprobe.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(needle)):
        _config(tmp_path, text)


def test_parity_keeps_the_stack_and_refuses_xla_cpu_on_native(tmp_path):
    result = CliRunner().invoke(app, ["parity", str(MODELS / "native_mlp.py"), "--target", "trn2", "-o", str(tmp_path), "--no-html"])
    assert result.exit_code == 0, result.output
    assert load_report(str(tmp_path / "native_mlp.json")).support_table.stack == "native"
    line = refused(["parity", str(MODELS / "native_mlp.py"), "--target", "trn2", "--backend", "xla-cpu", "-o", str(tmp_path / "x")])
    assert "--backend xla-cpu runs torch-xla" in line


def test_doctor_names_the_native_table_and_its_age(tmp_path):
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code in (0, 2), result.output
    data = json.loads(result.output[result.output.index("{") :])
    assert data["native_table"]["origin"] == "bundled" and data["native_table"]["age_days"] == (date.today() - date(2026, 4, 21)).days
    assert CliRunner().invoke(app, ["setup", "native-table", "--from-dump", str(DUMP)]).exit_code == 0
    data = json.loads((lambda out: out[out.index("{") :])(CliRunner().invoke(app, ["doctor", "--json"]).output))
    assert data["native_table"]["origin"] == "installed" and data["native_table"]["dated"] == "2026-11-20"


def test_an_int64_example_input_beyond_int32_is_a_note_at_the_line_that_reads_it(reports):
    (f,) = [f for f in reports["native_int64_input.py"].findings if f.rule == "native-int64-input"]
    assert f.verdict is Verdict.PRECISION and f.line == 7 and str(2**40) in f.message and "argument 1" in f.message


def test_the_live_native_backend_is_diffed_against_the_native_table(fake_native_sdk, tmp_path, monkeypatch):
    from neuronprobe.analysis import AnalyzeOptions, analyze_spec

    fixture = tmp_path / "fake_fixture.json"
    fixture.write_text(json.dumps({"fallback_ops": ["aten::nonzero"]}))
    monkeypatch.setenv("FAKE_NEURON_FIXTURE", str(fixture))
    report = analyze_spec(str(MODELS / "nonzero.py"), AnalyzeOptions(backend="neuron", target="trn2"))
    assert (report.backend.kind, report.backend.fake, report.support_table.stack) == ("native", True, "native")
    diff = report.prediction_diff
    # the April source registers nonzero (a Neuron kernel), the fixture's device falls back on it
    assert [(m.op, m.predicted, m.observed, m.line) for m in diff.predicted_ok_observed_failing] == [
        ("aten::nonzero", Verdict.LOWERED, Verdict.CPU_FALLBACK, 7)
    ]
    # gt.Scalar: "gt" is registered without an overload (it names nothing), but gt.Scalar's composite kernel writes
    # through the registered gt.Scalar_out: predicted to run on the device, and the fake device ran it
    assert diff.predicted_failing_observed_ok == []
    (gt,) = [o for o in report.ops if o.op == "aten::gt.Scalar"]
    assert gt.verdict is Verdict.LOWERED and "gt.Scalar_out" in gt.reason


def test_a_structured_op_runs_where_its_out_variant_runs(reports):
    """min is registered, min.dim is not and its out variant min.dim_min has no kernel; max.dim is registered (addendum)."""
    report = reports["native_min_dim.py"]
    (f,) = report.findings
    assert (f.op, f.verdict, f.rule, f.line) == ("aten::min.dim", Verdict.CPU_FALLBACK, "native-no-kernel", 7) and "min.dim_min" in f.message
    assert {o.op: o.verdict for o in report.ops}["aten::max.dim"] is Verdict.LOWERED
