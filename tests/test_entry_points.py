"""Entry points beyond forward (issue 33.3): a model file's ENTRY, ``--entry METHOD`` and ``analyze(entry=...)``
name the method analysed; a decoding loop whose sequence grows per token is reported with its sampling ops."""

from __future__ import annotations

import json
import re

import pytest
import torch
from helpers import MODELS, expectations, refused

import neuronprobe
from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends.xla_diff import GROWING_RULE
from neuronprobe.decoding import growing_sequences
from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.loaders.resolve import load_model, load_model_file
from neuronprobe.report.model import Report
from neuronprobe.vocabulary import TopVerdict, Verdict

GPT = MODELS / "gpt_generate.py"
_SAMPLING = re.compile(r"#\s*SAMPLING\s+(?P<op>\S+)")


def _sampling_lines(path):
    return {(m.group("op"), n) for n, text in enumerate(path.read_text().splitlines(), start=1) if (m := _SAMPLING.search(text))}


@pytest.fixture(scope="module")
def gpt() -> Report:
    return analyze_spec(str(GPT), AnalyzeOptions(backend="static"))


def test_the_model_files_entry_is_analysed(gpt: Report) -> None:
    assert gpt.capture.entry == "generate"
    assert gpt.capture.incomplete is None  # generate() runs the whole model: every parameter is read
    assert [r.split(" (")[0] for r in gpt.capture.regions] == ["wrap_with_set_grad_enabled"]  # generate is @torch.no_grad()
    # the model's module paths, not the wrapper's
    modules = {f.module for f in gpt.findings} | {c for c in gpt.capture.regions}
    assert not any(m and m.startswith("model.") for m in modules)


def test_a_growing_sequence_is_one_finding_at_the_cat(gpt: Report) -> None:
    ((line, verdict, op),) = expectations(GPT)
    (finding,) = gpt.findings
    assert (finding.rule, finding.verdict, finding.op, finding.file, finding.line) == (GROWING_RULE, verdict, op, "tests/models/gpt_generate.py", line)
    assert finding.count == 4  # max_new_tokens: one cat per generated token
    assert finding.source_line == "ids = torch.cat((ids, next_id), dim=1)  # EXPECT dynamic_shape aten::cat"
    assert "grows this sequence by 1 along dim 1 per step (6 -> 10 over 4 steps captured)" in finding.message
    assert "compiles a new graph per token" in finding.message
    assert finding.fix.startswith("keep the shapes static: pad the ids")
    assert gpt.verdict is TopVerdict.WILL_NOT_COMPILE


def test_the_sampling_ops_are_named_at_their_lines(gpt: Report) -> None:
    (finding,) = gpt.findings
    expected = _sampling_lines(GPT)
    assert expected == {("aten::topk", 49), ("aten::multinomial", 51)}
    for op, line in expected:
        assert f"{op} over 64 at line {line}" in finding.message  # 64: the vocabulary
    ops = {row.op: row.verdict for row in gpt.ops}
    assert ops["aten::topk"] is Verdict.LOWERED and ops["aten::multinomial"] is Verdict.LOWERED


def test_a_static_cache_loop_is_not_a_growing_sequence() -> None:
    report = analyze_spec(str(MODELS / "decode_static_cache.py"), AnalyzeOptions(backend="static"))
    assert report.capture.entry == "generate" and report.capture.nodes > 0
    assert report.findings == [] and report.verdict is TopVerdict.RUNS
    assert "aten::argmax" in {row.op for row in report.ops}


def test_a_kv_cache_grown_by_cat_is_a_growing_sequence() -> None:
    class Cached(torch.nn.Module):
        def forward(self, x):
            cache = x[:, :1]
            for _ in range(3):
                cache = torch.cat([cache, x[:, :1] * 2], dim=1)
            return cache

    report = neuronprobe.analyze(Cached(), (torch.randn(2, 4, 8),), backend="static")
    (finding,) = report.findings
    assert finding.rule == GROWING_RULE and finding.count == 3
    assert "(1 -> 4 over 3 steps captured)" in finding.message and "sampled" not in finding.message


def test_one_concatenation_is_no_loop() -> None:
    class Once(torch.nn.Module):
        def forward(self, x, y):
            return torch.cat([x, y], dim=1)

    report = neuronprobe.analyze(Once(), (torch.randn(2, 3), torch.randn(2, 1)), backend="static")
    assert report.findings == []


def test_entry_option_analyses_another_method() -> None:
    ((line, verdict, op),) = expectations(MODELS / "entry_encode.py")
    encode = analyze_spec(str(MODELS / "entry_encode.py"), AnalyzeOptions(backend="static", entry="encode"))
    # the spectrum's abs() runs on complex64, which neuronx-cc refuses on the XLA path (NCC_EVRF004, issue 33.9)
    assert [(f.verdict, f.op, f.line) for f in encode.findings] == [("compile_error", "aten::abs", line), (verdict, op, line)]
    assert encode.capture.entry == "encode"
    forward = analyze_spec(str(MODELS / "entry_encode.py"), AnalyzeOptions(backend="static"))
    assert forward.findings == [] and forward.capture.entry is None


