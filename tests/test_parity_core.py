"""Numerical parity (issue 25), the library: precisions, the emulation, drift per module, NxD Inference's tolerances."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronprobe.errors import InputError
from neuronprobe.loaders.resolve import load_model
from neuronprobe.parity import metrics
from neuronprobe.parity.drift import Tolerance, drift_stats, ulp
from neuronprobe.parity.emulate import emulated, round_to, served
from neuronprobe.parity.precision import DEFAULT_PRECISIONS, Precision, parse_precision, requested_precisions, sdk_default
from neuronprobe.parity.run import run_parity
from neuronprobe.vocabulary import AutoCast, LowType, OutputKind, ServedDtype

MODELS = Path(__file__).parent / "models"
FLIP = MODELS / "parity_top1_flip.py"
MATMULT_BF16 = Precision(AutoCast.MATMULT, LowType.BF16)
NONE = Precision(AutoCast.NONE)


# --- precisions -------------------------------------------------------------------------------


def test_sdk_defaults_change_in_2_27() -> None:
    assert sdk_default("2.26") == Precision(AutoCast.MATMULT, LowType.BF16, ServedDtype.FP32, False)
    assert sdk_default("2.26.1") == sdk_default("2.26")
    assert sdk_default("2.27") == Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP32, True)
    assert sdk_default("2.33.0") == sdk_default("2.27")
    with pytest.raises(InputError, match="--sdk 'latest'"):
        sdk_default("latest")


def test_flags_give_the_product_and_the_sdk_and_precision_extras() -> None:
    got = requested_precisions(auto_cast="matmult,all", auto_cast_type="bf16,fp8_e4m3", sdk=["2.26"], precision=["none,dtype=bf16,mpa=off"])
    labels = [p.label for p in got]
    assert labels == [
        "matmult/bf16 fp32 mpa-on",
        "matmult/fp8_e4m3 fp32 mpa-on",
        "all/bf16 fp32 mpa-on",
        "all/fp8_e4m3 fp32 mpa-on",
        "matmult/bf16 fp32 mpa-off",
        "no-cast bf16 mpa-off",
    ]
    assert requested_precisions() == list(DEFAULT_PRECISIONS)
    assert requested_precisions(dtype="bf16") == [Precision(AutoCast.NONE, LowType.BF16, ServedDtype.BF16, True)]
    assert parse_precision("all:tf32,mpa=off") == Precision(AutoCast.ALL, LowType.TF32, ServedDtype.FP32, False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"auto_cast": "sometimes"}, "--auto-cast 'sometimes': expected one of none, matmult, all"),
        ({"auto_cast_type": "int8"}, "--auto-cast-type 'int8'"),
        ({"mixed_precision_accumulation": "maybe"}, "expected on or off"),
        ({"auto_cast": "none", "auto_cast_type": "fp16"}, "--auto-cast-type has no effect with --auto-cast none"),
        ({"precision": ["colour=red"]}, "unknown key 'colour'"),
    ],
)
def test_bad_flags_are_one_sentence(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        requested_precisions(**kwargs)  # type: ignore[arg-type]


# --- rounding and the emulation ------------------------------------------------------------------


def test_rounding_to_each_low_type() -> None:
    x = torch.tensor([1.0038, 1001.0, 1 + 2**-11, 1 + 3 * 2**-11, 500.0, 1e-4])
    assert round_to(x, "bf16")[:2].tolist() == [1.0, 1000.0]  # 8 significant bits
    tf32 = round_to(x, "tf32")
    assert tf32[2].item() == 1.0 and tf32[3].item() == 1 + 2**-9  # ties to even at 10 mantissa bits
    fp8 = round_to(x, "fp8_e4m3")
    assert fp8[4].item() == 448.0 and fp8[5].item() == 0.0  # torch saturates at 448 and flushes below 2**-9
    assert round_to(torch.tensor([70000.0]), "fp16").isinf().all()  # fp16 overflows


def test_matmult_rounds_matmul_inputs_and_accumulates_in_fp32() -> None:
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 8)
    x = torch.randn(4, 64)
    want = torch.nn.functional.linear(round_to(x, "bf16"), round_to(lin.weight, "bf16"), round_to(lin.bias, "bf16"))
    with emulated(MATMULT_BF16, lin):
        got = lin(x)
    assert got.dtype == torch.float32 and torch.equal(got, want)
    with emulated(NONE, lin):
        assert torch.equal(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias))
    with emulated(MATMULT_BF16, lin):  # elementwise ops are left alone under matmult
        assert torch.equal(torch.exp(x), x.exp())


def test_mixed_precision_accumulation_off_keeps_the_norm_in_fp16() -> None:
    """A zero-variance row under layer_norm(eps=1e-12) in fp16: eps is 0 in fp16, so with the intermediates in
    fp16 (accumulation off) rsqrt(0) is inf and the row becomes nan; in fp32 (on) it is the bias."""
    norm = torch.nn.LayerNorm(8, eps=1e-12)
    x = torch.ones(2, 8)
    x[1] = torch.arange(8.0)
    for mpa, finite in ((True, True), (False, False)):
        p = Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP16, mpa)
        model, (xs,), _ = served(norm, (x,), {}, p)
        with emulated(p, model):
            out = model(xs)
        assert out.dtype == torch.float16
        assert bool(torch.isfinite(out[0]).all()) is finite
        assert torch.isfinite(out[1]).all()  # a row with variance is fine either way


def test_attention_is_emulated_as_two_matmuls() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 8) * 10 for _ in range(3))
    exact = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with emulated(NONE, torch.nn.Identity()):
        assert torch.equal(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), exact)
    with emulated(MATMULT_BF16, torch.nn.Identity()):
        got = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    scores = (round_to(q, "bf16") @ round_to(k, "bf16").transpose(-2, -1)) / 8**0.5
    scores = scores.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
    want = round_to(scores.softmax(-1), "bf16") @ round_to(v, "bf16")
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert not torch.equal(got, exact)


# --- drift statistics -------------------------------------------------------------------------------


def test_drift_stats_and_ulps() -> None:
    ref = [torch.tensor([4.0, -2.0, 0.0])]
    got = [torch.tensor([4.0625, -2.0, float("inf")])]
    max_abs, rel, ulps, nonfinite, exceeds = drift_stats(ref, got, "bf16", Tolerance())
    assert (max_abs, rel, nonfinite, exceeds) == (0.0625, 0.0625 / 4, 1, True)  # a new inf always exceeds
    assert ulp(4.0, "bf16") == 2**-5 and ulps == 2.0
    assert drift_stats(ref, [torch.tensor([4.19, -2.0, 0.0])], "bf16", Tolerance(rtol=0.05))[4] is False  # 0.19 <= 1e-5 + 0.2
    assert drift_stats(ref, [torch.tensor([4.21, -2.0, 0.0])], "bf16", Tolerance(rtol=0.05))[4] is True


# --- NxD Inference's tolerance table on hand-made logits -------------------------------------------


def _logits() -> torch.Tensor:
    """One position, 2000 tokens: token i has logit 2000 - i (the top 5 are 0..4, the top 50 are 0..49)."""
    return (2000.0 - torch.arange(2000.0)).unsqueeze(0)


@pytest.mark.parametrize(
    ("token", "error", "failing_ks"),
    [
        (0, 0.0099, []),  # a top-5 token 0.99% off: within rtol 0.01
        (0, 0.0101, [5]),  # ... 1.01% off: only the top-5 check fails (0.02, 0.03 and 0.05 still hold)
        (7, 0.0199, []),  # rank 8: not in the top 5; within top-50's 0.02
        (7, 0.0201, [50]),  # ... past it: the top-50 check fails, top-1000's 0.03 holds
        (100, 0.0299, []),
        (100, 0.0301, [1000]),
        (1500, 0.0499, []),  # outside the top 1000: only the all-token rtol 0.05 applies
        (1500, 0.0501, [None]),
    ],
)
def test_nxdi_tolerance_table_at_its_boundaries(token: int, error: float, failing_ks: list[int | None]) -> None:
    expected = _logits()
    actual = expected.clone()
    actual[0, token] *= 1 + error
    checks = metrics.topk_checks(expected, actual)
    assert [(c.k, c.rtol, c.atol) for c in checks] == [(5, 0.01, 1e-5), (50, 0.02, 1e-5), (1000, 0.03, 1e-5), (None, 0.05, 1e-5)]
    assert [c.k for c in checks if not c.passed] == failing_ks
    assert [c.checked for c in checks] == [5, 50, 1000, 2000]


def test_atol_applies_near_zero() -> None:
    expected = torch.zeros(1, 10)
    assert all(c.passed for c in metrics.topk_checks(expected, expected + 0.9e-5))
    assert not any(c.passed for c in metrics.topk_checks(expected, expected + 1.1e-5))


@settings(max_examples=50, deadline=None)
@given(st.floats(min_value=-100, max_value=100, allow_nan=False), st.floats(min_value=0.0, max_value=0.0099))
def test_any_logit_within_one_percent_passes_every_k(value: float, error: float) -> None:
    expected = torch.tensor([[value, value - 1, value - 2, value - 3, value - 4, value - 5]], dtype=torch.float64)
    actual = expected + expected.abs() * error
    assert all(c.passed for c in metrics.topk_checks(expected, actual))


def test_greedy_divergence_position_gap_and_tie() -> None:
    expected = torch.zeros(1, 6, 4)
    expected[0, :, 1] = 1.0
    actual = expected.clone()
    actual[0, 3, 2] = 2.0  # position 3 picks token 2
    assert metrics.greedy_divergence(expected, actual) == (3, 1.0)
    assert metrics.greedy_divergence(expected, expected) == (None, None)
    tie = expected.clone()
    tie[0, 4, 0] = 0.9995  # the reference's top two within 0.001 of each other
    swapped = tie.clone()
    swapped[0, 4, 0] = 1.0005
    agreement = metrics.agreement(tie, swapped)
    assert agreement is not None and agreement.kind is OutputKind.LANGUAGE_MODEL
    assert agreement.greedy_divergence == 4 and agreement.divergence_tie and agreement.top1_same == 5


# --- the whole run on a model file -------------------------------------------------------------------


def test_top1_flips_under_bf16_matmult_and_not_under_none() -> None:
    section = run_parity(load_model(str(FLIP)), [MATMULT_BF16, NONE])
    cast, plain = section.runs
    assert cast.agreement is not None and cast.agreement.kind is OutputKind.CLASSIFIER
    assert (cast.agreement.rows, cast.agreement.top1_same) == (1, 0)  # the class flipped
    first = cast.first_exceeding
    assert first is not None
    assert (first.module, first.module_type, first.file, first.line) == ("score", "Linear", "tests/models/parity_top1_flip.py", 20)
    assert first.dominant_op == "aten::addmm" and first.rel == 1.0
    assert [m.module for m in cast.modules] == ["pre", "score", ""] and not cast.modules[0].exceeds
    assert plain.agreement is not None and plain.agreement.top1_same == 1
    assert plain.first_exceeding is None and plain.output is not None and plain.output.max_abs == 0.0
    assert plain.note  # it narrows nothing: the reference's own forward; and that forward under the mode agrees:
    loaded = load_model(str(FLIP))
    with emulated(NONE, loaded.module):
        assert int(loaded.module(*loaded.args).argmax()) == 0
    with emulated(MATMULT_BF16, loaded.module):
        assert int(loaded.module(*loaded.args).argmax()) == 1
    assert section.inputs == "get_example_inputs()" and section.shrunk is None


def test_an_hf_config_runs_with_real_random_weights_and_reads_as_a_language_model() -> None:
    tiny = ["n_layer=2", "n_embd=64", "n_head=4", "vocab_size=512", "n_positions=64"]
    loaded = load_model("hf:gpt2", tiny)
    assert loaded.on_meta  # as analyze builds it: parity builds it again on the CPU from the seed
    section = run_parity(loaded, [MATMULT_BF16])
    run = section.runs[0]
    names = [m.module for m in run.modules]
    assert names[:3] == ["transformer.wte", "transformer.wpe", "transformer.drop"] and names[-3:] == ["lm_head", "model", ""]
    assert run.modules[0].file is not None and run.modules[0].file.endswith("modeling_gpt2.py")  # the line that called it
    assert run.agreement is not None and run.agreement.kind is OutputKind.LANGUAGE_MODEL and run.agreement.rows == 32
    assert [c.k for c in run.agreement.topk] == [5, 50, 1000, None] and run.agreement.topk[2].checked == 32 * 512
    assert 0 < run.output.rel < 0.05 and section.shrunk is None  # bf16 matmul inputs: a small, real error
    again = run_parity(load_model("hf:gpt2", tiny), [MATMULT_BF16])
    assert again.runs[0].output == run.output  # the same seed: the same weights, inputs and numbers


def test_sample_inputs_are_used_when_the_model_file_has_them() -> None:
    """recompile_samples.py yields token batches of lengths 6, 9, 6, 12, ...: parity runs the first four, each a
    [1, n, 3] score tensor read as a language model's logits, and merges them (rows add up: 6 + 9 + 6 + 12)."""
    section = run_parity(load_model(str(MODELS / "recompile_samples.py")), [MATMULT_BF16])
    assert section.inputs == "sample_inputs(): the first 4"
    run = section.runs[0]
    assert [m.module for m in run.modules] == ["embed", "head", ""]
    assert run.agreement is not None and run.agreement.rows == 33 and run.agreement.topk[0].checked == 33 * 3


