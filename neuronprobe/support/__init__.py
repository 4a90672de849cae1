"""The bundled Neuron support table and the rules that read it.

The table is data (``data/``), with provenance:

* ``xla_lowerings.json``: the aten ops that have a torch-xla lowering, generated
  by ``scripts/build_support_table.py`` from torch-xla's
  ``codegen/xla_native_functions.yaml`` at a release tag (or, on a Neuron host,
  from the dispatcher's ``XLA`` registrations).
* ``neuron_rules.json``: what the Neuron compiler adds on top, per target:
  dtypes it rejects, ops it cannot compile, data-dependent shapes, with the
  NCC_* code where the error catalogue has one, and a one-line fix; and the
  ops torch-xla lowers only for some arguments. A rule says *when* it applies
  (``when``: conditions on dtypes, arguments and shapes, see
  :mod:`neuronprobe.support.conditions`) and in which Neuron SDK releases
  (``sdk_from``, ``sdk_fixed``). The file is validated on load
  (:mod:`neuronprobe.support.rulefile`): a bad rule is an error naming it.

:func:`classify` applies them in a fixed order, so every verdict names the
rule that produced it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Protocol, TypeVar

from neuronprobe.defaults import DEFAULT_TARGET
from neuronprobe.errors import InputError, InternalError
from neuronprobe.rules import RuleKind, RuleRegistry, bundled_registry
from neuronprobe.support.conditions import holds
from neuronprobe.support.device_dtypes import DeviceDtypes, device_dtypes
from neuronprobe.support.rule import TARGETS, Rule, release_key
from neuronprobe.vocabulary import SUPPORTED_VERDICTS, Verdict

# Every rule id a finding can carry, with its verdicts, fix and provenance, is registered once in
# neuronprobe/rules/registry.py; the ids classify() gives without a rule of neuron_rules.json (custom-op,
# no-lowering, xla-lowering, composite-part, device-dtype, ...) are in data/builtin_rules.json.


@dataclass(frozen=True)
class SupportTable:
    version: str
    torch_xla: str
    compiler: str
    lowered: frozenset[str]
    rules: tuple[Rule, ...]
    bookkeeping: frozenset[str]
    device_artifacts: dict[str, str]
    provenance: tuple[str, ...]
    sdk_releases: dict[str, str] = field(default_factory=dict)  # SDK release -> its neuronx-cc version

    @property
    def newest_sdk(self) -> str:
        return max(self.sdk_releases, key=release_key) if self.sdk_releases else ""

    def label(self, sdk: str | None = None) -> str:
        release = f", Neuron SDK {sdk or self.newest_sdk}" if self.sdk_releases else ""
        return f"{self.version} (torch-xla {self.torch_xla} lowerings + Neuron rules{release})"

    def check_sdk(self, sdk: str) -> str:
        """``sdk`` if the table knows the release, else an :class:`InputError` that lists the known ones."""
        if sdk not in self.sdk_releases:
            known = ", ".join(sorted(self.sdk_releases, key=release_key))
            raise InputError(f"--sdk {sdk!r}: unknown Neuron SDK release; the support table knows {known}")
        return sdk

    def sdk_for_compiler(self, neuronx_cc: str | None) -> str | None:
        """The SDK release that shipped neuronx-cc ``neuronx_cc`` (matched on major.minor.build), if known."""
        if not neuronx_cc:
            return None
        want = release_key(neuronx_cc)[:3]
        for release, cc in sorted(self.sdk_releases.items(), key=lambda kv: release_key(kv[0]), reverse=True):
            if cc and release_key(cc)[:3] == want:
                return release
        return None


class RuleNotFound(InternalError):
    """The code names a rule by id that its bundled table lacks: the two disagree, a bug in neuronprobe."""


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


_R = TypeVar("_R", bound=_HasId)


def find_rule(rules: Iterable[_R], rule_id: str, table: str) -> _R:
    """The rule called ``rule_id`` in ``rules``; a :class:`RuleNotFound` naming the id and ``table`` otherwise.

    ``table`` says which table and version was searched (``"support table 2026.11.1"``),
    so the message points at the data file to fix rather than at a bare ``StopIteration``.
    """
    for rule in rules:
        if rule.id == rule_id:
            return rule
    raise RuleNotFound(f"rule {rule_id!r} is missing from {table}, but neuronprobe's code relies on it")


def rule_by_id(table: SupportTable, rule_id: str, op: str | None = None) -> Rule:
    """A rule of the support table by id.

    A user's ``--rules`` file may override a bundled rule (``"override": true``; it
    comes first), but only for the ops it names: with ``op`` (``"_unique2"`` or a
    ``name.overload`` key), an override whose ``ops`` do not name it is passed over
    for the bundled rule.
    """
    where = f"support table {table.version} (support/data/neuron_rules.json)"
    candidates = [r for r in table.rules if r.id == rule_id]
    if op is not None:
        name = op.removeprefix("aten::")
        for rule in candidates:
            if not rule.ops or name in rule.ops or name.split(".")[0] in rule.ops:
                return rule
        if candidates:
            return candidates[-1]  # the bundled rule comes last
    return find_rule(candidates, rule_id, where)


def code_rule_ids() -> frozenset[str]:
    """Every registered rule id that is not a rule of the support table (:mod:`neuronprobe.rules`).

    The built-in ids, the training and HLO rules and the audit's. A user's rule may not
    take one of these ids (nor a bundled rule's id, unless it declares ``"override": true``).
    """
    return bundled_registry().ids(kind for kind in RuleKind if kind is not RuleKind.TABLE)


@dataclass(frozen=True)
class Classification:
    verdict: Verdict
    rule: str
    reason: str
    fix: str = ""
    ncc_code: str | None = None


def _read(name: str) -> Any:
    return json.loads(resources.files("neuronprobe.support").joinpath("data", name).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def load_table() -> SupportTable:
    """The bundled table, its rules validated (a bad rule raises :class:`InternalError` naming it)."""
    from neuronprobe.support.rulefile import parse_rules_doc

    lowerings = _read("xla_lowerings.json")
    rules_doc = _read("neuron_rules.json")
    try:
        rules = parse_rules_doc(rules_doc, "neuron_rules.json")
    except InputError as exc:  # the bundled file, not the user's: a bug in neuronprobe (exit 3)
        raise InternalError(f"the bundled support table is invalid: {exc}") from None
    return SupportTable(
        version=rules_doc["version"],
        torch_xla=lowerings["torch_xla"],
        compiler=rules_doc["compiler"],
        lowered=frozenset(lowerings["ops"]),
        rules=rules,
        bookkeeping=frozenset(rules_doc["bookkeeping_ops"]),
        device_artifacts=dict(rules_doc["device_artifacts"]["ops"]),
        provenance=(lowerings["source"], *rules_doc["provenance"]),
        sdk_releases=dict(rules_doc["sdk_releases"]),
    )


@dataclass(frozen=True)
class RuleSet:
    """The rules one analysis applies, as a value passed down from where the options are read.

    ``table``: the support table, a user's ``--rules`` first (they win); ``registry``: every id a
    finding may carry, the user's among them, which :meth:`Finding.at` checks findings against.
    A rules file is parsed once per analysis into one of these; nothing of it is kept in the
    process, so a notebook's next analysis without the file sees the bundled rules only.
    """

    table: SupportTable
    registry: RuleRegistry


def rule_set(path: Any = None) -> RuleSet:
    """The bundled rules, with those of the user's rules file at ``path`` (checked in full) when one is given."""
    table = load_table()
    if path is None:
        return RuleSet(table, bundled_registry())
    extra = _user_rules(table, path)
    return RuleSet(_with(table, extra), bundled_registry().with_user_rules(extra, str(path)))


def with_user_rules(table: SupportTable, path: Any) -> SupportTable:
    """``table`` with the rules of a user's file first (they win); the file is fully checked."""
    return _with(table, _user_rules(table, path))


def _user_rules(table: SupportTable, path: Any) -> tuple[Rule, ...]:
    from pathlib import Path

    from neuronprobe.support.rulefile import load_rules_file
    from neuronprobe.vocabulary import SECTION_GATES  # --fail-on parity must not become a user rule's id too

    reserved = code_rule_ids() | frozenset(SECTION_GATES)
    return load_rules_file(Path(path), table.sdk_releases, bundled=frozenset(r.id for r in table.rules), reserved=reserved)


def _with(table: SupportTable, extra: tuple[Rule, ...]) -> SupportTable:
    from dataclasses import replace

    return replace(table, rules=(*extra, *table.rules))


def select_sdk(table: SupportTable, requested: str | None, detected_neuronx_cc: str | None = None) -> str:
    """The SDK release whose rules apply: the one a live backend detected, else ``--sdk``, else the newest.

    A detected compiler the table does not know leaves the choice to ``--sdk`` or the default.
    """
    detected = table.sdk_for_compiler(detected_neuronx_cc)
    if detected:
        return detected
    return table.check_sdk(requested) if requested else table.newest_sdk


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise InputError(f"--target {target!r}: unknown Neuron target; use one of {', '.join(TARGETS)}")
    return target


def _functional_key(key: str) -> str | None:
    """``add_.Tensor`` -> ``add.Tensor``: in-place ops lower through their functional form."""
    name, dot, overload = key.partition(".")
    if name.endswith("_") and not name.endswith("__"):
        return name[:-1] + dot + overload
    return None


def _view_copy_key(call: Any) -> str:
    """``view_as_complex`` -> ``view_as_complex_copy``: torch-xla functionalizes a view into its _copy form."""
    return f"{call.name}_copy" if call.overload == "default" else f"{call.name}_copy.{call.overload}"


def _out_functional_key(call: Any) -> str | None:
    """``where.self_out`` -> ``where.self``, ``complex.out`` -> ``complex``: torch-xla functionalizes out= forms."""
    if call.overload == "out":
        return call.name
    if call.overload.endswith("_out"):
        return f"{call.name}.{call.overload[: -len('_out')]}"
    return None


def _rule_matches(rule: Rule, call: Any, target: str, sdk: str | None = None) -> bool:
    if target not in rule.targets:
        return False
    if sdk and not rule.applies_to_sdk(sdk):
        return False
    if call.key in rule.not_ops or call.name in rule.not_ops:
        return False
    matched = False
    if rule.ops:
        if call.key not in rule.ops and call.name not in rule.ops:
            return False
        matched = True
    if rule.tags and set(call.tags) & rule.tags:
        matched = True
    if rule.layouts and any(t.layout in rule.layouts for t in [*call.inputs, *call.outputs]):
        matched = True
    if rule.dtypes:
        if not any(t.dtype in rule.dtypes for t in [*call.inputs, *call.outputs]):
            return False
        matched = True
    if rule.input_dtypes:
        if not call.inputs or call.inputs[0].dtype not in rule.input_dtypes:
            return False
        matched = True
    if rule.when and not all(holds(c, call) for c in rule.when):
        return False
    return matched


def _part_rank(part_and_verdict: tuple[Any, Classification]) -> tuple[bool, int]:
    """Which failing part names a composite's verdict: a part torch-xla runs on the host first
    (it happens at dispatch, before any compile), then the most severe."""
    verdict = Verdict(part_and_verdict[1].verdict)
    return verdict in (Verdict.CPU_FALLBACK, Verdict.DYNAMIC_SHAPE), verdict.rank


def _has_lowering(call: Any, table: SupportTable) -> bool:
    """Whether torch-xla lowers the op itself or through its functional form."""
    if call.key in table.lowered or (call.overload == "default" and call.name in table.lowered):
        return True
    if _view_copy_key(call) in table.lowered:
        return True
    functional = _functional_key(call.key) or _out_functional_key(call)
    return bool(functional and (functional in table.lowered or functional.split(".")[0] in table.lowered))


def on_device(call: Any, dtypes: DeviceDtypes) -> Any:
    """``call`` with each tensor in the dtype the device computes it in (the call itself when none changes)."""
    if not dtypes.narrowings:
        return call
    from dataclasses import replace

    def mapped(t: Any) -> Any:
        d = dtypes.device_dtype(t.dtype)
        return t if d == t.dtype else replace(t, dtype=d)

    if not _narrowed(call, dtypes):
        return call
    return replace(
        call,
        inputs=[mapped(t) for t in call.inputs],
        outputs=[mapped(t) for t in call.outputs],
        arg_tensors={k: [mapped(t) for t in ts] for k, ts in call.arg_tensors.items()},
        parts=None if call.parts is None else [on_device(p, dtypes) for p in call.parts],
    )


def _narrowed(call: Any, dtypes: DeviceDtypes) -> bool:
    """Whether the device computes any tensor of ``call`` (or of its parts) in another dtype."""
    tensors = [*call.inputs, *call.outputs, *(t for ts in call.arg_tensors.values() for t in ts)]
    return any(dtypes.device_dtype(t.dtype) != t.dtype for t in tensors) or any(_narrowed(p, dtypes) for p in call.parts or ())


def _precision(call: Any, dtypes: DeviceDtypes) -> Classification | None:
    """The precision note for a call that compiles but whose dtypes the device narrows, if any."""
    notes = dtypes.notes({t.dtype for t in [*call.inputs, *call.outputs]})
    if not notes:
        return None
    by = f", with {' and '.join(dtypes.variables)} set" if dtypes.variables else ""
    what = "; ".join(f"{n.source} is computed in {n.device} on the device: results will differ from {n.source}" for n in notes)
    source, device = notes[0].source, notes[0].device
    return Classification(
        Verdict.PRECISION,
        "device-dtype",
        f"{what} (torch-xla maps the type on a Neuron device{by}; {dtypes.stack} stack)",
        f"if the result needs {source} accuracy, compute this part on the host outside the traced model; "
        f"otherwise ask for {device} yourself (.to(torch.{device}), dtype=torch.{device}) so the CPU reference matches the device",
    )


def classify(
    call: Any,
    target: str = DEFAULT_TARGET,
    table: SupportTable | None = None,
    sdk: str | None = None,
    dtypes: DeviceDtypes | None = None,
) -> Classification:
    """The verdict for one captured op call (a :class:`neuronprobe.capture.graph.OpCall`).

    ``sdk`` selects the rules of one Neuron SDK release (default: the newest the table knows).
    ``dtypes`` is the device's dtype mapping (default: the target's, no environment variables):
    the rules judge the call in the dtypes the device computes in, and a call that compiles
    in a narrower dtype than it asks for is a ``precision`` note.
    """
    dtypes = dtypes if dtypes is not None else device_dtypes(target)
    result = _classify(on_device(call, dtypes), target, table, sdk, dtypes)
    if result.verdict in SUPPORTED_VERDICTS and result.rule != "bookkeeping":  # bookkeeping computes nothing
        return _precision(call, dtypes) or result
    return result


def _classify(call: Any, target: str, table: SupportTable | None, sdk: str | None, dtypes: DeviceDtypes) -> Classification:
    table = table or load_table()
    sdk = sdk or table.newest_sdk
    key = call.key
    if call.namespace != "aten":
        return Classification(
            Verdict.CPU_FALLBACK,
            "custom-op",
            f"{call.op} is a custom op outside the aten namespace: Neuron has no lowering for it unless you register one",
            "register a Neuron/XLA lowering for the op (an NKI kernel), or express it with aten ops",
        )
    if key in table.bookkeeping or call.name in table.bookkeeping:
        return Classification(Verdict.LOWERED, "bookkeeping", f"{call.op} is tracer bookkeeping: no device work")
    # A boolean-mask index produces a data-dependent size even though index.Tensor lowers.
    if call.data_dependent_output and call.name not in ("_local_scalar_dense", "item"):
        rule = rule_by_id(table, "dynamic-output-shape", key)
        return Classification(rule.verdict, rule.id, rule.message, rule.fix_for(key), rule.ncc_code)
    reaches_compiler = _has_lowering(call, table) or (
        (call.has_composite_implicit or call.has_composite_explicit)
        and all(_has_lowering(p, table) or p.key == key or p.key in table.bookkeeping for p in call.parts or ())
    )
    for rule in table.rules:
        # torch-xla sends an op it cannot lower to the host before neuronx-cc sees it.
        if rule.verdict == Verdict.COMPILE_ERROR and not reaches_compiler:
            continue
        if _rule_matches(rule, call, target, sdk):
            return Classification(rule.verdict, rule.id, rule.reason(), rule.fix_for(key), rule.ncc_code)
    if key in table.device_artifacts:
        stands_for = table.device_artifacts[key]
        return Classification(
            Verdict.DECOMPOSED,
            "device-artifact",
            f"{call.op} is the kernel a CPU capture picks for {stands_for}; on Neuron, {stands_for} decomposes into matmul and softmax, which lower",
        )
    if key in table.lowered or (call.overload == "default" and call.name in table.lowered):
        return Classification(Verdict.LOWERED, "xla-lowering", f"{call.op} has a torch-xla lowering ({table.torch_xla})")
    view_copy = _view_copy_key(call)
    if view_copy in table.lowered:
        return Classification(Verdict.LOWERED, "xla-lowering-view", f"{call.op} is a view torch-xla lowers as {view_copy}")
    functional = _functional_key(key) or _out_functional_key(call)
    if functional and (functional in table.lowered or functional.split(".")[0] in table.lowered):
        return Classification(Verdict.LOWERED, "xla-lowering-functional", f"{call.op} lowers through its functional form {functional}")
    if call.has_composite_implicit:
        failing = [(part, _classify(part, target, table, sdk, dtypes)) for part in call.parts or ()]
        failing = [(part, c) for part, c in failing if c.verdict not in SUPPORTED_VERDICTS]
        if failing:
            part, worst = max(failing, key=_part_rank)
            return Classification(
                worst.verdict,
                "composite-part",
                f"decomposes into {part.op}, which does not lower: {worst.reason}",
                worst.fix,
                worst.ncc_code,
            )
        if call.parts is None:
            return Classification(
                Verdict.DECOMPOSED,
                "composite-implicit",
                f"{call.op} is CompositeImplicitAutograd: it decomposes into other aten ops before lowering (its parts could not be replayed to check them)",
            )
        return Classification(
            Verdict.DECOMPOSED,
            "composite-implicit",
            f"{call.op} is CompositeImplicitAutograd: it decomposes into {', '.join(p.op for p in call.parts) or 'no device work'}, all of which lower",
        )
    if call.has_composite_explicit:
        failing = [(part, _classify(part, target, table, sdk, dtypes)) for part in call.parts or () if part.key != key]
        failing = [(part, c) for part, c in failing if c.verdict not in SUPPORTED_VERDICTS]
        if failing:
            part, worst = max(failing, key=_part_rank)
            return Classification(
                worst.verdict,
                "composite-part",
                f"{call.op}'s backend-independent kernel calls {part.op}, which does not lower: {worst.reason}",
                worst.fix,
                worst.ncc_code,
            )
        return Classification(
            Verdict.DECOMPOSED,
            "composite-explicit",
            f"{call.op} has a backend-independent (CompositeExplicitAutograd) kernel built from other aten ops",
        )
    return Classification(
        Verdict.CPU_FALLBACK,
        "no-lowering",
        f"{call.op} has no torch-xla lowering ({table.torch_xla}) and no decomposition: torch-xla runs it on the host",
        f"replace {call.op} with ops that lower (see the op inventory), or move it out of the traced forward",
    )