def test_entry_forward_overrides_the_files_entry() -> None:
    report = analyze_spec(str(GPT), AnalyzeOptions(backend="static", entry="forward"))
    assert report.capture.entry is None and report.findings == []


def test_the_python_api_takes_the_entry() -> None:
    loaded = load_model_file(MODELS / "entry_encode.py", entry="forward")
    report = neuronprobe.analyze(loaded.module, loaded.args, backend="static", entry="encode")
    assert [f.op for f in report.findings] == ["aten::abs", "aten::fft_rfft"] and report.capture.entry == "encode"
    with pytest.raises(InputError, match=r"entry='decode': SpeechCodec has no method 'decode'; its own methods: encode"):
        neuronprobe.analyze(loaded.module, loaded.args, backend="static", entry="decode")


def test_cli_entry(tmp_path) -> None:
    from typer.testing import CliRunner

    from neuronprobe.cli import app

    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["analyze", str(MODELS / "entry_encode.py"), "--entry", "encode", "--backend", "static", "--json", str(out), "--no-html"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["capture"]["entry"] == "encode" and [f["op"] for f in data["findings"]] == ["aten::abs", "aten::fft_rfft"]


def test_cli_refuses_a_wrong_entry(tmp_path) -> None:
    line = refused(["analyze", str(MODELS / "entry_encode.py"), "--entry", "decode", "--backend", "static", "-o", str(tmp_path)])
    assert line == "error: --entry decode: SpeechCodec has no method 'decode'; its own methods: encode"
    assert list(tmp_path.iterdir()) == []
    line = refused(["analyze", "hf:gpt2", "--entry", "generate", "--backend", "static", "-o", str(tmp_path)])
    assert line == "error: --entry applies to model files and modules; hf:gpt2 is analysed through its forward"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("ENTRY = 3", r"ENTRY must name a method of the model \(a string such as \"generate\"\), not a int"),
        ("ENTRY = 'sample'", r"ENTRY = 'sample': M has no method 'sample'"),
        ("ENTRY = '__init__'", r"ENTRY = '__init__': entry '__init__' is not a method name"),
    ],
)
def test_a_bad_entry_in_the_file_is_the_files_error(tmp_path, entry: str, message: str) -> None:
    model = tmp_path / "m.py"
    model.write_text(
        f"import torch\n{entry}\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"
        "def get_model():\n    return M()\ndef get_example_inputs():\n    return (torch.ones(2),)\n"
    )
    with pytest.raises(ModelLoadError, match=message):
        load_model(str(model))


def test_growing_sequences_reads_the_unrolled_steps() -> None:
    from neuronprobe.capture.graph import capture
    from neuronprobe.loaders.entry import entry_function

    loaded = load_model_file(GPT)
    graph = capture(loaded.module, loaded.args, loaded.kwargs, "model.", anchors=(entry_function(loaded.module),))
    (chain,) = growing_sequences(graph.calls)
    assert (chain.dim, chain.growth, chain.lengths, len(chain.calls)) == (1, 1, (6, 10), 4)
    assert [(s.op, s.width) for s in chain.sampling] == [("aten::topk", 64), ("aten::multinomial", 64)]


def test_xla_cpu_runs_the_entry_in_its_worker(xla_env: str) -> None:
    # The worker rebuilds the model from the file: it must run generate(), as the capture did. torch-xla 2.9
    # runs the whole unrolled loop as one lazy graph (every op lowers): the growing-sequence finding is a
    # prediction about graphs per shape, which one observed run does not contradict.
    report = analyze_spec(str(GPT), AnalyzeOptions(backend="xla-cpu"))
    assert report.backend.steps["observe"].status == "ok"
    assert [f.rule for f in report.findings] == [GROWING_RULE]
    assert report.prediction_diff is not None
    assert report.prediction_diff.predicted_ok_observed_failing == [] and report.prediction_diff.predicted_failing_observed_ok == []
    # --entry crosses to the worker too: what torch-xla observes is in encode() (lines 14-15), never in forward.
    # (Measured: torch-xla 2.9 keeps rfft(...).abs() complex, so encode's linear fails on c64 + f32 at line 15.)
    encode = analyze_spec(str(MODELS / "entry_encode.py"), AnalyzeOptions(backend="xla-cpu", entry="encode"))
    observed = [f.line for f in encode.findings if f.origin == "observed"]
    assert observed and set(observed) <= {14, 15}, observed
