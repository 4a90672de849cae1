"""``neuronprobe audit``: the CUDA assumptions in a repository and its CI, before they fail silently on Trainium.

Rule catalogue: ``data/rules.toml`` (:mod:`.rules`). Scanners: :mod:`.python_scan`
(syntax tree) and :mod:`.text_scan` (Dockerfiles, requirements, lockfiles,
pyproject, CI YAML). :mod:`.engine` runs them over files in parallel;
:mod:`.suppress` handles inline suppressions and baselines; :mod:`.sarif` and
:mod:`.console` render the result.

Only the result dataclasses are imported eagerly: the report model imports them,
and must stay light.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from neuronprobe.audit.model import AuditFinding, AuditProblem, AuditSection

_LAZY = {
    "audit_paths": "neuronprobe.audit.engine",
    "check_fail_on": "neuronprobe.audit.engine",
    "gate": "neuronprobe.audit.engine",
    "load_rules": "neuronprobe.audit.rules",
    "stack_for": "neuronprobe.audit.rules",
    "Rule": "neuronprobe.audit.rules",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


__all__ = ["AuditFinding", "AuditProblem", "AuditSection", *_LAZY]


class _CallablePackage(types.ModuleType):
    """``neuronprobe.audit(...)`` is the command as a function (:func:`neuronprobe.audit.api.audit`): the package and the
    function share the name, and a package imported once is what ``neuronprobe.audit`` is, so the package is callable."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from neuronprobe.audit.api import audit

        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
