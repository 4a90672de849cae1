"""From torch-xla observations (plain data) to findings: shared by the trn1 and xla-cpu backends.

:func:`neuronprobe.backends.xla_observe.observe` runs where torch-xla is (a forked
child on a trn1 host, the xla-cpu worker) and returns JSON-able data; these pure
functions turn that data into observed findings in neuronprobe's own process.
"""

from __future__ import annotations

from typing import Any

from neuronprobe.backends.hlo_checks import check_hlo, summarize_hits
from neuronprobe.backends.xla_observe import HOST_SYNC_OP
from neuronprobe.report.model import Finding, Limitation
from neuronprobe.vocabulary import Origin, SourceLocation, Verdict, worse

# The fixes of observed-fallback and observed-host-sync are the registry's (support/data/builtin_rules.json),
# unless the support table has the op: then its own fix (observed_fix).

# Why a tensor could not move to the device (backends/xla_tensors.py MOVE_*) -> the rule that says so.
MOVE_RULES = {"layout": "device-move-sparse", "subclass": "device-move-subclass", "dtype": "device-move-dtype"}
MOVE_RULE_OTHER = "device-move-other"
MOVE_OP = "<model.to(device)>"


def rel_path(path: str | None) -> str | None:
    from neuronprobe.capture.graph import relative_path

    return relative_path(path)


def line_text(path: str | None, line: int | None) -> str | None:
    """The user's source line, read in this process (the worker sends only file and line)."""
    from neuronprobe.capture.graph import source_line

    return source_line(path, line)


def observed_fix(op: str) -> str | None:
    """The support table's own fix for ``op`` (``aten::nonzero``, ``aten::_fft_r2c.default``), None when the table
    has no rule for it: an observed fallback then gets the registry's general fix, never another op's."""
    from neuronprobe.support import load_table

    key = op.split("::", 1)[-1]
    base = key.split(".", 1)[0]
    for rule in load_table().rules:
        if key in rule.ops or base in rule.ops or any(o.split(".", 1)[0] == base for o in rule.ops):
            return rule.fix_for(key)
    return None


def _move_words(p: dict[str, Any]) -> str:
    what = f"{p.get('kind', 'tensor')} {p.get('name', '?')!r} of {p.get('owner', 'a module')}"
    if p.get("reason") == "layout":
        return f"{what} is a {p.get('layout')} tensor"
    if p.get("reason") == "subclass":
        return f"{what} is a {p.get('tensor_type')}"
    return f"{what} ({p.get('dtype')})"


def move_findings(problems: Any, origin: Origin = Origin.OBSERVED) -> list[Finding]:
    """One finding per parameter or buffer the device refused, at the user's line that registered it (issue 33.7);
    ``origin`` predicted: what static_move_problems found without a device."""
    from neuronprobe.support.error_patterns import quieted

    out: list[Finding] = []
    for p in problems if isinstance(problems, list) else []:
        if not isinstance(p, dict):
            continue
        rule = MOVE_RULES.get(str(p.get("reason")), MOVE_RULE_OTHER)
        file, line = p.get("file"), p.get("line")
        where = "" if file else " (registered outside the model's own code)"
        out.append(
            Finding.at(
                rule,
                SourceLocation(rel_path(file if isinstance(file, str) else None), line if isinstance(line, int) else None),
                MOVE_OP,
                f"the model cannot move to the XLA device: {_move_words(p)}{where}, which torch-xla cannot hold",
                origin=origin,
                source_line=line_text(file, line) if isinstance(file, str) else None,
                detail=quieted(str(p.get("error", ""))).detail or str(p.get("error", "")),
            )
        )
    return out


def move_sentence(problems: Any) -> str:
    """The same, as the one sentence a run that could not start gives (parity's xla-cpu row)."""
    findings = move_findings(problems)
    if not findings:
        return ""
    first = findings[0]
    place = f" ({first.file}:{first.line})" if first.file else ""
    more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
    return f"{first.message}{place}{more}; fix: {first.fix}"


