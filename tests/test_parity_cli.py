"""`neuronprobe parity` and `analyze --parity` (issue 25): the console, the JSON (schema 5), the HTML, bad flags."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import refused
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.report.model import load_report
from neuronprobe.vocabulary import ParityRun, TopVerdict

runner = CliRunner()
MODELS = Path(__file__).parent / "models"
FLIP = MODELS / "parity_top1_flip.py"
MLP = MODELS / "mlp.py"
FLIP_LINE = 20  # `return self.score(h)` in parity_top1_flip.py


def test_parity_names_the_first_module_and_line_where_bf16_matmult_flips_the_class(tmp_path: Path) -> None:
    out = tmp_path / "flip.json"
    result = runner.invoke(app, ["parity", str(FLIP), "--auto-cast", "matmult,none", "--json", str(out)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "matmult/bf16 fp32 mpa-on emulated" in text and "top-1 kept on 0/1 examples" in text
    assert f"first past the tolerance: score (Linear) at {os.path.relpath(FLIP)}:{FLIP_LINE}" in text
    assert "the op adding most error inside it: aten::addmm" in text
    assert "no-cast fp32 mpa-on emulated narrows nothing: the fp32 reference's own forward, so not run again" in text
    report = load_report(str(out))
    assert report.schema_version == 7 and report.parity is not None
    cast, plain = report.parity.runs
    assert cast.first_exceeding is not None and cast.first_exceeding.module == "score" and cast.first_exceeding.line == FLIP_LINE
    assert cast.agreement is not None and cast.agreement.top1_same == 0
    assert plain.first_exceeding is None and plain.agreement is not None and plain.agreement.top1_same == 1
    # a numbers-only report says so rather than claiming the model runs on Neuron
    assert report.verdict is TopVerdict.NOT_ANALYSED and report.not_analysed[0].what == "op analysis"
    html = out.with_suffix(".html").read_text(encoding="utf-8")
    assert 'id="parity"' in html and "Numerical parity" in html
    assert 'aria-label="Relative error per module against the fp32 reference, per emulated precision"' in html
    assert "<code>score</code> (Linear)" in html and "aten::addmm" in html


def test_analyze_parity_adds_the_section_and_keeps_the_verdict(tmp_path: Path) -> None:
    plain, with_parity = tmp_path / "plain.json", tmp_path / "parity.json"
    base = ["analyze", str(MLP), "--backend", "static", "--max-compiles", "0", "--no-html"]
    assert runner.invoke(app, [*base, "--json", str(plain)]).exit_code == 0
    result = runner.invoke(app, [*base, "--parity", "--json", str(with_parity)])
    assert result.exit_code == 0, result.output
    assert "numerical parity" in result.output
    a, b = load_report(str(plain)), load_report(str(with_parity))
    assert a.parity is None and b.parity is not None
    assert a.verdict is b.verdict is TopVerdict.RUNS
    assert [r.precision.label for r in b.parity.runs] == ["matmult/bf16 fp32 mpa-off", "no-cast bf16 mpa-on", "no-cast fp32 mpa-on"]
    assert [m.module for m in b.parity.runs[0].modules] == ["net.0", "net.1", "net.2", "net.3", "net", ""]
    assert json.loads(with_parity.read_text())["parity"]["rtol"] == 0.05


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--auto-cast", "sometimes"], "--auto-cast 'sometimes': expected one of none, matmult, all"),
        (["--auto-cast-type", "int4"], "--auto-cast-type 'int4'"),
        (["--dtype", "fp64"], "--dtype 'fp64'"),
        (["--mixed-precision-accumulation", "perhaps"], "expected on or off"),
        (["--sdk", "next"], "--sdk 'next'"),
        (["--tolerance", "0"], "--tolerance 0: give a relative tolerance above 0"),
        (["--tolerance", "nan"], "--tolerance nan"),
        (["--backend", "gpu"], "--backend 'gpu'"),
        (["--precision", "colour=red"], "unknown key 'colour'"),
    ],
)
def test_bad_parity_flags_are_exit_2_in_one_line(tmp_path: Path, flags: list[str], words: str) -> None:
    line = refused(["parity", str(FLIP), *flags, "-o", str(tmp_path / "o")], FLIP)
    assert words in line
    assert not (tmp_path / "o").exists()


def test_a_missing_model_file_is_exit_2(tmp_path: Path) -> None:
    assert "no such model file" in refused(["parity", str(tmp_path / "nope.py"), "-o", str(tmp_path / "o")])


def test_xla_cpu_bf16_run_sits_next_to_the_emulation(tmp_path: Path, xla_env: str) -> None:
    out = tmp_path / "mlp.json"
    result = runner.invoke(app, ["parity", str(MLP), "--dtype", "bf16", "--backend", "xla-cpu", "--json", str(out), "--no-html"])
    assert result.exit_code == 0, result.output
    report = load_report(str(out))
    assert report.parity is not None
    emulated, observed = report.parity.runs
    assert emulated.run is ParityRun.EMULATED and observed.run is ParityRun.XLA_CPU and not observed.error
    assert emulated.precision == observed.precision and observed.precision.label == "no-cast bf16 mpa-on"
    assert observed.output is not None and 0 < observed.output.rel < 0.05  # bf16 rounding, not a broken run
    assert observed.agreement is not None and observed.agreement.rows == 2
    assert report.parity.xla_vs_emulation is not None and "from the xla-cpu run's" in report.parity.xla_vs_emulation
    assert "xla-cpu (observed)" in result.output