# --- the cost cuts of issue 35.5 keep what parity checks -----------------------------------------------


def _topk_checks_one_search_per_k(expected: torch.Tensor, actual: torch.Tensor) -> list[tuple[int, int, int | None]]:
    """NxD Inference's table applied the plain way (one topk per k), for comparison with the single search."""
    e, a = expected.reshape(-1, expected.shape[-1]), actual.reshape(-1, actual.shape[-1])
    out = []
    for k, rtol in metrics.NXDI_TOP_K_RTOL:
        if k is None or k >= e.shape[-1]:
            ev, av = e, a
        else:
            idx = e.topk(k, dim=-1).indices
            ev, av = e.gather(-1, idx), a.gather(-1, idx)
        bad = ~torch.isclose(av, ev, rtol=rtol, atol=metrics.NXDI_ATOL)
        rows = bad.any(dim=-1).nonzero()
        out.append((int(ev.numel()), int(bad.sum()), int(rows[0, 0]) if rows.numel() else None))
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), vocab=st.sampled_from([3, 40, 1200]), noise=st.sampled_from([0.0, 1e-3, 3e-2]))
def test_one_topk_search_gives_every_k_of_the_table(seed: int, vocab: int, noise: float) -> None:
    g = torch.Generator().manual_seed(seed)
    expected = torch.randn(2, 5, vocab, generator=g)
    actual = expected + noise * torch.randn(2, 5, vocab, generator=g)
    got = [(c.checked, c.failed, c.worst_position) for c in metrics.topk_checks(expected, actual)]
    assert got == _topk_checks_one_search_per_k(expected, actual)


