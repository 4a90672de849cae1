"""A captured call's verdict on the native stack (TorchNeuron eager), rule by rule, each with its release.

Eager TorchNeuron runs one aten op at a time (docs torch/reference/best-practices-pytorch-neuron):
an overload with a Neuron kernel for the PrivateUse1 key runs on the device; any other overload that
reaches the key goes through the boxed CPU fallback: inputs copied to the host, the CPU kernel, outputs
copied back, on every call. CompositeImplicitAutograd ops decompose first (their parts decide), and a
CompositeExplicitAutograd kernel runs its inner ops on the device (its parts decide, when captured).

64-bit types are not native: ops compute float64 as float32 and int64 as int32 (``DtypeAutocastContext``,
TorchNeuron ``python_ops/dtype_autocast.py``; zero-dimensional tensors are not narrowed), silently. A
float64 tensor is a ``precision`` note; an int64 value beyond int32's range in a constant the model
passes (an ``arange`` end, a fill value, a scalar operand) wraps, also a note; a cast to or from a 64-bit
dtype goes through the host (``python_ops/cast_policy.py``), a host round trip per call. The verdicts
describe the table's release (:attr:`NativeTable.release`); unlike the XLA stack, a data-dependent
output size is no problem in eager mode: the op runs and the next one sees the real size.
"""

from __future__ import annotations

from typing import Any

from neuronprobe.support import Classification, load_table
from neuronprobe.support.native.table import NativeTable
from neuronprobe.vocabulary import SUPPORTED_VERDICTS, Verdict

INT32_MAX = 2**31 - 1
WIDE = ("float64", "int64", "uint64", "complex128")
_FALLBACK_FIX = (
    "keep this op off the device (compute it on the CPU before the model, or outside the hot loop), replace it with ops "
    "that have a Neuron kernel, or register a kernel for it (an NKI kernel with torch.library); "
    "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 and torch_neuronx.get_fallback_ops() confirm it on the device"
)
_CAST_FIX = (
    "cast once outside the loop, or keep the tensor in a 32-bit dtype on the device (int32 indices, float32 math): "
    "64-bit tensors are computed in 32 bits on the device anyway"
)


def _tensors(call: Any) -> list[Any]:
    return [*call.inputs, *call.outputs]


def _is_cast(call: Any) -> bool:
    return call.name in ("_to_copy", "to", "_to_copy_", "copy_") and call.inputs and call.outputs


def _bounce(call: Any) -> bool:
    """A cast to or from a 64-bit dtype: TorchNeuron's cast policy sends it through the CPU."""
    if not _is_cast(call):
        return False
    src, dst = call.inputs[0].dtype, call.outputs[0].dtype
    return src != dst and (src in WIDE or dst in WIDE)


def _big_constant(call: Any) -> int | None:
    """An integer constant of the call beyond int32's range, if any (TorchNeuron narrows int64 to int32)."""
    for value in call.constants.values():
        items = value if isinstance(value, (list, tuple)) else [value]
        for v in items:
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT32_MAX:
                return v
    return None


def _float64(call: Any) -> bool:
    return any(t.dtype == "float64" and len(t.shape) > 0 for t in _tensors(call))


def _on_device_note(call: Any, table: NativeTable) -> Classification | None:
    """The 64-bit narrowing note for a call that runs on the device, if its results change."""
    big = _big_constant(call)
    if big is not None and any(t.dtype in ("int64", "uint64") for t in _tensors(call)) | (call.name in ("arange", "full", "scalar_tensor")):
        return Classification(
            Verdict.PRECISION,
            "native-int64-range",
            f"{call.op} uses the integer {big}, beyond int32's range, and TorchNeuron computes int64 as int32 on the device "
            f"(python_ops/dtype_autocast.py; {table.release}): the value wraps without an error",
            "keep values this large on the CPU (hashes, offsets, large position ids), or split them into two int32 halves; "
            "neuronx-cc --native-int64=enabled (2.32+, trn2+) keeps 64-bit integers in compiled graphs at a 20-30% cost",
        )
    if _float64(call):
        return Classification(
            Verdict.PRECISION,
            "native-float64",
            f"{call.op} asks for float64, which TorchNeuron computes as float32 on the device in eager and compiled mode "
            f"(python_ops/dtype_autocast.py, neuron_dynamo_backend fx/passes/dtype_conversion.py; {table.release}): results differ from float64",
            "if the result needs float64, compute this part on the CPU; otherwise ask for float32 yourself (dtype=torch.float32) "
            "so the CPU reference matches the device",
        )
    return None


