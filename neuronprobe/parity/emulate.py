"""Run a model's forward on the CPU as Neuron would compute it under a :class:`Precision`.

What is emulated (each op as torch dispatches it, seen by a dispatch mode; ``neuronprobe/_torch/dispatch_mode.py``):

* ``--auto-cast matmult`` (and ``all``): the inputs of every matmul-family op (``mm``, ``addmm``,
  ``bmm``, ``baddbmm``, ``addmv``/``mv``/``dot``, ``convolution``, and the attention kernel,
  whose two matmuls are emulated with the softmax between them) are rounded to the auto-cast type
  (round to nearest even), the product is accumulated in fp32 and the result handed on in the
  model's dtype: the compiler documents fp32 accumulation for auto-cast matmuls
  (neuronx-cc api-reference-guide). ``bf16``/``fp16`` round through the torch dtype; ``tf32``
  rounds the fp32 mantissa to 10 bits; ``fp8_e4m3`` round-trips through ``torch.float8_e4m3fn``
  (torch saturates at +-448 and flushes below 2**-9).
* ``--auto-cast all``: additionally every other op's floating-point inputs are rounded to the
  auto-cast type (in-place ops: their result is rounded in place).
* ``--dtype bf16|fp16``: the model's floating-point weights, buffers and inputs are cast to the dtype,
  as served; each op then runs in that dtype with torch's CPU kernels (which keep fp32 inside a
  reduction and round the result).
* Mixed-precision accumulation, for softmax, log_softmax, layer/group/batch norm, sum, mean,
  var/std, logsumexp, cumsum and norms, whenever their inputs are in a low type (served dtype or
  ``all``): **on** computes them in fp32 from the low-type inputs and rounds the result back;
  **off** keeps the intermediates in the low type: softmax, log_softmax, layer_norm, sum and mean
  are decomposed with every intermediate (the centred values, the variance plus eps, each level of
  a pairwise-summation tree) rounded to the low type; the other reductions round their output.

What is not emulated: the compiler's fusion and op order (a fused kernel may keep an intermediate
in fp32 that this emulation rounds, or the reverse), its reduction order inside a matmul (fp32
accumulation here is torch's order), stochastic rounding (``NEURON_RT_STOCHASTIC_ROUNDING_EN``;
the default is round to nearest even, as here), fp8 scaling recipes (a plain cast here), and
hardware transcendental approximations (exp, gelu, rsqrt are torch's). Runs are deterministic:
the same inputs give the same numbers (no randomness is drawn inside the mode).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

from neuronprobe.parity.precision import Precision
from neuronprobe.vocabulary import AutoCast, LowType, ServedDtype

# aten op names (the packet, without the overload) by what the emulation does with them.
MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "convolution", "_convolution"})
ATTENTION_OPS = frozenset({"_scaled_dot_product_flash_attention_for_cpu"})
REDUCTION_OPS = frozenset(
    {
        "_softmax",
        "_log_softmax",
        "native_layer_norm",
        "native_group_norm",
        "native_batch_norm",
        "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit",
        "sum",
        "mean",
        "var",
        "std",
        "var_mean",
        "std_mean",
        "logsumexp",
        "cumsum",
        "linalg_vector_norm",
        "norm",
        "_fused_rms_norm",
    }
)
# Data movement: rounding their input would change nothing or break aliasing.
_NO_ROUND = frozenset({"_to_copy", "copy_", "clone", "detach", "lift_fresh", "alias", "empty_like", "zeros_like", "ones_like", "full_like"})

_TF32_DROP = 13  # fp32 has 23 mantissa bits, tf32 keeps 10


def torch_dtype(name: str) -> Any:
    """The torch dtype of a LowType or ServedDtype value (tf32 has none: it is fp32 storage)."""
    import torch

    return {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "fp8_e4m3": torch.float8_e4m3fn,
    }[name]


def round_to(t: Any, low: str) -> Any:
    """``t`` with its values rounded to the type ``low`` (nearest even), in ``t``'s own dtype."""
    import torch

    if low == str(LowType.TF32):
        if t.dtype != torch.float32:
            return t  # bf16 and fp16 values already fit in tf32's 10-bit mantissa and 8-bit exponent
        bits = t.contiguous().view(torch.int32)
        lsb = (bits >> _TF32_DROP) & 1
        rounded = ((bits + (1 << (_TF32_DROP - 1)) - 1 + lsb) & ~((1 << _TF32_DROP) - 1)).view(torch.float32)
        return torch.where(torch.isfinite(t), rounded, t).view(t.shape)
    low_dtype = torch_dtype(low)
    if t.dtype == low_dtype:
        return t
    return t.to(low_dtype).to(t.dtype)


