"""How close a model's final output is to the reference, in the terms the serving stacks use. Pure functions on tensors.

* NxD Inference's logit tolerances (SDK ``libraries/nxd-inference/developer_guides/onboarding-models.rst``,
  "Logit Matching"; ``neuronx_distributed_inference/utils/accuracy.py``): atol 1e-5 for every k and rtol
  0.01 / 0.02 / 0.03 / 0.05 for the reference's top 5 / 50 / 1000 / all tokens at each position. A logit
  passes when |actual - expected| <= atol + rtol * |expected|, element by element as ``torch.isclose``
  reads it (the reduction inside ``torch_neuronx.testing.validation.logit_validation`` is not public).
* The first position where greedy decoding diverges, teacher-forced: both runs see the same inputs,
  and the first position whose argmax differs is reported with the reference's gap between its two
  best logits there; a gap within ``divergence_difference_tol`` (0.001, the same guide) is a tie.
* Top-1 stability over a batch (classifiers): how many rows keep the reference's top-1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from neuronprobe.report.model import OutputAgreement, TopKCheck
from neuronprobe.vocabulary import OutputKind

NXDI_ATOL = 1e-5
NXDI_TOP_K_RTOL: tuple[tuple[int | None, float], ...] = ((5, 0.01), (50, 0.02), (1000, 0.03), (None, 0.05))
DIVERGENCE_DIFFERENCE_TOL = 0.001


def _rows(logits: Any) -> Any:
    """[..., vocabulary] as [rows, vocabulary], in fp32."""
    import torch

    dense = logits if logits.layout == torch.strided else logits.to_dense()  # a sparse output: compared by its values
    return dense.detach().float().reshape(-1, logits.shape[-1])


def topk_checks(expected: Any, actual: Any, table: tuple[tuple[int | None, float], ...] = NXDI_TOP_K_RTOL, atol: float = NXDI_ATOL) -> list[TopKCheck]:
    """NxD Inference's tolerance table applied to ``actual`` against ``expected`` logits ([..., vocabulary]).

    One ``topk`` for the largest k of the table (sorted, so each smaller k is its first columns) instead of
    one per k: over GPT-2's 50k-token vocabulary the three searches cost about a third of a forward.
    """
    return _topk_checks(_rows(expected), _rows(actual), table, atol)


def _topk_checks(e: Any, a: Any, table: tuple[tuple[int | None, float], ...], atol: float, expected: ExpectedLogits | None = None) -> list[TopKCheck]:
    """``expected``: the reference's rows already searched (its largest-k columns), shared by every precision."""
    import torch

    vocab = e.shape[-1]
    largest = _largest_k(vocab, table)
    if expected is not None and expected.top_indices is not None and expected.top_indices.shape[-1] == largest:
        idx, ev_top = expected.top_indices, expected.top_values
    else:
        idx = e.topk(largest, dim=-1).indices if largest else None  # sorted: the top k are the first k columns
        ev_top = e.gather(-1, idx) if idx is not None else None
    av_top = a.gather(-1, idx) if idx is not None else None
    out = []
    for k, rtol in table:
        if k is None or k >= vocab or ev_top is None or av_top is None:
            ev, av = e, a
        else:
            ev, av = ev_top[:, :k], av_top[:, :k]
        bad = ev.isnan() if a is e else _not_close(av, ev, rtol, atol)
        bad_rows = bad.any(dim=-1).nonzero()
        out.append(TopKCheck(k, atol, rtol, int(ev.numel()), int(torch.count_nonzero(bad)), int(bad_rows[0, 0]) if bad_rows.numel() else None))
    return out


def _largest_k(vocab: int, table: tuple[tuple[int | None, float], ...]) -> int:
    """The largest k of the tolerance table below the vocabulary (0: none): one top-k search serves every k."""
    return max((k for k, _ in table if k is not None and k < vocab), default=0)


def _not_close(actual: Any, expected: Any, rtol: float, atol: float) -> Any:
    """``~torch.isclose(actual, expected, rtol, atol)``, element for element, in fewer passes when every difference is finite.

    isclose computes ``(a == e) | (isfinite(|a - e|) & (|a - e| <= atol + |rtol * e|))``; when every
    ``|a - e|`` is finite (so are ``a`` and ``e``) that is ``|a - e| <= atol + rtol * |e|`` (``a == e``
    gives 0, within a positive tolerance), and its negation ``>``: the same booleans. Over a language
    model's whole vocabulary (GPT-2, 32 x 50257) 1.4 ms against isclose's 4.3 ms, on every precision.
    Anything else (a NaN, an infinity, an overflowing difference, a zero tolerance) goes to isclose itself.
    """
    import torch

    if atol > 0 and rtol >= 0 and actual.dtype == expected.dtype == torch.float32 and actual.numel():
        diff = (actual - expected).abs_()
        if math.isfinite(float(diff.max())):
            return diff > expected.abs().mul_(rtol).add_(atol)
    return ~torch.isclose(actual, expected, rtol=rtol, atol=atol)


def greedy_divergence(expected: Any, actual: Any) -> tuple[int | None, float | None]:
    """The first position whose greedy token differs in any sequence of the batch, and the reference's gap between
    its two best logits there; (None, None) when every position agrees. ``[batch, positions, vocabulary]`` or
    ``[positions, vocabulary]``."""
    e, a = _rows(expected), _rows(actual)
    return _divergence(expected, e, e.argmax(dim=-1), a.argmax(dim=-1))


