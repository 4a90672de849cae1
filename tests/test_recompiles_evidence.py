"""CPU evidence: dynamo compiles the traffic's distinct shapes, and says why each recompile happened.

Models with known shape behaviour (tests/models/recompile_*.py): a static graph, a
Python loop over the sequence length, a branch on ``x.shape[1] > 64``. Their
``# RECOMPILE <kind>`` markers are the lines the causes must point at. Shapes are
few and models tiny so that the whole file runs in well under a minute.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronprobe.analysis import TrafficOptions
from neuronprobe.backends import Capabilities
from neuronprobe.loaders.resolve import load_hf, load_model
from neuronprobe.recompiles import analyze_traffic
from neuronprobe.report.model import BackendInfo, ObservedCompiles, RecompileCause

TESTS = Path(__file__).parent
MODELS = TESTS / "models"
DATA = TESTS / "data"


def expect_line(model: str, kind: str) -> int:
    lines = (MODELS / model).read_text().splitlines()
    return next(i for i, text in enumerate(lines, start=1) if f"# RECOMPILE {kind}" in text)


def shapes_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "shapes.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def changing(causes: list[RecompileCause]) -> list[RecompileCause]:
    return [c for c in causes if c.graph_changes_with_shape]


# --- the static-graph model ---------------------------------------------------------------------------


def test_static_model_compiles_once_per_distinct_shape_and_the_graph_never_changes() -> None:
    loaded = load_model(str(MODELS / "recompile_static.py"))
    result = analyze_traffic(loaded, TrafficOptions(shapes=DATA / "recompile_static_shapes.jsonl", buckets=[16, 64, 128]))
    section = result.recompiles
    assert section.calls == 8 and section.distinct_signatures == 5
    assert section.predicted["static"].graphs == 5
    assert section.predicted["bucketed"].graphs == 4  # (1,16) (4,64) (1,128) (4,16)
    observed = section.observed
    assert observed is not None and observed.source == "dynamo-cpu"
    assert observed.compiles == observed.shapes_run == 5
    assert observed.matches_static is True
    assert len(observed.graph_hashes) == 5 and len(set(observed.graph_hashes)) == 1
    assert changing(section.causes) == []
    seq = next(c for c in section.causes if c.dim == 1)
    # (4, 32) differs from (1, 8) in both dims; dynamo reports the first size it checks, index 0.
    assert seq.kind == "shape" and seq.count == 3 and seq.observed == 2
    batch = next(c for c in section.causes if c.dim == 0)
    assert batch.count == 2 and batch.observed == 2
    assert seq.file is not None and seq.file.endswith("recompile_static.py")
    assert seq.line == expect_line("recompile_static.py", "shape")
    assert result.buckets is not None and result.buckets.n_lengths == 8


def test_more_shapes_than_dynamos_default_recompile_limit_are_all_compiled(tmp_path: Path) -> None:
    # dynamo's recompile_limit is 8 and then it silently runs eager; the sweep raises it.
    lengths = list(range(2, 12))
    path = shapes_file(tmp_path, [f'{{"input_ids": [1, {n}]}}' for n in lengths])
    loaded = load_model(str(MODELS / "recompile_static.py"))
    section = analyze_traffic(loaded, TrafficOptions(shapes=path, max_compiles=20)).recompiles
    assert section.predicted["static"].graphs == 10
    assert section.observed is not None
    assert section.observed.compiles == 10 and section.observed.matches_static is True


def test_max_compiles_bounds_the_evidence_and_says_so(tmp_path: Path) -> None:
    path = shapes_file(tmp_path, [f'{{"input_ids": [1, {n}]}}' for n in range(2, 12)])
    loaded = load_model(str(MODELS / "recompile_static.py"))
    section = analyze_traffic(loaded, TrafficOptions(shapes=path, max_compiles=3)).recompiles
    assert section.observed is not None
    assert section.observed.shapes_run == 3 and section.observed.compiles == 3
    # the smallest and the largest shapes are among those compiled
    assert section.observed.compiled_shapes[0] == "input_ids[1, 2]"
    assert "input_ids[1, 11]" in section.observed.compiled_shapes
    assert "compiled 3 of 10 distinct shapes (--max-compiles 3)" in section.observed.note


def test_max_compiles_zero_predicts_without_compiling() -> None:
    loaded = load_model(str(MODELS / "recompile_static.py"))
    result = analyze_traffic(loaded, TrafficOptions(shapes=DATA / "recompile_static_shapes.jsonl", max_compiles=0))
    assert result.recompiles.observed is None
    assert result.recompiles.predicted["static"].graphs == 5
    assert any("--max-compiles 0" in lim.why for lim in result.limitations)


# --- a Python loop over the sequence length -------------------------------------------------------------


def test_loop_over_the_length_is_flagged_at_its_line_as_a_graph_that_changes() -> None:
    loaded = load_model(str(MODELS / "recompile_loop.py"))
    section = analyze_traffic(loaded, TrafficOptions(shapes=DATA / "recompile_loop_shapes.jsonl")).recompiles
    assert section.predicted["static"].graphs == 3
    assert section.observed is not None and section.observed.compiles == 3 and section.observed.matches_static
    assert len(set(section.observed.graph_hashes)) == 3  # the unrolled loop differs per length
    (loop,) = changing(section.causes)
    assert loop.kind == "specialization"
    assert loop.file is not None and loop.file.endswith("recompile_loop.py")
    assert loop.line == expect_line("recompile_loop.py", "specialization")
    assert loop.source_line is not None and loop.source_line.startswith("for i in range(x.shape[1]):")
    assert loop.input == "x" and loop.dim == 1
    assert loop.count == 2  # 3 lengths: 2 graphs beyond the first
    assert "buckets only bound" in loop.fix


# --- a branch on x.shape[1] > 64 -----------------------------------------------------------------------


def test_branch_on_the_length_is_flagged_at_its_line() -> None:
    loaded = load_model(str(MODELS / "recompile_branch.py"))
    section = analyze_traffic(loaded, TrafficOptions(shapes=DATA / "recompile_branch_shapes.jsonl")).recompiles
    assert section.predicted["static"].graphs == 4
    assert section.observed is not None and section.observed.compiles == 4 and section.observed.matches_static
    assert len(set(section.observed.graph_hashes)) == 2  # one graph per side of the threshold
    (branch,) = changing(section.causes)
    assert branch.kind == "branch"
    assert branch.file is not None and branch.file.endswith("recompile_branch.py")
    assert branch.line == expect_line("recompile_branch.py", "branch")
    assert "x.shape[1] <= 64" in branch.reason
    assert "2 size(s) where x.shape[1] <= 64 holds and 2 where it does not" in branch.reason


def test_branch_is_found_for_sizes_the_sweep_did_not_compile(tmp_path: Path) -> None:
    # Only the smallest shape is compiled; the guard it leaves still covers the long calls.
    path = shapes_file(tmp_path, ["[[1, 10, 8]]", "[[1, 20, 8]]", "[[1, 30, 8]]", "[[1, 100, 8]]"])
    loaded = load_model(str(MODELS / "recompile_branch.py"))
    section = analyze_traffic(loaded, TrafficOptions(shapes=path, max_compiles=1)).recompiles
    assert section.observed is not None and section.observed.compiled_shapes == ["x[1, 10, 8]"]
    (branch,) = changing(section.causes)
    assert branch.line == expect_line("recompile_branch.py", "branch")
    assert "not confirmed by a compiled graph" in branch.reason


def test_branch_is_no_cause_when_every_call_takes_the_same_side(tmp_path: Path) -> None:
    path = shapes_file(tmp_path, ["[[1, 10, 8]]", "[[1, 20, 8]]", "[[1, 30, 8]]"])
    loaded = load_model(str(MODELS / "recompile_branch.py"))
    section = analyze_traffic(loaded, TrafficOptions(shapes=path)).recompiles
    assert changing(section.causes) == []
    assert section.observed is not None and len(set(section.observed.graph_hashes)) == 1


# --- --lengths with make_inputs ----------------------------------------------------------------------------


def test_lengths_with_batch_sizes_use_make_inputs() -> None:
    loaded = load_model(str(MODELS / "recompile_static.py"))
    options = TrafficOptions(lengths=DATA / "recompile_lengths.txt", batch_sizes=[1, 4], buckets=[16, 64, 128])
    section = analyze_traffic(loaded, options).recompiles
    # 7 requests x 2 batch sizes; lengths 5 30 100 7 300 30 12 -> 6 distinct lengths
    assert section.calls == 14 and section.distinct_signatures == 12
    assert section.predicted["static"].graphs == 12
    assert section.predicted["dynamic_batch"].graphs == 6
    # buckets 16 (5, 7, 12), 64 (30), 128 (100) at two batch sizes; 300 is beyond the last edge
    assert section.predicted["bucketed"].graphs == 6
    assert section.predicted["bucketed"].beyond_last == 2
    assert section.observed is not None and section.observed.compiles == 12 and section.observed.matches_static


# --- hf: models are on the meta device ------------------------------------------------------------------------


def test_hf_models_on_the_meta_device_are_compiled_without_weights(tmp_path: Path) -> None:
    loaded = load_hf(
        "llama",
        ["hidden_size=32", "intermediate_size=64", "num_hidden_layers=1", "num_attention_heads=2", "num_key_value_heads=1", "vocab_size=100"],
    )
    assert loaded.on_meta
    path = shapes_file(tmp_path, ['{"input_ids": [1, 16]}', '{"input_ids": [1, 40]}', '{"input_ids": [1, 16]}'])
    section = analyze_traffic(loaded, TrafficOptions(shapes=path)).recompiles
    assert section.observed is not None
    assert section.observed.compiles == 2 and section.observed.matches_static is True
    assert "meta device" in section.observed.note
    assert changing(section.causes) == []
    seq = next(c for c in section.causes if c.dim == 1)
    assert seq.observed == 1


# --- the live backend hook ------------------------------------------------------------------------------------


class FakeLive:
    """A stand-in for the Neuron live backend: records what it was asked to compile."""

    def __init__(self, declares: bool = True) -> None:
        self.calls: list = []
        self.declares = declares

    def info(self) -> BackendInfo:
        return BackendInfo(name="fake-live", kind="neuron")

    def capabilities(self) -> Capabilities:
        return Capabilities(count_compiles=self.count_compiles) if self.declares else Capabilities()

    def count_compiles(self, loaded: object, inputs_per_call: list, *, timeout: float) -> ObservedCompiles:
        self.calls = list(inputs_per_call)
        return ObservedCompiles(compiles=len(inputs_per_call), source="torch_xla", shapes_run=len(inputs_per_call), seconds=300.0)


def test_a_live_backend_counts_real_compiles_and_its_timing_is_used() -> None:
    live = FakeLive()
    loaded = load_model(str(MODELS / "recompile_static.py"))
    section = analyze_traffic(loaded, TrafficOptions(shapes=DATA / "recompile_static_shapes.jsonl"), live=live, timeout=60.0).recompiles
    # one call per distinct shape, in stream order, in get_example_inputs() form (here: keyword inputs)
    assert [tuple(call["input_ids"].shape) for call in live.calls] == [(1, 8), (1, 16), (4, 32), (1, 100), (4, 8)]
    assert section.observed is not None and section.observed.source == "torch_xla"
    assert section.observed.matches_static is True
    assert section.cpu_evidence is not None and section.cpu_evidence.source == "dynamo-cpu"
    assert section.compile_seconds_per_graph == 60.0  # 300 s over 5 compiles
    assert section.compile_seconds_source == "measured by the live backend"
    assert section.predicted["static"].compile_seconds == 300.0


def test_a_live_backend_that_declares_no_compile_count_is_not_probed_and_the_report_says_so() -> None:
    """The capability is read from the backend's declaration, never found with getattr: a method of
    that name on a backend that does not declare it is not called."""
    live = FakeLive(declares=False)
    loaded = load_model(str(MODELS / "recompile_static.py"))
    result = analyze_traffic(loaded, TrafficOptions(shapes=DATA / "recompile_static_shapes.jsonl", max_compiles=2), live=live)
    assert live.calls == []
    assert result.recompiles.observed is not None and result.recompiles.observed.source == "dynamo-cpu"
    assert [lim.why for lim in result.limitations if lim.what == "recompiles on Neuron"] == [
        "the fake-live backend declares no count_compiles; the counts are from dynamo on CPU"
    ]


# --- traffic that does not fit the model ------------------------------------------------------------------------


def test_traffic_naming_an_input_the_model_lacks_is_an_input_error(tmp_path: Path) -> None:
    from neuronprobe.errors import InputError

    path = shapes_file(tmp_path, ['{"input_ids": [1, 8]}', '{"ids": [1, 8]}'])
    loaded = load_model(str(MODELS / "recompile_static.py"))
    with pytest.raises(InputError, match=r"shapes\.jsonl line 2: input 'ids' is not one of the model's example inputs \(input_ids\)"):
        analyze_traffic(loaded, TrafficOptions(shapes=path))


def test_lengths_need_make_inputs(tmp_path: Path) -> None:
    from neuronprobe.errors import InputError

    loaded = load_model(str(MODELS / "data_branch.py"))
    with pytest.raises(InputError, match="--lengths needs make_inputs"):
        analyze_traffic(loaded, TrafficOptions(lengths=DATA / "recompile_lengths.txt"))


# --- sample_inputs() in the model file ------------------------------------------------------------------------


def test_sample_inputs_are_the_traffic_when_no_file_is_given() -> None:
    loaded = load_model(str(MODELS / "recompile_samples.py"))
    section = analyze_traffic(loaded, TrafficOptions()).recompiles
    # lengths 6, 9, 12 plus (6, scale=2.0): four signatures over seven calls
    assert section.calls == 7 and section.distinct_signatures == 4
    assert section.predicted["static"].graphs == 4
    assert section.predicted["static"].first_seen == [0, 1, 3, 6]
    assert section.observed is not None and section.observed.compiles == 4 and section.observed.matches_static
    reasons = [c.reason for c in section.causes]
    assert "tensor 'tokens' size mismatch at index 1 (sequence length: 3 distinct sizes, 6..12)" in reasons
    assert any(r.startswith("input 'scale' is given in some calls only") for r in reasons)


def test_a_shape_the_model_cannot_take_is_a_limitation_not_a_crash(tmp_path: Path) -> None:
    # the branch model's Linear wants 8 features: [1, 5, 3] fails in forward
    path = shapes_file(tmp_path, ["[[1, 5, 8]]", "[[1, 5, 3]]"])
    loaded = load_model(str(MODELS / "recompile_branch.py"))
    result = analyze_traffic(loaded, TrafficOptions(shapes=path))
    observed = result.recompiles.observed
    assert observed is not None and observed.shapes_run == 1 and observed.compiles == 1
    assert any("x[1, 5, 3]: the forward raised" in lim.why for lim in result.limitations)


def test_when_no_guard_explains_a_changed_graph_the_differing_ops_point_at_the_line() -> None:
    from collections import Counter

    from neuronprobe.recompiles.evidence import CompileEvent, RunShape, Sweep, _diff_cause

    shapes = [RunShape(i, ((0, (1, n)),), (), {}, f"x[1, {n}]") for i, n in enumerate((4, 8))]
    events = [
        CompileEvent(0, "aaa", 1, lines=Counter({("model.py", 10): 1, ("model.py", 12): 4})),
        CompileEvent(1, "bbb", 1, lines=Counter({("model.py", 10): 1, ("model.py", 12): 8})),
    ]
    cause = _diff_cause(Sweep(shapes=shapes, events=events, failures=[]))
    assert cause is not None
    assert (cause.file, cause.line, cause.kind, cause.count) == ("model.py", 12, "graph_change", 1)
    assert cause.graph_changes_with_shape
    same = [CompileEvent(0, "aaa", 1), CompileEvent(1, "aaa", 1)]
    assert _diff_cause(Sweep(shapes=shapes, events=same, failures=[])) is None
