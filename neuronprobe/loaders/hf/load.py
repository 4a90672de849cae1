"""An ``hf:`` model and its inputs as a LoadedModel."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from neuronprobe.loaders.hf.build import build_model, entry_point, forward_wrapper
from neuronprobe.loaders.hf.config import build_config, complete_config, fit_rotary, misspelled_note, pooled_image_size
from neuronprobe.loaders.hf.inputs.make import make_inputs
from neuronprobe.loaders.hf.inputs.primitives import InputPlan
from neuronprobe.loaders.hf.parent import MAX_CPU_RECORD_BYTES, NoParentInputs, recorder_for, weight_bytes
from neuronprobe.loaders.hf.shrink import ShrunkConfig, module_classes, shrink_keeping_kinds
from neuronprobe.loaders.model import LoadedModel

# --- the LoadedModel ---------------------------------------------------------------


def load(
    model_type: str,
    overrides: Iterable[str],
    seq_len: int,
    batch: int,
    device: str = "meta",
    shrink: bool = False,
    plan: InputPlan | None = None,
) -> Any:
    """Build ``model_type`` on ``device`` (``shrink``: a smaller config, for real CPU weights) with its inputs.

    Raises :class:`BuildError` when the constructor raises; the caller decides
    whether that is bad input or a reason to try another way.
    """
    import torch

    overrides = list(overrides)
    config = build_config(model_type, overrides)
    notes: list[str] = [note] if (note := misspelled_note(config)) else []
    plan = plan or InputPlan()
    user_sized = any(item.partition("=")[0].rsplit(".", 1)[-1] == "image_size" for item in overrides)
    if not user_sized and (pooled := pooled_image_size(config)):  # no input runs on such a config: every strategy gets the fix
        notes.append(f"the config's vision image size does not fit its connector; the capture used {', '.join(pooled)} (give yours with --set)")
    if plan.fill_unset and (filled := complete_config(config)):
        notes.append(f"the default config leaves fields the forward needs unset; the capture used {', '.join(filled)} (give yours with --set)")
    shrunk: ShrunkConfig | None = None
    if shrink:
        shrunk = shrink_keeping_kinds(config, narrow=not plan.from_parent)  # recorded inputs have the parent's widths
        config = shrunk.config
    if plan.rope_sections and (fitted := fit_rotary(config, plan.rope_sections[1:], plan.rope_sections[0])):  # the width seen: after any shrink
        notes.append(
            f"the default config's rotary width does not fill its rotary sections {list(plan.rope_sections[1:])}; the capture used {', '.join(fitted)} (give yours with --set)"
        )
    if plan.from_parent and device != "meta":  # full widths on the CPU: only for a component small enough
        sized = build_model(config, "meta")  # fills the config in place: what it filled is said below
        early_filled: tuple[str, ...] = sized.filled
        size = weight_bytes(sized.inner)
        if size > MAX_CPU_RECORD_BYTES:
            raise NoParentInputs(f"at its parent's widths the component is too large to run on the CPU ({size / 2**30:.1f} GiB of weights)")
    else:
        early_filled = ()
    built = build_model(config, device)
    lost: tuple[str, ...] = ()
    if shrunk is not None and shrunk.changes:
        lost = tuple(sorted(shrunk.full_classes - module_classes(built.inner))) if shrunk.checked else ()
        notes.append(shrink_note(shrunk, lost))
    if built.head_note:
        notes.append(built.head_note)
    if filled_now := [*early_filled, *(f for f in built.filled if f not in early_filled)]:
        notes.append(f"the default config lacks fields its constructor reads; the build used {', '.join(filled_now)} (give yours with --set)")
    if entry_point(built.inner) != "forward":
        notes.append(f"{type(built.inner).__name__} has no forward of its own; its {entry_point(built.inner)}() was analysed")
    inner = built.inner
    recorder = None
    if plan.from_parent:
        recorder = recorder_for(model_type, config, inner, device, batch, seq_len)
        notes.append(recorder.note)
    module = forward_wrapper(recorder.target if recorder is not None else inner, drop=plan.dropped)

    def inputs_for(batch_size: int, seq: int) -> dict[str, Any]:
        if recorder is not None:
            return recorder.inputs(batch_size, seq)
        with torch.no_grad():
            return make_inputs(inner, config, batch_size, seq, device, plan)

    return LoadedModel(
        name=f"hf_{model_type}",
        source=f"hf:{model_type}",
        module=module,
        kwargs=inputs_for(batch, seq_len),
        make_inputs=inputs_for,
        on_meta=device == "meta",
        overrides=overrides,
        input_plan=plan.to_json() if plan != InputPlan() else None,
        notes=notes,
        kinds_lost=(*lost, *(k for k in shrunk.missing_kinds if k not in lost)) if shrunk is not None else (),
    )


def shrink_note(shrunk: ShrunkConfig, lost: tuple[str, ...]) -> str:
    """The report's words for a shrunken config: what changed, and whether the op kinds still hold for the real
    model, which they do only when every layer kind and module class of the full-depth build is in the shrunken one."""
    head = f"shrunken config ({', '.join(shrunk.changes)})"
    if not shrunk.checked:
        return (
            f"{head}: shapes differ from the real model; the layers kept were chosen from the config's layer-kind fields only "
            "(the full-depth model did not build on the meta device to check them), so op kinds may differ too"
        )
    missing = [*lost, *(k for k in shrunk.missing_kinds if k not in lost)]
    if missing:
        return (
            f"{head}: shapes differ from the real model, and so do op kinds: the full-depth model's {', '.join(missing)} "
            "are not in the shrunken build, so their ops are not analysed (give more layers with --set)"
        )
    kept = f"; every layer kind of the full model is kept (its layers differ in {', '.join(shrunk.kinds)})" if shrunk.kinds else ""
    return f"{head}{kept}: shapes differ from the real model, op kinds and lines do not"