def _is_float(t: Any) -> bool:
    """A dense low-precision candidate. A sparse (or other non-strided) tensor has no storage to round and
    cannot reach the device at all (the analysis reports it at the line that registers it): it stays as it is."""
    import torch

    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64 and t.layout == torch.strided


class _Plan:
    """What to do per op kind for one precision."""

    def __init__(self, precision: Precision) -> None:
        p = precision
        self.matmul_type: str | None = str(p.auto_cast_type) if p.auto_cast is not AutoCast.NONE else None
        self.all_type: str | None = str(p.auto_cast_type) if p.auto_cast is AutoCast.ALL else None
        served = None if p.dtype is ServedDtype.FP32 else str(p.dtype)
        # The type reductions see their inputs in: auto-cast all wins over the served dtype (it is the narrower
        # choice the user asked the compiler for); fp32 models without `all` have no low-type reductions.
        self.reduce_type: str | None = self.all_type or served
        self.mpa = p.mixed_precision_accumulation


class WeightCasts:
    """The model's weight storages cast to a narrower torch dtype, each once for a whole parity run.

    Casting GPT-2's 124M fp32 weights to bf16 costs about as much as a forward (it reads every
    weight, as the forward does). ``matmult`` with bf16 rounds every weight through bf16 and the
    bf16-served precision casts every weight to bf16: with one WeightCasts both use the same cast.
    Keyed by storage, source dtype and version counter (an in-place update is a new weight).
    """

    def __init__(self) -> None:
        self._cast: dict[tuple[int, Any, int, Any], Any] = {}

    def flat(self, t: Any, dtype: Any) -> Any:
        """``t``'s whole storage, as a flat tensor of ``t``'s dtype, cast to ``dtype``."""
        import torch

        storage = t.untyped_storage()
        key = (storage.data_ptr(), t.dtype, t._version, dtype)
        out = self._cast.get(key)
        if out is None:
            out = self._cast[key] = torch.empty(0, dtype=t.dtype).set_(storage).to(dtype)
        return out

    def whole(self, t: Any, dtype: Any) -> Any:
        """``t`` cast to ``dtype``: from the shared storage cast when ``t`` is its storage's only tensor, else a plain cast."""
        if t.storage_offset() == 0 and t.is_contiguous() and t.numel() * t.element_size() == t.untyped_storage().nbytes():
            return self.flat(t, dtype).view(t.shape)
        return t.detach().to(dtype)


