"""`neuronprobe nightly` end to end with the real analysis: tiny model files, real reports, real gate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.nightly.run import INDEX_FILE
from neuronprobe.report.model import load_report

runner = CliRunner()
REPO = Path(__file__).parent.parent

MODEL_V1 = """\
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x):
        y = self.proj(x)
        return torch.relu(y)


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(2, 16),)
"""

# The same model a day later: someone added a spectral feature, which has no Neuron lowering.
MODEL_V2 = MODEL_V1.replace(
    "        return torch.relu(y)\n",
    "        spectrum = torch.fft.rfft(y).abs()\n        return torch.relu(y) + spectrum.mean()\n",
)


def nightly(config: Path, reports: Path, date: str):
    return runner.invoke(app, ["nightly", str(config), "-o", str(reports), "--date", date])


def nightly_process(config: Path, reports: Path, date: str) -> subprocess.CompletedProcess[str]:
    """One night as the scheduler runs it: a fresh process (the model file changes between nights)."""
    return subprocess.run(
        [sys.executable, "-m", "neuronprobe.cli", "nightly", str(config), "-o", str(reports), "--date", date],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_fallback_added_to_the_code_fails_the_next_night(tmp_path):
    model = tmp_path / "net.py"
    config = tmp_path / "nightly.toml"
    config.write_text('[[models]]\nmodel = "net.py"\n')
    reports = tmp_path / "reports"

    model.write_text(MODEL_V1)
    first = nightly_process(config, reports, "2025-06-01")
    assert first.returncode == 0, first.stderr
    base = load_report(str(reports / "2025-06-01" / "net.json"))
    assert base.findings == [] and base.backend.name == "static"

    model.write_text(MODEL_V2)
    second = nightly_process(config, reports, "2025-06-02")
    assert second.returncode == 1, second.stderr
    new = load_report(str(reports / "2025-06-02" / "net.json"))
    diff = new.baseline_diff
    assert diff is not None and diff.comparable
    assert ("aten::fft_rfft", "cpu_fallback", 11) in [(f.op, f.verdict, f.line) for f in diff.new_findings]
    assert diff.removed_findings == [] and diff.moved_findings == []
    assert "new cpu_fallback: aten::fft_rfft at" in second.stderr
    assert (reports / "2025-06-02" / "net.html").read_text().rstrip().endswith("</html>")
    index = (reports / INDEX_FILE).read_text()
    assert '<svg class="np-plot"' in index and "aten::fft_rfft" in index

    model.write_text(MODEL_V2.replace("import torch\n", "import torch\n\n# a comment pushes every line down\n"))
    third = nightly_process(config, reports, "2025-06-03")
    assert third.returncode == 0, third.stderr  # the same fallback two lines lower is not new
    moved = load_report(str(reports / "2025-06-03" / "net.json")).baseline_diff
    assert moved is not None and moved.new_findings == [] and moved.removed_findings == []
    assert {(f.line, f.base_line) for f in moved.moved_findings} == {(13, 11)}
    assert len(moved.moved_findings) == len(new.findings)


def test_require_backend_neuron_without_the_stack_exits_2_before_writing(tmp_path):
    (tmp_path / "net.py").write_text(MODEL_V1)
    config = tmp_path / "nightly.toml"
    config.write_text('require_backend = "neuron"\n\n[[models]]\nmodel = "net.py"\n')
    result = nightly(config, tmp_path / "reports", "2025-06-01")
    assert result.exit_code == 2, result.output
    assert "neuron" in result.output.lower() and "Traceback" not in result.output
    assert not (tmp_path / "reports").exists()


# examples/nightly.toml's own night (both models a first run, tiny_gpt's dynamic shape and compile error) is
# checked where the README's `neuronprobe nightly examples/nightly.toml` runs: tests/test_docs_examples.py.