def classify_native(call: Any, table: NativeTable) -> Classification:
    """The verdict for one captured call (:class:`neuronprobe.capture.graph.OpCall`) on TorchNeuron in eager mode."""
    result = _classify(call, table)
    if result.verdict in SUPPORTED_VERDICTS and result.rule != "bookkeeping":
        return _on_device_note(call, table) or result
    return result


def _fallback(call: Any, rule: str, why: str, fix: str = _FALLBACK_FIX) -> Classification:
    return Classification(Verdict.CPU_FALLBACK, rule, why, fix)


def _classify(call: Any, table: NativeTable) -> Classification:
    key = call.key
    if call.namespace != "aten":
        return _fallback(
            call,
            "custom-op",
            f"{call.op} is a custom op outside the aten namespace: with no kernel registered for the neuron device it runs through the CPU fallback",
            "register a kernel for the PrivateUse1 key (an NKI kernel with torch.library), or express it with aten ops",
        )
    xla = load_table()
    if key in xla.bookkeeping or call.name in xla.bookkeeping:
        return Classification(Verdict.LOWERED, "bookkeeping", f"{call.op} is tracer bookkeeping: no device work")
    artifact = xla.device_artifacts.get(key) or xla.device_artifacts.get(call.name)
    if artifact is not None:  # the capture ran on CPU tensors: torch picked its CPU kernel, the neuron device picks its own
        return Classification(
            Verdict.DECOMPOSED,
            "native-device-artifact",
            f"{call.op} is the kernel a CPU capture picks for {artifact}; on the neuron device {artifact} takes the device's path "
            f"(_scaled_dot_product_fused_attention_overrideable has a Neuron kernel in {table.release}, and the math decomposition's matmul "
            "and softmax run on the device)",
        )
    if call.name in table.unsupported:
        return Classification(
            Verdict.COMPILE_ERROR,
            "native-unsupported",
            f"{call.op}: {table.release}'s compatibility table marks {call.name} N (not supported on the neuron device)",
            "run this part on the CPU, or use an equivalent the table marks Y",
        )
    if _bounce(call):
        src, dst = call.inputs[0].dtype, call.outputs[0].dtype
        return _fallback(
            call,
            "native-64bit-cast",
            f"{call.op} casts {src} to {dst}; TorchNeuron sends every cast to or from a 64-bit dtype through the CPU "
            f"(python_ops/cast_policy.py is_64bit; {table.release}): a host round trip per call",
            _CAST_FIX,
        )
    if key in table.neuron_kernel:
        falls = table.dtype_fallback.get(key, frozenset()) & {t.dtype for t in _tensors(call)}
        if falls:
            return _fallback(
                call,
                "native-dtype-fallback",
                f"{call.op} has a Neuron kernel, but for {', '.join(sorted(falls))} it falls back to the CPU ({table.release}'s compatibility table)",
            )
        if key in table.host_kernels:
            return _fallback(call, "native-host-kernel", f"{call.op} is registered for the neuron device, but {table.host_kernels[key]} ({table.release})")
        return Classification(Verdict.LOWERED, "native-kernel", f"{call.op} has a Neuron kernel ({table.release})")
    if key in table.registered_cpu_fallback:
        return _fallback(
            call,
            "native-registered-fallback",
            f"{call.op} is registered as a CPU fallback on the neuron device ({table.release}): it runs on the host, its inputs and outputs copied each call",
        )
    if key in table.composite and not (call.has_composite_implicit and call.parts is not None):
        via = _out_variant(key, table)
        if via is not None:
            return _through_out(call, via, table)
    if call.has_composite_implicit or key in table.composite or (call.has_composite_explicit and key not in table.no_kernel):
        return _from_parts(call, table)
    silent = " (and without the fallback's warning: TorchNeuron silences it for this op)" if key in table.silent_fallback else ""
    return _fallback(
        call,
        "native-no-kernel",
        f"{call.op} has no Neuron kernel ({table.release}): it reaches the neuron device's key and runs through TorchNeuron's "
        f"boxed CPU fallback, inputs copied to the host and outputs back on every call{silent}",
    )


