"""Console text for a frozen-reference comparison and a training-step parity (issue 25, points 4 and 5).

Rich renderables built from the report's records; the CLI prints them under the parity section.
"""

from __future__ import annotations

import math
from typing import Any

from neuronprobe.report.schema.reference import ReferenceComparison, TrainParity
from neuronprobe.vocabulary import ReferenceTensorKind, location

# Rows of the tensor table shown on the console (the JSON and HTML have every one).
TOP_TENSORS = 12


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def render_frozen(c: ReferenceComparison) -> Any:
    """The comparison's sentence, versions that changed since, and the tensors that differ (none listed when all match)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    colour = "green" if c.passed else ("yellow" if c.cross_backend else "red")
    head = Text.assemble(("frozen reference: ", "bold"), (c.summary, colour))
    versions = sorted(k for k in set(c.versions_then) | set(c.versions_now) if c.versions_then.get(k) != c.versions_now.get(k))
    parts: list[Any] = [head]
    if versions:
        changed = ", ".join(f"{k} {c.versions_then.get(k, '-')} -> {c.versions_now.get(k, '-')}" for k in versions)
        parts.append(Text(f"versions changed since the reference was saved: {changed}", style="dim"))
    shown = [t for t in c.tensors if not t.passed]
    if not shown:
        parts.extend(Text(f"top-1 of {top.tensor}: {top.positions} of {top.positions} position(s) unchanged", style="dim") for top in c.top1)
        return Group(*parts)
    table = Table(show_edge=False, header_style="bold")
    for column in ("tensor", "called at", "max abs", "max rel", "mismatched", "rtol/atol"):
        table.add_column(column, overflow="fold")
    notes = []
    for t in shown[:TOP_TENSORS]:
        name = t.name or "(model)"
        where = location(t.file, t.line) if t.kind is ReferenceTensorKind.MODULE and t.file else ""
        table.add_row(
            Text(name), Text(where), _num(t.max_abs), _num(t.max_rel), f"{t.mismatched}/{t.total}", f"{t.rtol:g}/{t.atol:g}"
        )  # names are data, not markup
        if t.detail and not t.detail.startswith("Tensor-likes are not"):  # a missing tensor, a shape change
            notes.append(Text(f"{name}: {t.detail}", style="red"))
    parts.append(table)
    parts.extend(notes)
    if len(shown) > TOP_TENSORS:
        parts.append(Text(f"... {len(shown) - TOP_TENSORS} more tensor(s) in the JSON report", style="dim"))
    for top in c.top1:
        parts.append(
            Text(f"top-1 of {top.tensor}: {top.positions - top.changed} of {top.positions} position(s) unchanged", style="dim" if not top.changed else "red")
        )
    return Group(*parts)


def render_train(t: TrainParity) -> Any:
    """One training step under a precision against fp32: the loss, then one row per parameter group in backward order."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    first = t.first_exceeding
    head = Text.assemble(
        ("training step ", "bold"),
        (t.precision, "bold"),
        f" vs fp32 ({t.step}): loss {_num(t.loss_ref)} -> {_num(t.loss)}",
        f" (relative error {_num(t.loss_rel_error)}); " if t.loss_rel_error is not None else "; ",
        (f"first parameter group whose gradient differs: {first}" if first else "no parameter group's gradient differs", "red" if first else "green"),
        f" (relative L2 error > {t.tolerance:g}; groups in the order autograd finished them)",
    )
    table = Table(show_edge=False, header_style="bold")
    for column in ("group", "grad norm fp32", "grad norm", "grad rel err", "update rel err", "non-finite", ""):
        table.add_column(column, overflow="fold")
    for g in t.groups:
        flag = Text("differs", style="red") if g.exceeds else Text("ok", style="green")
        table.add_row(Text(g.group), _num(g.grad_norm_ref), _num(g.grad_norm), _num(g.grad_rel_error), _num(g.update_rel_error), str(g.nonfinite), flag)
    parts: list[Any] = [head, table]
    parts.extend(Text(note, style="dim") for note in t.notes)
    return Group(*parts)


__all__ = ["render_frozen", "render_train"]
