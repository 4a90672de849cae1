"""``torch._dynamo.guard_failures``: why dynamo recompiled, one list of reasons per code object.

Checked on torch 2.13.0 (not used by the xla-cpu worker).

The recompile sweep reads the reasons each call added (a delta), and restores
the dict afterwards so the user's own guard-failure history is as it was.
"""

from __future__ import annotations

from types import CodeType

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._dynamo.guard_failures"
DEGRADES = "recompile reasons (which input size or value made dynamo recompile)"

Counts = dict[CodeType, int]


def _failures() -> dict[CodeType, list[object]]:
    try:
        from torch._dynamo import guard_failures

        failures: dict[CodeType, list[object]] = guard_failures
    except (ImportError, AttributeError) as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    if not isinstance(failures, dict):
        raise MissingInternal(INTERNAL, DEGRADES, f"is a {type(failures).__name__}, not a dict")
    return failures


def counts() -> Counts:
    """How many reasons each code object has now: the mark a later :func:`since` reads from."""
    return {code: len(reasons) for code, reasons in list(_failures().items())}


def since(before: Counts) -> list[str]:
    """The reasons added after ``before`` was taken, in order."""
    out: list[str] = []
    for code, reasons in list(_failures().items()):
        out.extend(str(r) for r in reasons[before.get(code, 0) :])
    return out


def restore(before: Counts) -> None:
    """Drop the reasons added after ``before``: the user's history stays, the tool's goes."""
    failures = _failures()
    for code in list(failures):
        keep = before.get(code, 0)
        if keep == 0:
            del failures[code]
        else:
            del failures[code][keep:]


def self_check() -> Check:
    def probe() -> None:
        before = counts()
        since(before)
        restore(before)

    return run_check(INTERNAL, DEGRADES, probe)