def defect_findings(sites: Any) -> list[Finding]:
    """Calls that met a known torch-xla defect, at the user's line (the rule names the defect and its source)."""
    from neuronprobe.rules import lookup

    out: list[Finding] = []
    for site in sites if isinstance(sites, list) else []:
        if not isinstance(site, dict) or not isinstance(site.get("rule"), str):
            continue
        file, line = site.get("file"), site.get("line")
        raw = site.get("count")
        count = raw if isinstance(raw, int) else 1
        out.append(
            Finding.at(
                site["rule"],
                SourceLocation(rel_path(file if isinstance(file, str) else None), line if isinstance(line, int) else None),
                str(site.get("op", "")),
                lookup(site["rule"]).message,
                origin=Origin.OBSERVED,
                count=count,
                source_line=line_text(file, line) if isinstance(file, str) else None,
            )
        )
    return out


def fallback_findings(value: dict[str, Any]) -> tuple[list[Finding], list[Limitation]]:
    """One cpu_fallback finding per (op, user line); what the counters say beyond the placed calls is named."""
    findings: list[Finding] = []
    placed: dict[str, int] = {}
    source = str(value.get("counter_source", "torch-xla fallback counters"))
    for site in value.get("fallbacks", []):
        op, count = str(site["op"]), int(site.get("count", 1))
        placed[op] = placed.get(op, 0) + count
        per_call = int(site.get("bytes", 0)) // max(count, 1)
        unplaced = (
            "; no frame of the model's code called it (an autograd or device thread): placed by op name where the capture has the op, else unplaced"
            if site.get("file") is None
            else ""
        )
        findings.append(
            Finding.at(
                "observed-fallback",
                SourceLocation(rel_path(site.get("file")), site.get("line")),
                op,
                f"{op} ran on the CPU under torch-xla ({source}: {count} call(s) in one run of the program, "
                f"{per_call} bytes to and from the host per call; called as {site.get('called_as', op)}{unplaced})",
                count=count,
                origin=Origin.OBSERVED,
                bytes_per_call=per_call,
                source_line=line_text(site.get("file"), site.get("line")),
                fix=observed_fix(op),
            )
        )
    limitations: list[Limitation] = []
    for op, total in sorted(value.get("fallback_totals", {}).items()):
        if op == HOST_SYNC_OP:
            continue
        missing = int(total) - placed.get(op, 0)
        if missing > 0:
            findings.append(
                Finding.at(
                    "observed-fallback",
                    SourceLocation(None),
                    op,
                    f"{op} ran on the CPU under torch-xla ({source}: {missing} call(s) that no aten call of the "
                    "program accounts for: placed by op name, not by the call)",
                    count=missing,
                    origin=Origin.OBSERVED,
                    fix=observed_fix(op),
                )
            )
    return findings, limitations


def host_sync_findings(value: dict[str, Any]) -> list[Finding]:
    out = []
    for site in value.get("host_syncs", []):
        count = int(site.get("count", 1))
        out.append(
            Finding.at(
                "observed-host-sync",
                SourceLocation(rel_path(site.get("file")), site.get("line")),
                HOST_SYNC_OP,
                f"a host read of a tensor value ({HOST_SYNC_OP}, {count} per run): torch-xla runs the "
                "pending graph here and starts a new one, and a Neuron trace freezes the value",
                count=count,
                origin=Origin.OBSERVED,
                source_line=line_text(site.get("file"), site.get("line")),
            )
        )
    return out


def _only_place(op: str | None, op_lines: dict[str, list[list[Any]]]) -> tuple[str | None, int | None]:
    """The one user line that called ``op`` (any overload) in the observed run, if there is exactly one."""
    if not op:
        return None, None
    places = {tuple(p) for name, ps in op_lines.items() if name == op or name.startswith(op + ".") for p in ps}
    if len(places) != 1:
        return None, None
    ((file, line),) = places
    return str(file), int(line)


def _hlo_name(entry: dict[str, Any]) -> str:
    """The op a finding names: the aten op that built the instruction, else ``<hlo OPCODE>``.

    The opcode comes from the parsed instruction, never from re-reading the example
    text: a tuple-typed instruction (``(c64[..], f32[..]) fft(...)``, as torch.stft
    with return_complex=True builds) made that reading fail with an IndexError.
    """
    return entry["aten_op"] or f"<hlo {entry.get('opcode') or 'instruction'}>"