def _divergence(expected: Any, e: Any, e_top: Any, a_top: Any) -> tuple[int | None, float | None]:
    """:func:`greedy_divergence` from the rows (batch-major, as :func:`_rows` reads them) and their argmax."""
    if expected.dim() == 3:  # [batch, positions]: the first position where any sequence differs
        batch, positions = expected.shape[0], expected.shape[1]
        differ = (e_top != a_top).reshape(batch, positions)
        at = differ.any(dim=0).nonzero()
        if not at.numel():
            return None, None
        pos = int(at[0, 0])
        row = int(differ[:, pos].nonzero()[0, 0]) * positions + pos  # the first sequence that differs there
    else:
        at = (e_top != a_top).nonzero()
        if not at.numel():
            return None, None
        pos = row = int(at[0, 0])
    top2 = e[row].topk(min(2, e.shape[-1])).values
    gap = float(top2[0] - top2[1]) if top2.numel() > 1 else 0.0
    return pos, gap


def top1_same(expected: Any, actual: Any) -> int:
    """Rows whose top-1 is the reference's."""
    e, a = _rows(expected), _rows(actual)
    return int((e.argmax(dim=-1) == a.argmax(dim=-1)).sum())


def output_kind(value: Any) -> tuple[OutputKind, Any]:
    """How to read the model's output, and the tensor to read: ``logits`` [batch, positions, vocabulary] of a
    language model, a [batch, classes] score tensor (or ``logits``) of a classifier, else OTHER."""
    import torch

    logits = getattr(value, "logits", None)
    if logits is None and isinstance(value, dict):
        logits = value.get("logits")
    if logits is None and isinstance(value, torch.Tensor):
        logits = value
    if isinstance(logits, torch.Tensor) and logits.is_floating_point():
        if logits.dim() == 3 and logits.shape[-1] > 1:
            return OutputKind.LANGUAGE_MODEL, logits
        if logits.dim() == 2 and logits.shape[-1] > 1:
            return OutputKind.CLASSIFIER, logits
    return OutputKind.OTHER, None


@dataclass
class ExpectedLogits:
    """The reference's side of :func:`agreement`, read once and shared by every precision compared with it:
    its rows in fp32, their argmax and its largest-k columns of the tolerance table (GPT-2: the top-1000
    search and the argmax cost about a tenth of a forward, for each precision before this was shared)."""

    kind: OutputKind
    logits: Any  # the tensor output_kind found
    rows: Any  # [rows, vocabulary], fp32
    argmax: Any
    top_indices: Any  # the largest k of the table's columns, sorted (None: a classifier, or no k below the vocabulary)
    top_values: Any


def expected_logits(expected_value: Any) -> ExpectedLogits | None:
    """The reference output read as logits or class scores (None when it is neither), searched once."""
    kind, logits = output_kind(expected_value)
    if kind is OutputKind.OTHER:
        return None
    e = _rows(logits)
    largest = _largest_k(e.shape[-1], NXDI_TOP_K_RTOL)
    idx = e.topk(largest, dim=-1).indices if largest and kind is OutputKind.LANGUAGE_MODEL else None
    return ExpectedLogits(kind, logits, e, e.argmax(dim=-1), idx, e.gather(-1, idx) if idx is not None else None)


def agreement(expected_value: Any, actual_value: Any, expected: ExpectedLogits | None = None) -> OutputAgreement | None:
    """The final outputs read as logits or class scores; None when the output is neither.

    Each tensor is read once (rows in fp32, their argmax) and shared by the checks. ``expected``: the
    reference's side already read (:func:`expected_logits` of ``expected_value``), for a reference that
    several precisions are compared with.
    """
    if expected is None:
        kind, logits = output_kind(expected_value)
        if kind is OutputKind.OTHER:
            return None
    else:
        kind, logits = expected.kind, expected.logits
    _, actual = output_kind(actual_value)
    if actual is None or actual.shape != logits.shape:
        return None
    e = expected.rows if expected is not None else _rows(logits)
    a = e if actual is logits else _rows(actual)  # a precision that narrows nothing: the reference against itself
    if a is e and kind is OutputKind.LANGUAGE_MODEL and not bool(e.isnan().any()):
        return _self_agreement(e)
    e_top = expected.argmax if expected is not None else e.argmax(dim=-1)
    a_top = e_top if a is e else a.argmax(dim=-1)
    rows = int(e.shape[0])
    same = int((e_top == a_top).sum())
    if kind is OutputKind.CLASSIFIER:
        return OutputAgreement(kind, rows, same)
    pos, gap = _divergence(logits, e, e_top, a_top)
    return OutputAgreement(
        kind,
        rows,
        same,
        topk=_topk_checks(e, a, NXDI_TOP_K_RTOL, NXDI_ATOL, expected),
        greedy_divergence=pos,
        divergence_gap=gap,
        divergence_tie=gap is not None and gap <= DIVERGENCE_DIFFERENCE_TOL,
    )


def _self_agreement(e: Any) -> OutputAgreement:
    """Language-model logits without NaN against themselves, without searching them: every row keeps its top-1,
    greedy decoding never diverges, and every logit of every k passes (|x - x| = 0; only a NaN fails ``isclose``).
    The counts are those :func:`_topk_checks` gives (its top-k search and argmax cost a sixth of GPT-2's forward)."""
    rows, vocab = int(e.shape[0]), int(e.shape[-1])
    topk = [TopKCheck(k, NXDI_ATOL, rtol, rows * (k if k is not None and k < vocab else vocab), 0, None) for k, rtol in NXDI_TOP_K_RTOL]
    return OutputAgreement(OutputKind.LANGUAGE_MODEL, rows, rows, topk=topk, greedy_divergence=None, divergence_gap=None, divergence_tie=False)