@pytest.mark.parametrize("special", [None, "nan", "inf"])
@pytest.mark.parametrize("shape", [(1, 16, 300), (2, 5, 3), (3, 1200)], ids=["lm", "lm-vocab-3", "classifier"])
def test_the_reference_against_itself_is_the_same_agreement_as_against_a_copy(shape: tuple[int, ...], special: str | None) -> None:
    logits = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    if special is not None:  # isclose(nan, nan) fails: the shortcut must count it too; isclose(inf, inf) passes
        logits.view(-1, shape[-1])[1, 2] = float(special)
    same = metrics.agreement(logits, logits)
    assert same is not None and same == metrics.agreement(logits, logits.clone())
    assert same.top1_same == same.rows and same.greedy_divergence is None


@pytest.mark.parametrize("spec", ["none,dtype=bf16", "all:bf16"])
def test_the_comparison_statistics_are_not_emulated(spec: str) -> None:
    """The error of a module is measured in fp32, outside the emulation: under ``all`` the subtraction of the
    reference was itself rounded to bf16 (measured: 0.015625 reported for an error of 0.01317)."""
    from neuronprobe.parity import drift
    from neuronprobe.parity.emulate import served_inputs, served_state
    from neuronprobe.parity.run import _call

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LayerNorm(64)).eval()
    x = torch.randn(8, 64)
    bf16 = parse_precision(spec)
    with torch.no_grad():
        ref = drift.record_reference(model, _call(model, (x,), {}, 0))
        state = served_state(model, bf16)
        a, k = served_inputs((x,), {}, bf16)
        with emulated(bf16, model, state) as emulator:
            got = drift.compare(model, _call(model, a, k, 0, state), ref, "bf16", measuring=emulator.paused)
        exact = float((got.final_value.float() - ref.final[0]).abs().max())
    assert got.output.max_abs == exact  # in fp32, to the last bit
    assert exact != float(torch.tensor(exact).bfloat16().float())  # and not a bf16-rounded value


