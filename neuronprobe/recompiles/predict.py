"""How many graphs a traffic stream compiles into, per compile policy, without compiling.

Policies (what a Neuron deployment can do with shapes):

* ``static``: one graph per distinct input signature (``torch_neuronx.trace``,
  torch-xla, ``torch.compile(dynamic=False)``).
* ``dynamic_batch``: dim 0 of every tensor input is free (one graph serves every
  batch size, e.g. ``torch_neuronx.dynamic_batch``); the other dims stay static.
* ``bucketed``: the sequence dim (dim 1 of each input whose dim 1 varies, or the
  ``seq_len`` of ``make_inputs`` for ``--lengths`` traffic) is padded up to the
  first bucket edge ``>=`` it. Lengths beyond the last edge have no graph: they are
  counted (``beyond_last``), never silently truncated.

Everything works on the distinct signatures and maps back to calls with numpy,
so 10^5 calls predict in tens of milliseconds (benchmarks/bench_recompiles.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from neuronprobe.recompiles.traffic import Const, Key, Signature, Traffic
from neuronprobe.report.model import BucketProposal, PolicyPrediction, RecompileCause
from neuronprobe.vocabulary import CauseKind, Fit

POLICIES: tuple[str, ...] = ("static", "dynamic_batch", "bucketed")

# An estimate, used when neither --compile-seconds nor a live Neuron backend gives a
# figure: neuronx-cc takes from tens of seconds (small models) to many minutes (LLMs)
# per graph; one minute is the order of magnitude for a mid-size model.
DEFAULT_COMPILE_SECONDS = 60.0

BATCH_DIM = 0
SEQ_DIM = 1
# Bucket fit of the bucketed policy: the first edge >= the length (transformers-neuronx,
# vLLM); NxD Inference's strict rule is an option of the `buckets` command.
BUCKET_FIT = Fit.INCLUSIVE


@dataclass
class Prediction:
    policies: dict[str, PolicyPrediction]
    edges: list[int] = field(default_factory=list)  # bucket edges of the bucketed policy
    proposal: BucketProposal | None = None
    causes: list[RecompileCause] = field(default_factory=list)
    seq_inputs: list[Key] = field(default_factory=list)  # inputs whose dim 1 varies (what buckets pad)


def first_seen(keys: np.ndarray) -> list[int]:
    """Call index where each distinct key is first needed, ascending; keys < 0 are skipped."""
    valid = np.flatnonzero(keys >= 0)
    if valid.size == 0:
        return []
    _, first = np.unique(keys[valid], return_index=True)
    return sorted(int(i) for i in valid[first])


def _policy(keys_per_sig: np.ndarray, ids: np.ndarray, note: str, beyond: int = 0) -> PolicyPrediction:
    per_call = keys_per_sig[ids] if ids.size else np.empty(0, dtype=np.int64)
    seen = first_seen(per_call)
    return PolicyPrediction(graphs=len(seen), first_seen=seen, note=note, beyond_last=beyond)


# --- signatures as integer matrices ----------------------------------------------------------------


@dataclass
class Group:
    """Signatures with the same layout (inputs, ranks, scalar values): one row of sizes each."""

    rows: np.ndarray  # indices into traffic.signatures, ascending
    sizes: np.ndarray  # (len(rows), width) int64
    columns: list[tuple[Key, int]]  # (input, dim) of each column


def groups(signatures: Sequence[Signature]) -> list[Group]:
    """Split the distinct signatures by layout so that every policy is a numpy operation on sizes."""
    by_layout: dict[tuple[tuple[Key, Const | int], ...], list[int]] = {}
    flat: list[list[int]] = []
    for i, sig in enumerate(signatures):
        layout = tuple((k, e if isinstance(e, Const) else len(e)) for k, e in sig)
        by_layout.setdefault(layout, []).append(i)
        flat.append([d for _, e in sig if not isinstance(e, Const) for d in e])
    out = []
    for group_layout, rows in by_layout.items():
        columns = [(k, d) for k, r in group_layout if not isinstance(r, Const) for d in range(int(r))]
        sizes = np.asarray([flat[i] for i in rows], dtype=np.int64).reshape(len(rows), len(columns))
        out.append(Group(np.asarray(rows, dtype=np.int64), sizes, columns))
    return out


def _keys_from_groups(parts: Sequence[Group], n: int, transform: Callable[[Group], tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Dense policy keys per signature: ``transform`` gives each group's sizes and a mask of servable rows."""
    keys: np.ndarray = np.full(n, -1, dtype=np.int64)
    offset = 0
    for g in parts:
        sizes, ok = transform(g)
        if not ok.any():
            continue
        if sizes.shape[1]:
            _, inverse = np.unique(sizes[ok], axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
        else:
            inverse = np.zeros(int(ok.sum()), dtype=np.int64)
        keys[g.rows[ok]] = inverse + offset
        offset += int(inverse.max()) + 1
    return keys


def _free_batch(g: Group) -> tuple[np.ndarray, np.ndarray]:
    sizes = g.sizes.copy()
    batch = [j for j, (_, d) in enumerate(g.columns) if d == BATCH_DIM]
    sizes[:, batch] = -1
    return sizes, np.ones(len(g.rows), dtype=bool)


def _seq_columns(g: Group, inputs: set[Key]) -> list[int]:
    return [j for j, (k, d) in enumerate(g.columns) if d == SEQ_DIM and k in inputs]


def _padded(edges: np.ndarray, inputs: set[Key]) -> Callable[[Group], tuple[np.ndarray, np.ndarray]]:
    def transform(g: Group) -> tuple[np.ndarray, np.ndarray]:
        sizes = g.sizes.copy()
        ok: np.ndarray = np.ones(len(g.rows), dtype=bool)
        for j in _seq_columns(g, inputs):
            idx = np.searchsorted(edges, sizes[:, j], side="left")
            ok &= idx < edges.size
            sizes[:, j] = edges[np.minimum(idx, edges.size - 1)]
        return sizes, ok

    return transform


def seq_inputs(parts: Sequence[Group]) -> list[Key]:
    """Inputs whose dim 1 takes more than one value: the sequence dims buckets pad."""
    values: dict[Key, set[int]] = {}
    for g in parts:
        for j, (k, d) in enumerate(g.columns):
            if d == SEQ_DIM:
                values.setdefault(k, set()).update(np.unique(g.sizes[:, j]).tolist())
    return [k for k, v in values.items() if len(v) > 1]


def seq_lengths(traffic: Traffic, parts: Sequence[Group], inputs: Sequence[Key]) -> np.ndarray:
    """One length per call and distinct dim-1 value of the sequence inputs, for the bucket proposal."""
    if traffic.lengths is not None:
        return np.asarray(traffic.lengths, dtype=np.int64)
    counts = traffic.counts()
    wanted = set(inputs)
    vals: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for g in parts:
        cols = _seq_columns(g, wanted)
        if not cols:
            continue
        seq = np.sort(g.sizes[:, cols], axis=1)
        keep = np.ones(seq.shape, dtype=bool)
        keep[:, 1:] = seq[:, 1:] != seq[:, :-1]  # a length shared by two inputs of one call counts once
        vals.append(seq[keep])
        weights.append(np.broadcast_to(counts[g.rows][:, None], seq.shape)[keep])
    if not vals:
        return np.empty(0, dtype=np.int64)
    return np.repeat(np.concatenate(vals), np.concatenate(weights))


def _bucketed_pairs(traffic: Traffic, edges: np.ndarray) -> np.ndarray:
    """--lengths traffic: the signature make_inputs gives at the padded length (make_inputs decides the dims)."""
    assert traffic.pairs is not None and traffic.signature_for is not None
    lengths = np.asarray([length for _, length in traffic.pairs], dtype=np.int64)
    idx: np.ndarray = np.asarray(np.searchsorted(edges, lengths, side="left"))
    index: dict[Signature, int] = {}
    cache: dict[tuple[int, int], int] = {}
    keys: np.ndarray = np.full(len(traffic.pairs), -1, dtype=np.int64)
    positions = [int(p) for p in idx]
    for i, ((b, _), e) in enumerate(zip(traffic.pairs, positions, strict=False)):
        if e >= edges.size:
            continue
        pair = (b, int(edges[e]))
        if pair not in cache:
            cache[pair] = index.setdefault(traffic.signature_for(*pair), len(index))
        keys[i] = cache[pair]
    return keys


def predict(
    traffic: Traffic,
    *,
    buckets: Sequence[int] | None = None,
    max_buckets: int = 8,
    seconds_per_graph: float = DEFAULT_COMPILE_SECONDS,
    names: dict[Key, str] | None = None,
    where: tuple[str | None, int | None, str | None] = (None, None, None),
) -> Prediction:
    """Graphs per policy for the whole stream, where each is first needed, and the shape causes.

    ``buckets``: the bucketed policy's edges; without them the edges are proposed
    for this traffic with :func:`neuronprobe.shape_buckets.propose_buckets`.
    ``names``: display names of the inputs (positional index -> forward's parameter name).
    ``where``: (file, line, source) of the forward, where shape causes point.
    """
    from neuronprobe.shape_buckets import propose_buckets
    from neuronprobe.shape_buckets.runtime import check_edges

    ids = traffic.ids
    n_sigs = len(traffic.signatures)
    counts = traffic.counts()
    parts = groups(traffic.signatures)
    policies: dict[str, PolicyPrediction] = {}
    policies["static"] = _policy(np.arange(n_sigs, dtype=np.int64), ids, "one graph per distinct input signature")
    policies["dynamic_batch"] = _policy(
        _keys_from_groups(parts, n_sigs, _free_batch),
        ids,
        "dim 0 of every input free: one graph per signature of the other dims",
    )

    inputs = [] if traffic.lengths is not None else seq_inputs(parts)  # --lengths: make_inputs places the length
    lengths = seq_lengths(traffic, parts, inputs)
    proposal: BucketProposal | None = None
    edges: list[int] = []
    if lengths.size:
        proposal = propose_buckets(lengths, max_buckets, fit=BUCKET_FIT, source=traffic.source)
        edges = [int(e) for e in check_edges(buckets)] if buckets else list(proposal.edges)
    if edges:
        edge_arr = np.asarray(edges, dtype=np.int64)
        if traffic.pairs is not None and traffic.signature_for is not None:
            keys = _bucketed_pairs(traffic, edge_arr)
        else:
            keys = _keys_from_groups(parts, n_sigs, _padded(edge_arr, set(inputs)))
        beyond = int(counts[keys < 0].sum())
        origin = "given with --buckets" if buckets else f"proposed for this traffic, k <= {max_buckets}"
        note = f"sequence padded to edges {', '.join(map(str, edges))} ({origin})"
        if beyond:
            note += (
                f"; {beyond:,} call(s) are longer than the last edge {edges[-1]} (up to {int(lengths.max())}): "
                "no bucket graph can serve them, and they are not counted in graphs"
            )
        policies["bucketed"] = _policy(keys, ids, note, beyond)
    else:
        bucketed = _policy(np.arange(n_sigs, dtype=np.int64), ids, "")
        bucketed.note = "no input's sequence dim (dim 1) varies: nothing to pad, same graphs as static"
        policies["bucketed"] = bucketed
    for p in policies.values():
        p.compile_seconds = round(p.graphs * seconds_per_graph, 3)
    causes = shape_causes(traffic, parts, names or {}, where, edges, policies)
    return Prediction(policies, edges, proposal, causes, inputs)


# --- causes read off the traffic -----------------------------------------------------------------


def _label(key: Key, names: dict[Key, str]) -> str:
    return names.get(key, str(key) if isinstance(key, str) else f"arg{key}")


def _layout_differences(first: Signature, sig: Signature) -> list[tuple[Key, int | str]]:
    """How a signature of another layout differs from the first: 'presence', 'value' or 'rank' per input."""
    a, b = dict(first), dict(sig)
    out: list[tuple[Key, int | str]] = []
    for key in sorted(set(a) | set(b), key=str):
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            out.append((key, "presence"))
        elif isinstance(x, Const) or isinstance(y, Const):
            if x != y:
                out.append((key, "value"))
        elif len(x) != len(y):
            out.append((key, "rank"))
        else:
            out.extend((key, d) for d, (u, v) in enumerate(zip(x, y, strict=False)) if u != v)
    return out


def shape_causes(
    traffic: Traffic,
    parts: Sequence[Group],
    names: dict[Key, str],
    where: tuple[str | None, int | None, str | None],
    edges: Sequence[int],
    policies: dict[str, PolicyPrediction],
) -> list[RecompileCause]:
    """One cause per input dim that changes: how many of the stream's recompiles it triggers.

    A recompile is counted for a dim when the new signature differs there from the
    first call's (what dynamo's guard on its first cache entry reports).
    """
    sigs = traffic.signatures
    if len(sigs) < 2:
        return []
    tally: dict[tuple[Key, int | str], int] = {}
    distinct: dict[tuple[Key, int], set[int]] = {}
    order: dict[tuple[Key, int | str], int] = {}
    for g in parts:
        for j, col in enumerate(g.columns):
            distinct.setdefault(col, set()).update(np.unique(g.sizes[:, j]).tolist())
            order.setdefault(col, len(order))
        if g.rows[0] == 0:  # the first signature's layout: compare sizes column by column
            changed = (g.sizes[1:] != g.sizes[0]).sum(axis=0)
            for j, col in enumerate(g.columns):
                if changed[j]:
                    tally[col] = tally.get(col, 0) + int(changed[j])
        else:
            for i in g.rows.tolist():
                for diff in _layout_differences(sigs[0], sigs[i]):
                    tally[diff] = tally.get(diff, 0) + 1
                    order.setdefault(diff, len(order))
    file, line, code = where
    out = []
    for (key, dim), count in sorted(tally.items(), key=lambda kv: (-kv[1], order.get(kv[0], 0))):
        name = _label(key, names)
        if isinstance(dim, int):
            values = sorted(distinct.get((key, dim), set()))
            span = f"{len(values)} distinct sizes, {values[0]}..{values[-1]}" if values else "sizes vary"
            what = "batch size" if dim == BATCH_DIM else "sequence length" if dim == SEQ_DIM else f"dim {dim}"
            reason = f"tensor '{name}' size mismatch at index {dim} ({what}: {span})"
            fix = _shape_fix(dim, edges, policies)
        elif dim == "rank":
            reason, fix = f"tensor '{name}' changes rank", "give the input one rank (reshape outside forward)"
        elif dim == "value":
            reason = f"scalar input '{name}' changes value (a Python scalar is baked into the graph)"
            fix = "pass it as a tensor, or compile one graph per value you serve"
        else:
            reason, fix = f"input '{name}' is given in some calls only", "always pass it (e.g. a full mask)"
        out.append(
            RecompileCause(
                reason=reason,
                count=count,
                file=file,
                line=line,
                source_line=code,
                kind=CauseKind.SHAPE,
                input=name,
                dim=dim if isinstance(dim, int) else None,
                fix=fix,
            )
        )
    return out


def _shape_fix(dim: int, edges: Sequence[int], policies: dict[str, PolicyPrediction]) -> str:
    if dim == BATCH_DIM:
        graphs = policies["dynamic_batch"].graphs
        return f"serve a few fixed batch sizes and pad the batch up, or free the batch dim ({graphs} graph(s) with dynamic_batch)"
    if edges:
        return f"pad to buckets {', '.join(map(str, edges))}: {policies['bucketed'].graphs} graph(s) with the bucketed policy"
    return "pad this dim to a few fixed sizes (buckets)"
