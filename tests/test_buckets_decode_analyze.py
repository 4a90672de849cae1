"""`analyze --decode-trace` adds the decode section to a model's report; `--lengths` keeps working."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from neuronprobe.cli import app

runner = CliRunner()
MLP = Path(__file__).parent / "models" / "mlp.py"


def test_analyze_with_a_decode_trace_and_lengths(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("ContextTokens,GeneratedTokens\n" + "".join(f"{50 + 7 * i},{5 + i % 11}\n" for i in range(40)), encoding="utf-8")
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("\n".join(str(20 + i) for i in range(30)) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    args = ["analyze", str(MLP), "--backend", "static", "--decode-trace", str(trace), "--lengths", str(lengths), "--max-compiles", "0", "--json", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["schema_version"] == 7
    assert data["decode"]["requests"] == 40 and data["decode"]["runtime"] == "nxdi"
    assert data["buckets"] is not None  # the prefill proposal from --lengths is still there
    html = out.with_suffix(".html").read_text()
    assert "Decode buckets" in html
    assert any("no memory fit here" in n for n in data["decode"]["notes"])


def test_analyze_with_a_bad_decode_trace_is_exit_2_before_the_analysis(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("ContextTokens,GeneratedTokens\n10,x\n", encoding="utf-8")
    result = runner.invoke(app, ["analyze", str(MLP), "--backend", "static", "--decode-trace", str(trace), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "line 2" in result.output
    assert not (tmp_path / "o").exists()
