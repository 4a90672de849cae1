"""Decoding loops analysed as what they are: a sequence that grows by a token per step, and how it samples.

A ``generate()`` entry point (loaders/entry.py) is a Python loop; torch.export and dynamo unroll it, one copy
of the step per generated token. Two things in that unrolled graph matter on Neuron and are found here:

* **A growing sequence.** ``ids = torch.cat((ids, next_id), dim=1)`` each step (or a KV cache grown with
  ``torch.cat`` along its length) gives every step a new shape. Neuron runs static-shape graphs: a trace
  holds one length, and a lazy XLA run compiles a new graph for every new shape (torch-xla's recompilation
  guide, ``docs/source/perf/recompilation.md`` at v2.9.0: "every new input shape" recompiles; its fix is padding
  or bucketing). NxD Inference decodes with a static KV cache of the bucket's length and writes each token at
  its position (token-generation buckets, ``autobucketing.py``; ../shared/research/anchors.md section A).
  Found as a chain of ``cat`` calls, each growing the previous one's output along the same dim.
* **The sampling ops** (``topk``, ``multinomial``, ``argmax``, ``sort``...) whose result becomes the appended
  token: named in the finding, each with its line and the width it samples over (the vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.backends.xla_diff import GROWING_RULE
from neuronprobe.capture.graph import OpCall, relative_path
from neuronprobe.report.model import Finding
from neuronprobe.vocabulary import SourceLocation

SAMPLING_OPS = frozenset({"topk", "multinomial", "argmax", "argmin", "sort", "argsort", "max", "bernoulli", "gumbel_softmax"})
MIN_STEPS = 2  # one cat is a concatenation; two in a chain are a loop that grows its sequence
SAMPLING_DEPTH = 12  # ops between the sampling op and the appended token (slicing, casts, a gather of the top-k index)


@dataclass
class SamplingOp:
    """An op that picks the next token, at its line, over ``width`` candidates (the vocabulary, or top-k of it)."""

    op: str
    file: str | None
    line: int | None
    width: int | None


@dataclass
class GrowingSequence:
    """A chain of ``cat`` calls (the unrolled steps of a decoding loop) that grows one dim step by step."""

    calls: list[OpCall]
    dim: int
    growth: int  # elements added per step along dim
    sampling: list[SamplingOp] = field(default_factory=list)

    @property
    def first(self) -> OpCall:
        return self.calls[0]

    @property
    def lengths(self) -> tuple[int, int]:
        """The length before the first step and after the last one."""
        return _size(self.first.inputs[0], self.dim) or 0, _size(self.calls[-1].outputs[0], self.dim) or 0


def _size(meta: object, dim: int) -> int | None:
    shape = getattr(meta, "shape", [])
    if not -len(shape) <= dim < len(shape):
        return None
    value = shape[dim]
    return value if isinstance(value, int) else None


def _cat_step(call: OpCall) -> tuple[int | None, int, int] | None:
    """(the producer of the carried first tensor, or None for a graph input; dim; growth) of a ``cat`` that
    extends its first tensor along ``dim``, else None."""
    if call.namespace != "aten" or call.name != "cat" or len(call.inputs) < 2 or not call.outputs:
        return None
    rank = len(call.outputs[0].shape)
    dim = call.constants.get("dim", 0)
    if not isinstance(dim, int) or not rank:
        return None
    dim = dim % rank
    before, after = _size(call.inputs[0], dim), _size(call.outputs[0], dim)
    if before is None or after is None or after <= before:
        return None
    return (call.sources[0] if call.sources else None), dim, after - before


def growing_sequences(calls: list[OpCall]) -> list[GrowingSequence]:
    """Every chain of at least :data:`MIN_STEPS` ``cat`` calls where each extends the previous one's output
    by the same amount along the same dim: the unrolled steps of a loop whose sequence grows."""
    by_index = {c.index: c for c in calls}
    chain_of: dict[int, GrowingSequence] = {}
    chains: list[GrowingSequence] = []
    for call in calls:
        step = _cat_step(call)
        if step is None:
            continue
        source, dim, growth = step
        previous = chain_of.get(source) if source is not None else None
        if previous is not None and previous.dim == dim and previous.growth == growth and previous.calls[-1].index == source:
            previous.calls.append(call)
        else:
            previous = GrowingSequence([call], dim, growth)
            chains.append(previous)
        chain_of[call.index] = previous
    found = [c for c in chains if len(c.calls) >= MIN_STEPS]
    for chain in found:
        chain.sampling = _sampling(chain, by_index)
    return found


def _sampling(chain: GrowingSequence, by_index: dict[int, OpCall]) -> list[SamplingOp]:
    """The sampling ops upstream of the tokens each step appends (its other cat inputs), once per line."""
    found: dict[tuple[str, str | None, int | None], SamplingOp] = {}
    for cat in chain.calls:
        frontier = [s for s in cat.sources[1:] if s is not None]
        seen: set[int] = set()
        for _ in range(SAMPLING_DEPTH):
            nxt: list[int] = []
            for index in frontier:
                if index in seen or index not in by_index:
                    continue
                seen.add(index)
                call = by_index[index]
                if call.name in SAMPLING_OPS:
                    key = (call.op, call.file, call.line)
                    width = _size(call.inputs[0], _sampled_dim(call)) if call.inputs else None
                    found.setdefault(key, SamplingOp(call.op, call.file, call.line, width))
                nxt.extend(s for s in call.sources if s is not None)
            frontier = nxt
    return sorted(found.values(), key=lambda s: (s.line or 0, s.op))


def _sampled_dim(call: OpCall) -> int:
    dim = call.constants.get("dim", -1)
    return dim if isinstance(dim, int) else -1


def decode_findings(calls: list[OpCall]) -> list[Finding]:
    """One finding per growing sequence, at the line of its ``cat``, naming its steps and sampling ops."""
    out = []
    for chain in growing_sequences(calls):
        start, end = chain.lengths
        first = chain.first
        sampled = "; ".join(
            f"{s.op}{f' over {s.width}' if s.width else ''} at line {s.line}" if s.line else f"{s.op}{f' over {s.width}' if s.width else ''}"
            for s in chain.sampling
        )
        message = (
            f"a decoding loop grows this sequence by {chain.growth} along dim {chain.dim} per step ({start} -> {end} over "
            f"{len(chain.calls)} steps captured): every step is a new shape, so a loop that syncs per token (an EOS check, "
            "streaming, torch_xla.sync()) compiles a new graph per token, and one that does not is one graph of the whole "
            "unrolled loop, compiled again for every prompt length and token count (measured on torch-xla 2.9)"
            + (f"; the appended token is sampled with {sampled}" if sampled else "")
        )
        out.append(
            Finding.at(
                GROWING_RULE,
                SourceLocation(relative_path(first.file), first.line),
                first.op,
                message,
                module=first.module,
                source_line=first.source_line,
                count=len(chain.calls),
                shapes=f"{first.shapes()} ... {chain.calls[-1].shapes()}",
            )
        )
    return out


__all__ = ["GROWING_RULE", "GrowingSequence", "SamplingOp", "decode_findings", "growing_sequences"]
