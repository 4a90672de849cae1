"""``torch.compile(backend="neuron")`` on TorchNeuron: what changes when the model is compiled, not run eagerly.

The user says how they run the model with ``--native-mode eager|compile`` (default eager: TorchNeuron's
default and the mode that needs no code change). Under ``compile`` three facts of the compiled path apply,
each release-dependent (field-2026-12.md, section 1 and its addendum):

* **Recompiles.** ``dynamic=True`` is rejected (docs ``torch/compile/reference-torch-compile``, 2026-10-14),
  so every new input signature (shapes and dtypes) is a new graph: the ``dynamic_batch`` policy does not
  exist, and the bucket advice is the XLA stack's. The April 2026 development source raised on the second
  input shape instead of recompiling.
* **Graph breaks.** ``fullgraph=True`` (recommended) raises at the first break; with ``fullgraph=False`` the
  graph splits there and the code between graphs runs eagerly.
* **Ops without a lowering.** A graph holding an op the Neuron lowering does not cover fails to compile.
  With ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION`` at its 2.33+ default (true) that failure raises; set to
  ``0`` the original graph runs eagerly instead (docs ``torch/reference/env-vars``, 2026-10-14). In the April
  source the variable covered execution failures only, so a compile failure raised whatever it said.
* **float64 casts.** Eagerly a cast to or from float64 goes through the host (``cast_policy.py``); in a
  compiled graph the dtype-conversion pass makes float64 float32, so the cast is a precision note instead.
  Casts involving int64 keep their eager verdict (the source does not show them rewritten).

Which ops lack a lowering is predicted from the native (eager) table: the bundle holds no separate table
of the compiled path's lowerings, and an op without an eager kernel is taken to have no lowering either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from neuronprobe.errors import InputError
from neuronprobe.support import Classification
from neuronprobe.vocabulary import Verdict

EAGER = "eager"
COMPILE = "compile"
NATIVE_MODES: tuple[str, ...] = (EAGER, COMPILE)
FALLBACK_ENV = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"
NO_LOWERING_RULE = "native-compile-no-lowering"
EAGER_GRAPH_RULE = "native-compile-eager-fallback"
# The eager rules whose op runs on the host: under torch.compile the graph holding it has no lowering for it.
HOST_RULES = frozenset({"native-no-kernel", "native-registered-fallback", "native-host-kernel", "native-dtype-fallback", "native-composite-part"})
_DOCS = "docs torch/reference/env-vars and torch/compile/reference-torch-compile (Neuron 2.33+, 2026-10-14)"
_APRIL = "the April 2026 development source (parmoham-aws/test-repo-parmoham@98154b86)"
CAST_RULE = "native-64bit-cast"
FLOAT64_RULE = "native-float64"
_F64_PASS = "April 2026 development source neuron_dynamo_backend/fx/passes/dtype_conversion.py"
_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")
NO_DYNAMIC = "torch.compile(backend='neuron') rejects dynamic=True"


def check_native_mode(mode: str | None, stack: str) -> str:
    """``--native-mode`` checked: eager or compile, and only for the native stack (None: eager)."""
    if mode is None:
        return EAGER
    if mode not in NATIVE_MODES:
        raise InputError(f"--native-mode {mode!r}: use {' or '.join(NATIVE_MODES)}")
    if mode == COMPILE and stack != "native":
        raise InputError("--native-mode compile describes torch.compile(backend='neuron') on TorchNeuron; use it with --stack native (trn2/trn3)")
    return mode


def fallback_execution_disabled(env: Mapping[str, str]) -> bool:
    """Whether a graph that fails to compile raises (True: the 2.33+ default) or runs eagerly (``=0``)."""
    value = env.get(FALLBACK_ENV)
    if value is None or value.strip() == "":
        return True
    word = value.strip().lower()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise InputError(f"{FALLBACK_ENV}={value!r}: use 1 (a graph that fails to compile raises) or 0 (it runs eagerly)")


def _float64_cast(call: Any) -> bool:
    """A cast between float64 and a 32-bit-or-narrower dtype (no 64-bit integer or complex128 involved)."""
    dtypes = {t.dtype for t in [*call.inputs[:1], *call.outputs[:1]]}
    return "float64" in dtypes and not dtypes & {"int64", "uint64", "complex128"}


def compiled_verdict(verdict: Classification, call: Any, env: Mapping[str, str]) -> Classification:
    """An eager verdict as ``torch.compile(backend="neuron")`` sees it: a host op fails its graph's compile,
    and a float64 cast, which eager mode sends through the host, is compiled as a float32 one."""
    op = call.op
    if verdict.rule == CAST_RULE and _float64_cast(call):
        return Classification(
            Verdict.PRECISION,
            FLOAT64_RULE,
            f"{op} casts to or from float64 inside a compiled graph: TorchNeuron's dtype-conversion pass makes float64 result "
            f"types float32, so the cast stays on the device and the values are float32 ({_F64_PASS})",
            fix="compute the part that needs float64 on the CPU, or ask for float32 yourself so the CPU reference matches",
        )
    if verdict.verdict is not Verdict.CPU_FALLBACK or verdict.rule not in HOST_RULES:
        return verdict
    eager = f"(eagerly: {verdict.reason})"
    if fallback_execution_disabled(env):
        return Classification(
            Verdict.COMPILE_ERROR,
            NO_LOWERING_RULE,
            f"torch.compile(backend='neuron'): {op} has no Neuron lowering, so the graph holding it fails to compile and, "
            f"with {FALLBACK_ENV} at its default (1 from Neuron 2.33, {_DOCS}), the call raises {eager}",
            fix=f"replace the op with ones that have a Neuron kernel, move it out of the compiled function, or set {FALLBACK_ENV}=0 "
            f"to run the failing graph eagerly (2.33+; in {_APRIL} a compile failure raised whatever the variable said)",
        )
    return Classification(
        Verdict.CPU_FALLBACK,
        EAGER_GRAPH_RULE,
        f"torch.compile(backend='neuron'): {op} has no Neuron lowering, so the graph holding it fails to compile and, with "
        f"{FALLBACK_ENV}=0 (Neuron 2.33+), runs eagerly instead: every op of that graph runs one at a time, this one on the host {eager}",
        fix="replace the op with ones that have a Neuron kernel, or move it out of the compiled function so the rest compiles",
    )


BREAK_NOTE = (
    "; under torch.compile(backend='neuron', fullgraph=True), the recommended form, this break raises; with fullgraph=False "
    "the graph splits here and the code between the graphs runs eagerly"
)


def compiled_breaks(findings: list[Any], breaks: list[Any]) -> list[Any]:
    """Findings as the compiled native stack meets them: every graph break, and every branch on a tensor value
    (dynamo breaks the graph there), says that fullgraph=True raises at it."""
    marked = {id(f) for f in breaks}
    return [dataclasses.replace(f, message=f.message + BREAK_NOTE) if id(f) in marked or f.verdict is Verdict.CONTROL_FLOW else f for f in findings]


def compiled_recompiles(section: Any) -> None:
    """The recompile section for ``torch.compile(backend="neuron")``: no dynamic dims, one graph per signature.

    The ``dynamic_batch`` policy becomes the static count (the batch dim cannot be freed), and a fix that
    suggests freeing it says to pad the batch instead. Describes Neuron 2.33+ (docs); the April source
    raised on the second shape instead of compiling it.
    """
    static = section.predicted.get("static")
    if static is not None and "dynamic_batch" in section.predicted:
        section.predicted["dynamic_batch"] = dataclasses.replace(
            static, note=f"not available: {NO_DYNAMIC} ({_DOCS}); one graph per distinct input signature, as static"
        )
    static_note = f"; TorchNeuron compiles each new signature on first use (2.33+ docs; {_APRIL} raised on the second shape instead)"
    if static is not None and static_note not in static.note:
        static.note += static_note
    for cause in section.causes:
        if "dynamic_batch" in cause.fix:
            cause.fix = f"serve a few fixed batch sizes and pad the batch up to them ({NO_DYNAMIC})"
