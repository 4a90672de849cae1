"""``neuronprobe.audit(path, ...)``: the audit command's flags as keywords, and the checks the command shares.

The package ``neuronprobe.audit`` is itself callable (its ``__init__``), so ``neuronprobe.audit(...)`` is this
function. No model, no torch; a failed ``fail_on`` raises :class:`~neuronprobe.errors.GateFailed` with the section.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronprobe import defaults
from neuronprobe.errors import GateFailed, InputError

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.audit.model import AuditSection


def check_audit_target(stack: str | None, target: str) -> str:
    """The stack whose fixes an audit gives (``--stack`` wins, else the target's); one sentence for a bad one."""
    from neuronprobe.audit.rules import STACKS, TARGET_STACK, stack_for

    if stack is not None and stack not in STACKS:
        raise InputError(f"--stack {stack!r}: use {' or '.join(STACKS)}")
    if stack is None and target not in TARGET_STACK:
        raise InputError(f"--target {target!r}: use {', '.join(TARGET_STACK)}")
    return stack_for(target, stack)


# --jobs: worker processes. Under the fork start method CPython's ProcessPoolExecutor starts all of them at once
# (concurrent/futures/process.py, _launch_processes, 3.11), so --jobs 100000 forked 100000 processes; as nightly --jobs.
MAX_AUDIT_JOBS = 256


def check_audit_options(paths: Sequence[Any], fail_on: Sequence[str], jobs: int | None) -> None:
    """An audit's paths, gates and worker count, checked before the walk."""
    from neuronprobe.audit.engine import check_fail_on

    if not paths:
        raise InputError("give at least one PATH to audit (or --rules to list the rules)")
    check_fail_on(list(fail_on))
    if jobs is not None and not 1 <= jobs <= MAX_AUDIT_JOBS:
        raise InputError(f"--jobs {jobs}: use 1 to {MAX_AUDIT_JOBS}")


def audit(
    *paths: str | os.PathLike[str],
    stack: str | None = None,
    target: str = defaults.DEFAULT_TARGET,
    fail_on: str | Sequence[str] = (),
    baseline: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    include_vendored: bool = False,
) -> AuditSection:
    """``neuronprobe audit PATH...``: the CUDA assumptions of a repository, as an AuditSection (no model, no torch)."""
    from neuronprobe.audit.engine import audit_paths, gate

    chosen = check_audit_target(stack, target)
    gates = [v.strip() for v in fail_on.split(",") if v.strip()] if isinstance(fail_on, str) else list(fail_on)
    check_audit_options(paths, gates, jobs)
    section = audit_paths(
        [str(p) for p in paths], chosen, jobs=jobs, include_vendored=include_vendored, baseline=Path(baseline) if baseline is not None else None
    )
    hit = gate(section, gates)
    if hit:
        raise GateFailed(f"{len(hit)} new finding(s) at --fail-on {','.join(gates)}", section, hit)
    return section


__all__ = ["audit", "check_audit_options", "check_audit_target"]