def _asked_for(entry: dict[str, Any], float64_lines: set[tuple[str, int]] | None) -> bool:
    """Whether a precision hit is at a line whose own calls had float64 tensors (when the run says which).

    torch-xla turns a Python float into an f64[] scalar and may widen an f32 tensor to
    f64 to compare with it (``torch.isinf`` is ``abs(x) == inf`` in f64): float64 the
    model never asked for, and the device computes it in f32 with the same result.
    """
    if float64_lines is None:
        return True
    return entry["file"] is not None and entry["line"] is not None and (entry["file"], entry["line"]) in float64_lines


def hlo_findings(
    graphs: list[dict[str, str]],
    target: str,
    op_lines: dict[str, list[list[Any]]] | None = None,
    mapping: dict[str, str] | None = None,
    float64_lines: list[list[Any]] | None = None,
) -> tuple[list[Finding], int, set[str]]:
    """Findings from every checked graph's HLO; the number of graphs checked; every aten op that built a
    rejected instruction (one finding per line may stand for several ops; precision notes reject nothing).

    An instruction without the user-line tag (torch-xla builds some, such as the
    broadcast of a Python scalar, outside the op's own IR node) is placed at the one
    line that called its aten op, when there is exactly one. ``mapping`` is the device's
    dtype mapping on HLO types (default: the target's); ``float64_lines`` are the user
    lines whose calls had float64 tensors in the run (None: not recorded, every precision
    hit stands).
    """
    asked = None if float64_lines is None else {(str(f), int(n)) for f, n in float64_lines}
    entries: dict[tuple[str, str | None, int | None, str | None], dict[str, Any]] = {}
    for g in graphs:
        for e in summarize_hits(check_hlo(g.get("hlo", ""), target, mapping=mapping)):
            if e["file"] is None:
                e["file"], e["line"] = _only_place(e["aten_op"], op_lines or {})
            if e["verdict"] == Verdict.PRECISION and not _asked_for(e, asked):
                continue
            key = (e["rule"], e["file"], e["line"], e["aten_op"] if e["file"] is None else None)
            if key in entries:
                entries[key]["count"] += e["count"]
                entries[key]["aten_ops"] += [op for op in e["aten_ops"] if op not in entries[key]["aten_ops"]]
            else:
                entries[key] = e
    out = []
    ops: set[str] = set()
    for e in entries.values():
        verdict = Verdict(e["verdict"])
        if verdict.is_problem:
            ops.update(e["aten_ops"])
        out.append(
            Finding.at(
                e["rule"],
                SourceLocation(rel_path(e["file"]), e["line"]),
                _hlo_name(e),
                f"{e['message']} (HLO: {e['example']}; {e['count']} instruction(s))",
                verdict=verdict,
                fix=e["fix"],
                ncc_code=e["ncc_code"],
                count=1,
                origin=Origin.OBSERVED,
                source_line=line_text(e["file"], e["line"]),
            )
        )
    return out, len(graphs), ops


def observed_verdicts(findings: list[Finding]) -> dict[str, str]:
    verdicts: dict[str, str] = {}
    for f in findings:
        if not f.op.startswith("<"):
            verdicts[f.op] = worse(verdicts.get(f.op), f.verdict)
    return verdicts


def run_verdicts(value: dict[str, Any], findings: list[Finding], rejected_ops: set[str]) -> dict[str, str]:
    """Observed verdict per dispatched op of one run, for prediction_diff.

    An op with an observed problem (a fallback or host read it triggered, an HLO rule on
    what it built, under any overload) did not lower; every other op the run dispatched did.
    """
    verdicts = observed_verdicts(findings)
    for op in rejected_ops:
        verdicts.setdefault(op, Verdict.COMPILE_ERROR)
    triggered = {s.get("called_as") for s in [*value.get("fallbacks", []), *value.get("host_syncs", [])]}
    problems = {op.split(".", 1)[0] for op in verdicts}
    for op in value.get("ops_seen", []):
        if op not in triggered and op.split(".", 1)[0] not in problems:
            verdicts.setdefault(op, Verdict.LOWERED)
    return verdicts


__all__ = [
    "defect_findings",
    "fallback_findings",
    "hlo_findings",
    "host_sync_findings",
    "move_findings",
    "move_sentence",
    "observed_fix",
    "observed_verdicts",
    "rel_path",
    "run_verdicts",
]
