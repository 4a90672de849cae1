"""The report's op inventory and findings: what happens to each aten op, and the problems at the user's lines."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.rules import RuleRegistry, UnknownRule, lookup
from neuronprobe.vocabulary import Confirmation, Origin, Phase, SourceLocation, Verdict


@dataclass
class OpSummary:
    """One row of the op inventory: an aten overload and what happens to it."""

    op: str  # dispatcher name, e.g. "aten::index_put_" or "aten::add.Tensor"
    count: int
    verdict: Verdict
    rule: str = ""
    reason: str = ""
    dtypes: list[str] = field(default_factory=list)
    example_shapes: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    phase: Phase = Phase.FORWARD  # schema 2

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)
        self.phase = Phase(self.phase)


@dataclass
class CallFrame:
    """One frame of model code on the way to a finding's line: ``encoder.py:16 (forward)``."""

    file: str | None
    line: int | None = None
    function: str = ""

    def __str__(self) -> str:
        place = str(SourceLocation(self.file, self.line))
        return f"{place} ({self.function})" if self.function else place


@dataclass
class Finding:
    """A problem at a place in the user's code, with what to do about it."""

    op: str
    verdict: Verdict
    file: str | None
    line: int | None
    module: str | None
    message: str
    fix: str
    rule: str
    ncc_code: str | None = None
    source_line: str | None = None
    count: int = 1
    origin: Origin = Origin.PREDICTED  # the support table, or a live backend
    bytes_per_call: int = 0  # host<->device bytes per forward, for cpu_fallback
    shapes: str = ""
    phase: Phase = Phase.FORWARD  # schema 2 (loop: a host read in the training loop)
    cell: int | None = None  # schema 4: the notebook cell (In [n]) when ``file`` is a cell; see neuronprobe.cells
    # schema 5 (issue 25): a risky low-precision construct, as the parity run's emulation judged it (None: not judged)
    confirmation: Confirmation | None = None
    # schema 6 (issue 33.7): the device's own error text the message was quieted from (a dispatcher dump), empty if none
    detail: str = ""
    # schema 6 (issue 33): the model-code callers of ``file:line``, outermost (the user's entry point) first;
    # empty when the op runs in the entry point itself or the chain is unknown
    call_chain: list[CallFrame] = field(default_factory=list)
    # schema 6: every origin that found this problem at this line (``origin`` is the one whose verdict won:
    # observed over predicted); empty in older reports, read as ``[origin]``
    origins: list[Origin] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)
        self.origin = Origin(self.origin)
        self.phase = Phase(self.phase)
        if self.confirmation is not None:
            self.confirmation = Confirmation(self.confirmation)
        self.origins = [Origin(o) for o in self.origins] or [self.origin]

    @property
    def chain_text(self) -> str:
        """The call chain in one line, for the renderers: ``model.py:11 (forward) > encoder.py:16 (forward)``."""
        return " > ".join(str(f) for f in self.call_chain)

    @property
    def origins_text(self) -> str:
        """``predicted``, ``observed`` or ``predicted+observed``."""
        return "+".join(o.value for o in Origin if o in self.origins)

    @classmethod
    def at(
        cls,
        rule: str,
        site: SourceLocation,
        op: str,
        message: str,
        *,
        verdict: Verdict | str | None = None,
        fix: str | None = None,
        module: str | None = None,
        source_line: str | None = None,
        ncc_code: str | None = None,
        count: int = 1,
        origin: Origin = Origin.PREDICTED,
        bytes_per_call: int = 0,
        shapes: str = "",
        phase: Phase = Phase.FORWARD,
        detail: str = "",
        registry: RuleRegistry | None = None,
    ) -> Finding:
        """A finding of the registered rule ``rule`` at ``site``: how the code makes every finding.

        ``verdict`` and ``fix`` default to the rule's (``neuronprobe/rules/registry.py``); a site
        that knows a better fix for this case passes it. A rule id the registry does not
        know, or a verdict the rule does not give, is an :class:`~neuronprobe.rules.UnknownRule`
        (a bug, exit 3). ``registry``: the analysis's rules when a user's ``--rules`` file adds ids
        (``support.RuleSet.registry``; default: the bundled rules). :meth:`Report.from_dict` builds
        findings directly: a saved report may name the rules of another version or of a user's file.
        """
        registered = lookup(rule, verdict, registry)
        chosen = verdict if verdict is not None else registered.verdict
        if chosen is None:
            raise UnknownRule(f"rule {rule!r} is an audit rule ({registered.source}): a finding cannot carry it")
        return cls(
            op=op,
            verdict=Verdict(chosen),
            file=site.file,
            line=site.line,
            module=module,
            message=message,
            fix=registered.fix if fix is None else fix,
            rule=rule,
            ncc_code=ncc_code,
            source_line=source_line,
            count=count,
            origin=origin,
            bytes_per_call=bytes_per_call,
            shapes=shapes,
            phase=phase,
            cell=site.cell,
            detail=detail,
        )

    @property
    def location(self) -> SourceLocation:
        return SourceLocation(self.file, self.line, self.cell)


@dataclass
class GraphBreak:
    """A place where dynamo had to stop the graph, with its reason."""

    reason: str
    file: str | None = None
    line: int | None = None
    source_line: str | None = None
    count: int = 1
    cell: int | None = None  # schema 4

    @property
    def location(self) -> SourceLocation:
        return SourceLocation(self.file, self.line, self.cell)


@dataclass
class Limitation:
    """Something neuronprobe could not analyse, and why."""

    what: str
    why: str
    # schema 6 (issue 33.8): the text ``why`` was quieted from (a PyTorch internal assertion, a dispatcher dump), for --debug readers
    detail: str = ""