def _out_variant(key: str, table: NativeTable) -> str | None:
    """The ``out=`` overload a composite kernel writes through (``div.Tensor`` -> ``div.out``), if the table knows one.

    torch's generated CompositeExplicitAutogradNonFunctional kernel of a structured op (and the
    in-place form's) calls its out variant through the dispatcher, so the out variant's kernel
    decides where the work runs (field-2026-12.md, addendum: registered ``.out`` variants).
    """
    name, _, overload = key.partition(".")
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    # out overload names in native_functions.yaml: div.out, add.out, gt.Scalar_out, sort.values_stable, min.dim_min
    candidates = (
        [f"{base}.{overload}_out", f"{base}.values_{overload}", f"{base}.{overload}_{base}", f"{base}.out"] if overload else [f"{base}.out", f"{base}.values"]
    )
    known = table.neuron_kernel | table.no_kernel | table.registered_cpu_fallback
    return next((c for c in candidates if c in known), None)


def _through_out(call: Any, via: str, table: NativeTable) -> Classification:
    if via in table.neuron_kernel:
        return Classification(Verdict.LOWERED, "native-kernel", f"{call.op} runs through {via}, which has a Neuron kernel ({table.release})")
    return _fallback(
        call,
        "native-no-kernel",
        f"{call.op}'s composite kernel writes through aten::{via}, which has no Neuron kernel ({table.release}): "
        "it runs through TorchNeuron's boxed CPU fallback, inputs copied to the host and outputs back on every call",
    )


def _from_parts(call: Any, table: NativeTable) -> Classification:
    """A composite op's verdict: its worst part's, or decomposed when every part runs on the device."""
    kind = (
        "CompositeImplicitAutograd: it decomposes before the backend"
        if call.has_composite_implicit
        else "a backend-independent kernel whose inner ops dispatch to the device"
    )
    parts = [p for p in call.parts or () if p.key != call.key]
    failing = [(p, _classify(p, table)) for p in parts]
    failing = [(p, c) for p, c in failing if c.verdict not in SUPPORTED_VERDICTS]
    if failing:
        part, worst = max(failing, key=lambda pc: Verdict(pc[1].verdict).rank)
        return Classification(
            worst.verdict, "native-composite-part", f"{call.op} is {kind}, and its part {part.op} does not run on the device: {worst.reason}", worst.fix
        )
    if call.parts is None:
        return Classification(Verdict.DECOMPOSED, "native-composite", f"{call.op} is {kind} (its parts could not be replayed to check them)")
    return Classification(
        Verdict.DECOMPOSED,
        "native-composite",
        f"{call.op} is {kind}: {', '.join(sorted({p.op for p in parts})) or 'no device work'}, all with Neuron kernels ({table.release})",
    )


def wide_inputs(args: tuple, kwargs: dict) -> list[tuple[str, int, list[int]]]:
    """The example inputs whose int64 values do not fit int32: (name, largest magnitude, shape).

    TorchNeuron computes int64 as int32 on the device (``python_ops/dtype_autocast.py``), so such a value
    (a hash, a token offset, a large position id) wraps silently. Meta and fake tensors hold no values.
    """
    import torch

    named = [(f"argument {i}", a) for i, a in enumerate(args)] + [(f"argument {k!r}", v) for k, v in kwargs.items()]
    out = []
    for name, t in named:
        if isinstance(t, torch.Tensor) and t.dtype in (torch.int64, torch.uint64) and t.numel() and t.device.type == "cpu":
            try:
                largest = int(t.abs().max())
            except (RuntimeError, NotImplementedError):  # a fake or subclass tensor without data
                continue
            if largest > INT32_MAX:
                out.append((name, largest, list(t.shape)))
    return out


def first_reader(calls: list[Any], shape: list[int]) -> Any | None:
    """The first captured call that reads a graph input of ``shape`` in int64 (where the user's code uses it)."""
    for call in calls:
        for t, src in zip(call.inputs, call.sources or [None] * len(call.inputs), strict=False):
            if src is None and t.dtype in ("int64", "uint64") and list(t.shape) == shape:
                return call
    return None