class _Scratch:
    """Reused room for the weights one matmul reads widened back from their low-type cast.

    A widened weight lives for one op: widening each into newly allocated memory made the process
    map and fault in fresh pages for every weight of every forward (GPT-2: about 0.5 GB a forward,
    which cost more than the conversion itself). The room grows to the largest op's weights and is
    reused; each view starts on a 64-byte boundary, as torch's allocator aligns a new tensor, and has
    the strides ``Tensor.to`` would give it, so the matmul reads the same values in the same layout.
    """

    _ALIGN = 64  # bytes

    def __init__(self) -> None:
        self._room: Any = None
        self._used = 0  # bytes handed out since the last reset

    def reset(self) -> None:
        self._used = 0

    def widened(self, narrow: Any, dtype: Any) -> Any:
        """``narrow.to(dtype)``, written into the room."""
        import torch

        layout = torch.empty_like(narrow, dtype=dtype, device="meta")  # the strides .to() gives (preserve_format)
        span = 1 + sum((n - 1) * s for n, s in zip(layout.shape, layout.stride(), strict=True)) if layout.numel() else 0
        size = span * layout.element_size()
        start = -(-self._used // self._ALIGN) * self._ALIGN
        if self._room is None or start + size > self._room.numel():
            # a bigger room; the views of this op handed out so far keep the old one alive until the op is done
            self._room = torch.empty(start + size, dtype=torch.uint8)
        self._used = start + size
        out = self._room[start : start + size].view(dtype).as_strided(layout.shape, layout.stride())
        return out.copy_(narrow)


class Emulator:
    """The dispatch-mode logic; see :func:`emulated`. ``observer`` sees (op name, fp32 recompute, emulated output)."""

    def __init__(self, precision: Precision, parameters: list[Any], casts: WeightCasts | None = None) -> None:
        self.precision = precision
        self.plan = _Plan(precision)
        self._param_storages = {p.untyped_storage().data_ptr() for p in parameters if _is_float(p)}
        self._cache: dict[tuple[Any, ...], Any] = {}  # rounded weight storages (a tied weight once), per dtype and low type
        self._casts = casts if casts is not None else WeightCasts()
        self.observer: Callable[[str, Any, Any], None] | None = None
        self._paused = 0  # > 0 while neuronprobe's own measuring code runs inside the forward (see paused())
        self._scratch = _Scratch()  # the widened weights of the matmul being emulated

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Ops run exactly as torch runs them inside: the comparison's statistics, computed in a module hook
        during the emulated forward, are measurements, not part of the model (a norm of the error would
        otherwise be rounded like the model's own reductions). They skip the dispatch mode altogether (the
        kernels the mode's pass-through would call, without a Python round trip per op)."""
        from neuronprobe._torch.dispatch_mode import modes_skipped

        self._paused += 1
        try:
            with modes_skipped():
                yield
        finally:
            self._paused -= 1

    def release(self) -> None:
        """Let go of the scratch room (the largest op's widened weights) once the forward is done."""
        self._scratch = _Scratch()

    # -- rounding -----------------------------------------------------------------------------
    def _rounded(self, t: Any, low: str, scratch: bool = False) -> Any:
        """``t`` rounded to ``low``. ``scratch``: a weight's widened view may be written into the emulator's
        scratch room (only for an op whose result never aliases its inputs, and only until the next such op)."""
        if not _is_float(t):
            return t
        storage = t.untyped_storage()
        if storage.data_ptr() in self._param_storages:  # a weight
            import torch

            low_dtype = None if low == str(LowType.TF32) else torch_dtype(low)
            if low_dtype is not None and low_dtype != t.dtype:
                # Its storage cast once for the whole parity run (shared with the other precisions and inputs);
                # the view this op reads is widened back on the spot, so no fp32 copy of every weight is kept.
                narrow = self._casts.flat(t, low_dtype).as_strided(t.shape, t.stride(), t.storage_offset())
                return self._scratch.widened(narrow, t.dtype) if scratch else narrow.to(t.dtype)
            key = (storage.data_ptr(), t.dtype, t._version, low)  # views share the version counter of their base
            flat = self._cache.get(key)
            if flat is None:  # tf32, or a weight already in the low type: rounded in its own dtype, once
                flat = self._cache[key] = round_to(torch.empty(0, dtype=t.dtype).set_(storage), low)
            return flat.as_strided(t.shape, t.stride(), t.storage_offset())
        return round_to(t, low)

    def _map(self, value: Any, fn: Callable[[Any], Any]) -> Any:
        if isinstance(value, (list, tuple)):
            return type(value)(self._map(v, fn) for v in value)
        return fn(value) if _is_float(value) else value

    # -- dispatch -----------------------------------------------------------------------------
    def dispatch(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._paused:
            return func(*args, **kwargs)
        name = func._schema.name.split("::", 1)[-1]
        plan = self.plan
        if name in MATMUL_OPS and plan.matmul_type:
            out = self._matmul(func, args, kwargs, plan.matmul_type)
        elif name in ATTENTION_OPS and (plan.matmul_type or plan.reduce_type):
            # torch's fused CPU kernel keeps the scores and probabilities in fp32 even in bf16; an XLA lowering
            # (measured with torch-xla 2.9 on GPT-2, README "Numerical parity") rounds them between the two matmuls
            out = self._attention(args, kwargs)
        elif name in REDUCTION_OPS and plan.reduce_type and bool(args) and _is_float(args[0]):
            out = self._reduction(name, func, args, kwargs, plan.reduce_type)
        elif plan.all_type and name not in _NO_ROUND and not func.is_view:
            out = self._all(func, args, kwargs, plan.all_type)
        else:
            out = func(*args, **kwargs)
            if self.observer is None or func.is_view or name in _NO_ROUND:
                return out
        if self.observer is not None:  # set only inside the module call being attributed (drift.dominant_op)
            self._observe(name, func, args, kwargs, out)
        return out

    def _observe(self, name: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        """The same op in fp32 on the same inputs, for naming the op that dominates a module's error."""
        import torch

        if func._schema.is_mutable:
            return
        up = self._map(args, lambda t: t.float())
        upk = {k: self._map(v, lambda t: t.float()) for k, v in kwargs.items()}
        try:
            exact = func(*up, **upk)
        except Exception:  # an op whose fp32 form does not exist (a dtype-specific kernel): nothing to compare
            return
        first = _first_tensor(out)
        ref = _first_tensor(exact)
        if isinstance(first, torch.Tensor) and isinstance(ref, torch.Tensor) and first.shape == ref.shape:
            assert self.observer is not None
            self.observer(name, ref, first)

    def _matmul(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], low: str) -> Any:
        import torch

        out_dtype = next((a.dtype for a in args if _is_float(a)), torch.float32)
        self._scratch.reset()  # the previous matmul's widened weights are spent (its result is a new tensor)
        rargs = self._map(args, lambda t: self._rounded(t, low, scratch=True).float())
        rkwargs = {k: self._map(v, lambda t: self._rounded(t, low, scratch=True).float()) for k, v in kwargs.items()}
        out = func(*rargs, **rkwargs)
        return out.to(out_dtype) if out_dtype != torch.float32 else out

    def _all(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], low: str) -> Any:
        if func._schema.is_mutable:
            out = func(*args, **kwargs)
            if args and _is_float(args[0]):
                args[0].copy_(round_to(args[0], low))
            return out
        rargs = self._map(args, lambda t: self._rounded(t, low))
        rkwargs = {k: self._map(v, lambda t: self._rounded(t, low)) for k, v in kwargs.items()}
        return func(*rargs, **rkwargs)

    # -- reductions -----------------------------------------------------------------------------
    def _reduction(self, name: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], low: str) -> Any:
        import torch

        src_dtype = args[0].dtype
        ins = self._map(args, lambda t: self._rounded(t, low).float())
        ins_k = {k: self._map(v, lambda t: self._rounded(t, low).float()) for k, v in kwargs.items()}
        if not self.plan.mpa:
            low_result = _low_reduction(name, ins, ins_k, low)
            if low_result is not None:
                return _back(low_result, src_dtype, low)
        if kwargs.get("dtype") is not None:
            ins_k["dtype"] = torch.float32
        out = func(*ins, **ins_k)
        return _back(out, src_dtype, low)

    def _attention(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Scaled dot-product attention as two emulated matmuls around an emulated softmax."""
        import math

        import torch

        q, k, v = args[:3]
        dropout = args[3] if len(args) > 3 else kwargs.get("dropout_p", 0.0)
        causal = args[4] if len(args) > 4 else kwargs.get("is_causal", False)
        mask = kwargs.get("attn_mask")
        scale = kwargs.get("scale")
        if dropout:
            raise NotImplementedError("attention dropout under parity emulation: put the model in eval mode")
        dtype = q.dtype
        scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
        mm_low = self.plan.matmul_type
        red_low = self.plan.reduce_type

        def operand(t: Any) -> Any:
            return (self._rounded(t, mm_low) if mm_low else t).float()

        if k.shape[-3] != q.shape[-3]:  # grouped-query attention: repeat the key/value heads
            rep = q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
        scores = torch.matmul(operand(q), operand(k).transpose(-2, -1)) * scale
        if dtype != torch.float32 or red_low:
            scores = round_to(scores.to(dtype), red_low or _name(dtype)).float()
        if causal:
            keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()  # torch's is_causal: top-left aligned
            scores = scores.masked_fill(~keep, float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask.float()
        lse = torch.logsumexp(scores, dim=-1)
        if red_low and not self.plan.mpa:
            probs = _low_softmax(scores, -1, red_low)
        else:
            probs = torch.softmax(scores, dim=-1)
            if red_low:
                probs = round_to(probs, red_low)
        out = torch.matmul(operand(probs.to(dtype)), operand(v))
        return out.to(dtype), lse


def _name(dtype: Any) -> str:
    import torch

    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32")


def _first_tensor(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for v in value:
            found = _first_tensor(v)
            if found is not None:
                return found
    return None


def _back(out: Any, src_dtype: Any, low: str) -> Any:
    """A reduction's fp32 result rounded to the low type and returned in the caller's dtype."""
    import torch

    def one(t: Any) -> Any:
        if not _is_float(t):
            return t
        r = round_to(t, low)
        return r.to(src_dtype) if src_dtype != torch.float32 else r

    if isinstance(out, tuple):
        return tuple(one(t) for t in out)
    return one(out)


def low_sum(x: Any, dim: int, low: str, keepdim: bool = False) -> Any:
    """``x.sum(dim)`` with every partial sum rounded to ``low``: a pairwise tree, as a low-precision accumulator adds."""
    import torch

    x = x.movedim(dim, -1)
    n = x.shape[-1]
    width = 1 << max(0, (n - 1).bit_length())
    if width != n:
        x = torch.nn.functional.pad(x, (0, width - n))
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = round_to(x[..., :half] + x[..., half:], low)
    out = x[..., 0]
    return out.unsqueeze(dim if dim >= 0 else out.dim() + 1 + dim) if keepdim else out


def _low_softmax(x: Any, dim: int, low: str) -> Any:
    shifted = round_to(x - x.amax(dim=dim, keepdim=True), low)
    e = round_to(shifted.exp(), low)
    return round_to(e / low_sum(e, dim, low, keepdim=True), low)


def _low_reduction(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], low: str) -> Any:
    """The reduction with its intermediates kept in ``low`` (mixed-precision accumulation off), or None when
    this emulation has no decomposition for it (the caller then rounds the fp32 result)."""
    import torch

    x = args[0]
    if name == "_softmax":
        return _low_softmax(x, args[1], low)
    if name == "_log_softmax":
        dim = args[1]
        shifted = round_to(x - x.amax(dim=dim, keepdim=True), low)
        total = low_sum(round_to(shifted.exp(), low), dim, low, keepdim=True)
        return round_to(shifted - round_to(total.log(), low), low)
    if name == "native_layer_norm":
        shape, weight, bias, eps = args[1], args[2], args[3], args[4]
        dims = list(range(x.dim() - len(shape), x.dim()))
        flat = x.flatten(dims[0]) if len(dims) > 1 else x
        n = flat.shape[-1]
        mean = round_to(low_sum(flat, -1, low, keepdim=True) / n, low)
        centred = round_to(flat - mean, low)
        var = round_to(low_sum(round_to(centred * centred, low), -1, low, keepdim=True) / n, low)
        rstd = round_to(torch.rsqrt(round_to(var + eps, low)), low)
        out = round_to(centred * rstd, low).view(x.shape)
        if weight is not None:
            out = round_to(out * weight, low)
        if bias is not None:
            out = round_to(out + bias, low)
        stat_shape = list(x.shape[: dims[0]]) + [1] * len(dims)
        return out, mean.view(stat_shape), rstd.view(stat_shape)
    if name in ("sum", "mean") and len(args) >= 2 and args[1] is not None and len(args[1]) == 1 and not kwargs.get("dtype"):
        dim = args[1][0]
        keepdim = bool(args[2]) if len(args) > 2 else bool(kwargs.get("keepdim", False))
        total = low_sum(x, dim, low, keepdim=keepdim)
        return round_to(total / x.shape[dim], low) if name == "mean" else total
    return None


def _cast_value(value: Any, dtype: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_value(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_value(v, dtype) for k, v in value.items()}
    return value


def served_inputs(args: tuple[Any, ...], kwargs: dict[str, Any], precision: Precision) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The inputs as served in ``precision.dtype``: floating-point tensors cast, integers (token ids) as they are."""
    if precision.dtype is ServedDtype.FP32:
        return args, kwargs
    dtype = torch_dtype(str(precision.dtype))
    return _cast_value(args, dtype), _cast_value(kwargs, dtype)


def served_state(module: Any, precision: Precision, casts: WeightCasts | None = None) -> dict[str, Any] | None:
    """The module's parameters and buffers as served in ``precision.dtype`` (floating-point ones cast), for
    ``torch.func.functional_call``; None when served in fp32. Half the fp32 weights' memory, and no copy of the module.
    ``casts``: the parity run's shared casts (a precision that rounded the weights to this dtype already cast them)."""
    if precision.dtype is ServedDtype.FP32:
        return None
    dtype = torch_dtype(str(precision.dtype))
    casts = casts if casts is not None else WeightCasts()
    tensors = {**dict(module.named_parameters(remove_duplicate=False)), **dict(module.named_buffers(remove_duplicate=False))}
    cast: dict[int, Any] = {}  # a tied weight is cast once and stays tied
    out = {}
    for name, t in tensors.items():
        if id(t) not in cast:
            cast[id(t)] = casts.whole(t.detach(), dtype) if t.is_floating_point() else t
        out[name] = cast[id(t)]
    return out


def served(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], precision: Precision) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The model and inputs as served in ``precision.dtype``: a cast copy (the fp32 model is left as it is)."""
    if precision.dtype is ServedDtype.FP32:
        return module, args, kwargs
    copy_ = copy.deepcopy(module).to(torch_dtype(str(precision.dtype)))
    return (copy_, *served_inputs(args, kwargs, precision))


@contextlib.contextmanager
def emulated(precision: Precision, module: Any, state: dict[str, Any] | None = None, casts: WeightCasts | None = None) -> Iterator[Emulator]:
    """Run the forward inside under ``precision`` (the module cast as served, :func:`served`, or run with
    ``state``, :func:`served_state`, whose tensors are then the weights the emulation knows).

    Yields the :class:`Emulator`, whose ``observer`` may be set to see each emulated op. Nothing is
    changed for an fp32 precision with no auto-cast: the mode is not even entered.
    """
    import torch

    from neuronprobe._torch.dispatch_mode import dispatch_mode_base

    emulator = Emulator(precision, list(module.parameters()) + (list(state.values()) if state else []), casts)
    if precision.is_fp32:  # nothing to emulate: fp32 ops are the reference's own
        with torch.no_grad():
            yield emulator
        return
    base = dispatch_mode_base()

    class Mode(base):  # type: ignore[valid-type,misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
            return emulator.dispatch(func, args, kwargs or {})

    try:
        with torch.no_grad(), Mode():
            yield emulator
    finally:
        emulator.release()


# The report's legend (ParitySection.emulated / not_emulated): the docstring above, in short.
EMULATED = [
    "auto-cast matmult/all: matmul, conv and attention inputs rounded to the auto-cast type (nearest even), fp32 accumulation",
    "auto-cast all: every other op's floating-point inputs rounded to the auto-cast type",
    "--dtype bf16/fp16: weights, buffers and inputs cast as served; ops run in that dtype",
    "mixed-precision accumulation on: softmax, norms and reductions in fp32 from the low type, rounded back",
    "mixed-precision accumulation off: softmax, log_softmax, layer_norm, sum and mean with every intermediate in the low type",
]
NOT_EMULATED = [
    "the compiler's fusion and op order (which intermediates a fused kernel keeps in fp32)",
    "the reduction order inside a matmul (fp32 accumulation here is torch's order)",
    "stochastic rounding (NEURON_RT_STOCHASTIC_ROUNDING_EN; the default, nearest even, is emulated)",
    "fp8 scaling recipes (fp8_e4m3 is a plain saturating cast) and the hardware's exp/gelu/rsqrt approximations",
]