def test_max_abs_propagates_nan_and_inf() -> None:
    from neuronprobe.parity.drift import _max_abs

    assert _max_abs(torch.tensor([1.0, -3.0, 2.0])) == 3.0
    assert _max_abs(torch.tensor([-float("inf"), 1.0])) == float("inf")
    assert _max_abs(torch.tensor([1.0, float("nan")])) != _max_abs(torch.tensor([1.0, float("nan")]))  # NaN
    assert _max_abs(torch.zeros(0)) == 0.0


# --- the cost cuts of issue 35.5 (second round) change no number -----------------------------------------

TINY_GPT2 = ["n_layer=2", "n_embd=64", "n_head=4", "vocab_size=512", "n_positions=64"]


def _tables(spec: str, overrides: list[str], precisions: list[Precision]) -> list[object]:
    """Every number of every run (the time each took aside), as the report holds them."""
    import dataclasses

    torch.manual_seed(0)  # a model file's get_model() draws its weights as it is loaded
    section = run_parity(load_model(spec, overrides), precisions)
    return [repr(dataclasses.replace(r, seconds=0.0)) for r in section.runs]


@pytest.mark.parametrize(
    ("spec", "overrides", "exceeding"),
    [("hf:gpt2", TINY_GPT2, True), (str(MODELS / "parity_shared_output.py"), [], True), (str(MODELS / "tied_embeddings.py"), [], False)],
    ids=["gpt2-tiny", "shared-output", "tied-embeddings"],
)
def test_the_shortcuts_give_the_tables_of_the_plain_path_bit_for_bit(spec: str, overrides: list[str], exceeding: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The widened weights written into a reused room, a tensor measured once however many modules return it,
    and the statistics run past the dispatch mode: each precision kind's table (every module's max-abs, rel,
    ULPs, non-finite count and verdict, the first module past the tolerance and its dominant op, the output's
    agreement) is the plain path's, to the last bit. The plain path is the code before the shortcuts."""
    import contextlib

    from neuronprobe._torch import dispatch_mode
    from neuronprobe.parity import drift, emulate

    kinds = [
        parse_precision(s)
        for s in ("matmult:bf16", "matmult:fp16,mpa=off", "matmult:tf32", "none,dtype=bf16", "none,dtype=fp16,mpa=off", "all:fp8_e4m3", "all:bf16,mpa=off")
    ]
    fast = _tables(spec, overrides, kinds)
    monkeypatch.setattr(emulate._Scratch, "widened", lambda self, narrow, dtype: narrow.to(dtype))
    monkeypatch.setattr(drift.Seen, "get_or", lambda self, tensors, measure: measure())
    monkeypatch.setattr(dispatch_mode, "modes_skipped", contextlib.nullcontext)
    plain = _tables(spec, overrides, kinds)
    assert fast == plain
    # where a module passes the tolerance, its first one and the dominant op are compared too
    assert any("dominant_op='aten::" in t for t in fast) == exceeding


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    special=st.sampled_from([None, "nan", "inf", "-inf", "huge"]),
    side=st.sampled_from(["expected", "actual", "both"]),
    noise=st.sampled_from([0.0, 1e-6, 1e-3, 5e-2]),
    rtol=st.sampled_from([0.0, 0.01, 0.05]),
)
def test_the_whole_vocabulary_check_counts_what_isclose_counts(seed: int, special: str | None, side: str, noise: float, rtol: float) -> None:
    """The faster closeness test over a whole vocabulary is isclose's, element for element: with NaN, infinities on
    either side and differences that overflow fp32 (those take isclose's own path)."""
    g = torch.Generator().manual_seed(seed)
    expected = torch.randn(3, 257, generator=g) * 10
    actual = expected + noise * torch.randn(3, 257, generator=g)
    value = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "huge": 3e38}.get(special or "")
    if value is not None:
        if side in ("expected", "both"):
            expected[1, 7] = value
        if side in ("actual", "both"):
            actual[1, 7] = -value if special == "huge" else value
    got = metrics._not_close(actual, expected, rtol, metrics.NXDI_ATOL)
    assert torch.equal(got, ~torch.isclose(actual, expected, rtol=rtol, atol=metrics.NXDI_ATOL))


@pytest.mark.parametrize("shape", [(1, 16, 3000), (2, 5, 3), (4, 1200)], ids=["lm", "lm-vocab-3", "classifier"])
@pytest.mark.parametrize("special", [None, "nan"])
def test_a_reference_read_once_gives_the_agreement_read_each_time(shape: tuple[int, ...], special: str | None) -> None:
    """Every precision shares the reference's searched top-k and argmax (``Reference.expected_logits``): the
    agreement is the one computed from scratch, for a language model, a tiny vocabulary and a classifier."""
    g = torch.Generator().manual_seed(11)
    logits = torch.randn(*shape, generator=g)
    actual = logits + 0.05 * torch.randn(*shape, generator=g)
    if special is not None:
        actual.view(-1, shape[-1])[0, 1] = float(special)
    shared = metrics.expected_logits(logits)
    assert shared is not None
    for other in (actual, logits.clone(), actual * 2):
        assert metrics.agreement(logits, other, shared) == metrics.agreement(logits, other)
