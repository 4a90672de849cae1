"""Every input a forward needs, from the config and the signature, then the family recipes."""

from __future__ import annotations

import inspect
from typing import Any

from neuronprobe.loaders.hf.build import entry_params
from neuronprobe.loaders.hf.config import IMAGE_TOKEN_FIELDS
from neuronprobe.loaders.hf.inputs.families import RecipeContext, family_inputs
from neuronprobe.loaders.hf.inputs.primitives import (
    InputPlan,
    first_field,
    has_conv_stem,
    input_by_name,
    main_input_of,
    make_audio_features,
    make_audio_values,
    make_patch_sequence,
    make_pixels,
    reshaped_value,
    text_ids,
    tokens_before,
    vision_tower_inputs,
)


def make_inputs(inner: Any, config: Any, batch: int, seq: int, device: str, plan: InputPlan | None = None) -> dict[str, Any]:
    """Every input the forward needs, from the config alone: its main input, then each required one by name."""
    import torch

    plan = plan or InputPlan()
    params = entry_params(inner)
    main = main_input_of(inner, params)
    inputs: dict[str, Any] = {}
    if main == "pixel_values":
        inputs["pixel_values"] = make_pixels(getattr(config, "vision_config", None) or config, batch, device)
    elif main == "input_values":
        inputs["input_values"] = make_audio_values(config, batch, device)
    elif main == "input_features":
        inputs["input_features"] = make_audio_features(config, batch, device, plan)
    elif main in ("hidden_states", "inputs_embeds") and main in params and ("grid_thw" in params or "image_grid_thw" in params):
        grid_name = "grid_thw" if "grid_thw" in params else "image_grid_thw"
        patches, _ = vision_tower_inputs(config, config, {"image_grid_thw": None}, batch, device, plan)
        inputs[main] = patches["pixel_values"]
        inputs[grid_name] = patches["image_grid_thw"]
    elif main == "hidden_states" and main in params and getattr(inner, "main_input_name", None) == "pixel_values" and has_conv_stem(inner):
        inputs[main] = make_pixels(config, batch, device)  # a conv backbone that names its images hidden_states (florence_vision)
    elif main in ("hidden_states", "inputs_embeds", "query_embeds") and main in params:
        inputs[main] = input_by_name(main, config, batch, seq, device, inputs)
    elif main in params and main != "input_ids" and (made := input_by_name(main, config, batch, seq, device, inputs)) is not None:
        inputs[main] = made  # a main input known by name (past_values, pixel_values_videos, latents)
    else:
        ids = text_ids(config, batch, seq, device)
        vision = getattr(config, "vision_config", None)
        image_token = first_field([config, getattr(config, "text_config", None)] if hasattr(config, "text_config") else [config], IMAGE_TOKEN_FIELDS)
        if vision is not None and isinstance(image_token, int) and "pixel_values" in params:
            pixel_inputs, count = vision_tower_inputs(config, vision, params, batch, device, plan)
            inputs.update(pixel_inputs)
            ids = tokens_before(ids, image_token, count)
        elif vision is not None and "pixel_values" in params:  # a dual encoder (CLIP-style): text and image side by side
            inputs["pixel_values"] = make_pixels(vision, batch, device)
        inputs[main if main in params else "input_ids"] = ids
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = text_ids(getattr(config, "decoder", None) or config, batch, seq, device)
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    # Inputs some forwards read without a None check: image sizes next to pixels, masks next to audio features.
    needed = [n for n in ("image_sizes", "input_features_mask") if n in params]
    if "encoder_hidden_states" in params and getattr(config, "encoder_hidden_size", None) and "pixel_values" not in inputs:
        needed.append("encoder_hidden_states")
    if "spatial_shapes" in params and "spatial_shapes" not in inputs and ("pixel_values" in inputs or "pixel_values" in required):
        inputs.update(make_patch_sequence(getattr(config, "vision_config", None) or config, batch, device))
    for name in inputs:
        if plan.shape(name) is not None:
            inputs[name] = reshaped_value(inputs[name], plan.shape(name), device)
    for name in (*required, *needed, *(n for n in plan.extra if n in params)):
        if name not in inputs:
            value = input_by_name(name, config, batch, seq, device, inputs)
            if value is not None:
                inputs[name] = value if plan.shape(name) is None else reshaped_value(value, plan.shape(name), device)

    inputs.update(family_inputs(RecipeContext(inner, config, params, batch, seq, device, inputs, plan)))
    for name in plan.floats:
        if isinstance(inputs.get(name), torch.Tensor):
            inputs[name] = inputs[name].float()
    for name in plan.dropped:  # an input the forward refuses (repair_refused_input)
        inputs.pop(name, None)
    return inputs
