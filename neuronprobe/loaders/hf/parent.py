"""Inputs recorded from a parent model's call of the component (a sub-config type)."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any

from neuronprobe.errors import error_line, root_error
from neuronprobe.loaders.fake_weights import fake_module, fake_value
from neuronprobe.loaders.hf.build import WRAPPER_KEYWORDS, build_model, fresh_inputs
from neuronprobe.loaders.hf.config import build_config, parents_of, shrink_config
from neuronprobe.loaders.hf.inputs.make import make_inputs
from neuronprobe.loaders.hf.inputs.primitives import InputPlan, inputs_info
from neuronprobe.loaders.hf.search import Step, learn_inputs, search

PARENT_INPUT_RETRIES = 4  # a parent's own inputs are rebuilt from its error as for any hf: model
MAX_CPU_RECORD_BYTES = 4 * 2**30  # a parent whose meta run fails is run for real only when its weights are this small
SMALL_INT_ELEMENTS = 64  # integer tensors this small carry values (grids, lengths): they stay on the CPU


class NoParentInputs(Exception):
    """No parent model could be run up to the component's call."""


class _Recorded(Exception):  # a control-flow signal, not an error
    """Raised by the pre-hook to stop the parent at the component's call."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__("recorded")
        self.args_ = args
        self.kwargs_ = kwargs


@functools.cache
def _hook_target(parent: Any, component: Any) -> tuple[Any, Any] | None:
    """(module in the parent to stop at, the same-class module in the component to analyse).

    The component model itself when the parent holds one of its class; else the
    first module inside it whose class the parent holds (``CLIPVisionModel``
    wraps the ``CLIPVisionTransformer`` that ``CLIPModel`` holds directly).
    """
    by_class: dict[type, Any] = {}
    for module in parent.modules():
        by_class.setdefault(type(module), module)
    for depth, module in _shallow_modules(component, max_depth=2):
        own_class = not type(module).__module__.startswith("torch.")  # not a Linear or ModuleList both happen to hold
        if type(module) in by_class and (depth == 0 or (own_class and len(list(module.modules())) > 1)):
            return by_class[type(module)], module
    return None


def _shallow_modules(root: Any, max_depth: int) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = [(0, root)]
    frontier = [root]
    for depth in range(1, max_depth + 1):
        frontier = [child for module in frontier for child in module.children()]
        out.extend((depth, m) for m in frontier)
    return out


def _as_kwargs(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = inspect.signature(target.forward).bind_partial(*args, **kwargs)
    out: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = inspect.signature(target.forward).parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL:
            out[name] = value
    return {k: v for k, v in out.items() if k not in WRAPPER_KEYWORDS}


def _materialise(value: Any, device: str) -> Any:
    """Recorded values for the component on ``device``.

    Meta tensors become random CPU tensors for a real-CPU capture; tensors the
    parent made on the CPU (grids, lengths) stay where they are; a recording made
    on the CPU turns into meta tensors for a meta capture, except small integer
    tensors, whose values the forward reads.
    """
    import torch

    from neuronprobe._torch.fake_tensor import is_fake

    if is_fake(value):  # recorded under fake tensors: its shape and dtype, as a meta tensor
        value = torch.empty(tuple(int(d) for d in value.shape), dtype=value.dtype, device="meta")
    if isinstance(value, torch.Tensor):
        if device == "meta":
            small_int = not value.is_floating_point() and value.numel() <= SMALL_INT_ELEMENTS
            return value if value.is_meta or small_int else value.to("meta")
        if not value.is_meta:
            return value
        if value.is_floating_point():
            return torch.randn(value.shape, dtype=value.dtype)
        if value.dtype is torch.bool:
            return torch.ones(value.shape, dtype=torch.bool)
        return torch.zeros(value.shape, dtype=value.dtype)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_materialise(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _materialise(v, device) for k, v in value.items()}
    return value


@dataclass
class ParentRecorder:
    """Records the component's inputs from one parent model; ``target`` is what the capture runs."""

    parent_type: str
    parent_inner: Any
    parent_config: Any
    stop_at: Any  # the module inside the parent
    target: Any  # the component model, or the module inside it of the same class as stop_at
    record_device: str
    device: str  # where the component's capture runs
    fake_mode: Any = None  # the parent's fake mode when record_device is "fake"
    _recorded: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)

    @property
    def note(self) -> str:
        what = type(self.target).__name__
        return f"inputs recorded from the parent model hf:{self.parent_type} at its call of {what} (the component's forward takes what the parent computes)"

    def inputs(self, batch: int, seq: int) -> dict[str, Any]:
        """The component's inputs when the parent runs on a batch of ``batch`` at length ``seq``."""
        if (batch, seq) not in self._recorded:
            self._recorded[(batch, seq)] = self._record(batch, seq)
        return self._recorded[(batch, seq)]

    def _record(self, batch: int, seq: int) -> dict[str, Any]:
        import torch

        make_on = "meta" if self.record_device == "fake" else self.record_device

        def stop(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            raise _Recorded(args, kwargs)

        def attempt(plan: InputPlan) -> Step[dict[str, Any]]:
            parent_inputs = make_inputs(self.parent_inner, self.parent_config, batch, seq, make_on, plan)
            if self.record_device == "fake":
                parent_inputs = dict(fake_value(self.fake_mode, parent_inputs))
            handle = self.stop_at.register_forward_pre_hook(stop, with_kwargs=True)
            try:
                with torch.no_grad():
                    self.parent_inner(**fresh_inputs(parent_inputs))
            except _Recorded as recorded:
                kwargs = _as_kwargs(self.target, recorded.args_, recorded.kwargs_)
                return Step(value=dict(_materialise(kwargs, self.device)))
            except Exception as exc:
                return Step(error=exc, info=inputs_info(self.parent_inner, parent_inputs, root_error(exc)))
            finally:
                handle.remove()
            return Step()  # the forward ran to its end without calling the component

        found = search(attempt, learn_inputs, retries=PARENT_INPUT_RETRIES)
        if found.value is not None:
            return found.value
        error = found.errors[-1] if found.errors else None
        reason = error_line(error) if error is not None else "its forward never called the component"
        raise NoParentInputs(f"hf:{self.parent_type} did not reach {type(self.stop_at).__name__} ({reason})")


def _parent_config(parent_type: str, attr: str, config: Any, narrow_others: bool) -> Any:
    """The parent's default config with the component's in place, every layer count capped.

    ``narrow_others``: the parent's other sub-configs are narrowed too (a real-CPU run
    holds their weights); the component's own widths stay, since its inputs are what is recorded.
    """

    parent_config, _ = shrink_config(build_config(parent_type, []), narrow=narrow_others)
    component, _ = shrink_config(config, narrow=False)
    setattr(parent_config, attr, component)
    return parent_config


def weight_bytes(module: Any) -> int:
    """The bytes of a module's weights (meta weights count at their dtype's size)."""
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _as_fake(module: Any) -> tuple[Any, Any]:
    """A meta-built parent with fake CPU weights, and their fake mode: CPU tensors its forward makes mix in, unbacked sizes flow."""
    from neuronprobe._torch.fake_tensor import fake_mode_with_shapes

    mode = fake_mode_with_shapes()
    return fake_module(module, mode), mode


def recorder_for(model_type: str, config: Any, component: Any, device: str, batch: int, seq: int) -> ParentRecorder:
    """A recorder from the first parent that builds, holds the component's class and runs up to its call.

    The parent is built on the meta device with the component's config in place of
    its own sub-config and its layers capped; when its forward cannot run there
    (a value read before the component), on the CPU with the same caps.
    """

    reasons: list[str] = []
    for parent_type, attr in parents_of(model_type, type(config)):
        for record_device in ("meta", "fake", "cpu"):
            fake_mode = None
            try:
                parent_config = _parent_config(parent_type, attr, config, narrow_others=record_device == "cpu")
                parent_inner = build_model(parent_config, "meta").inner
                if record_device == "cpu":
                    size = weight_bytes(parent_inner)
                    if size > MAX_CPU_RECORD_BYTES:
                        reasons.append(f"hf:{parent_type} is too large to run on the CPU for the recording ({size / 2**30:.1f} GiB of weights at its widths)")
                        break
                    parent_inner = build_model(parent_config, "cpu").inner
                elif record_device == "fake":
                    parent_inner, fake_mode = _as_fake(parent_inner)
            except Exception as exc:
                reasons.append(f"hf:{parent_type} does not build ({error_line(exc)})")
                break
            found = _hook_target(parent_inner, component)
            if found is None:
                reasons.append(f"hf:{parent_type} holds no {type(component).__name__}")
                break
            recorder = ParentRecorder(parent_type, parent_inner, parent_config, found[0], found[1], record_device, device, fake_mode)
            try:
                recorder.inputs(batch, seq)  # does this parent reach the component? (kept for the capture)
            except NoParentInputs as exc:
                reasons.append(str(exc))
                continue
            return recorder
    raise NoParentInputs("; ".join(reasons) or f"no model type nests {type(config).__name__}")
