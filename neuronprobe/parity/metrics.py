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
    """NxD Inference's tolerance table applied to ``actual`` against ``expected`` logits ([..., vocabulary])."""
    import torch

    e, a = _rows(expected), _rows(actual)
    vocab = e.shape[-1]
    out = []
    for k, rtol in table:
        if k is None or k >= vocab:
            ev, av = e, a
        else:
            idx = e.topk(k, dim=-1).indices
            ev, av = e.gather(-1, idx), a.gather(-1, idx)
        bad = ~torch.isclose(av, ev, rtol=rtol, atol=atol)
        bad_rows = bad.any(dim=-1).nonzero()
        out.append(TopKCheck(k, atol, rtol, int(ev.numel()), int(bad.sum()), int(bad_rows[0, 0]) if bad_rows.numel() else None))
    return out


def greedy_divergence(expected: Any, actual: Any) -> tuple[int | None, float | None]:
    """The first position whose greedy token differs in any sequence of the batch, and the reference's gap between
    its two best logits there; (None, None) when every position agrees. ``[batch, positions, vocabulary]`` or
    ``[positions, vocabulary]``."""
    batch = expected.shape[0] if expected.dim() == 3 else 1
    if expected.dim() == 3:  # positions first, so that row // batch is the position
        expected, actual = expected.transpose(0, 1), actual.transpose(0, 1)
    e, a = _rows(expected), _rows(actual)
    differ = (e.argmax(dim=-1) != a.argmax(dim=-1)).nonzero()
    if not differ.numel():
        return None, None
    row = int(differ[0, 0])
    pos = row // batch
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


def agreement(expected_value: Any, actual_value: Any) -> OutputAgreement | None:
    """The final outputs read as logits or class scores; None when the output is neither."""
    kind, expected = output_kind(expected_value)
    _, actual = output_kind(actual_value)
    if kind is OutputKind.OTHER or actual is None or actual.shape != expected.shape:
        return None
    rows = int(_rows(expected).shape[0])
    same = top1_same(expected, actual)
    if kind is OutputKind.CLASSIFIER:
        return OutputAgreement(kind, rows, same)
    pos, gap = greedy_divergence(expected, actual)
    return OutputAgreement(
        kind,
        rows,
        same,
        topk=topk_checks(expected, actual),
        greedy_divergence=pos,
        divergence_gap=gap,
        divergence_tie=gap is not None and gap <= DIVERGENCE_DIFFERENCE_TOL,
    )
