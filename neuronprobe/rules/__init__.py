"""Rules as data, and the registry of every rule id a finding can carry (issue 27; issue 35.3).

The registry (:mod:`neuronprobe.rules.registry`) reads the bundled rule catalogues as plain
data and answers, for an id, what its findings can be, how bad, what to do and where the
fact comes from. It sits in the bottom layer: the report model checks every finding against
it (:meth:`Finding.at <neuronprobe.report.model.Finding.at>`), and the report may import
nothing of how a report is made. The rules' full parsers stay with the code that applies
them (``support/`` for the support table and a user's ``--rules`` file, which builds the
analysis's ``support.RuleSet`` value from this registry).
"""

from __future__ import annotations

from neuronprobe.rules.registry import SOURCES, RegisteredRule, RuleKind, RuleRegistry, UnknownRule, bundled_registry, lookup

__all__ = ["SOURCES", "RegisteredRule", "RuleKind", "RuleRegistry", "UnknownRule", "bundled_registry", "lookup"]
