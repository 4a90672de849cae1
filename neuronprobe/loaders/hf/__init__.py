"""``hf:<model_type>``: a transformers architecture built from its config alone, offline.

The package's modules import one way, each only from those before it:

* :mod:`.config`: the config, with ``--set`` overrides that reach nested sub-configs
  (``text_config.num_hidden_layers=1``), completed where the default leaves fields unset,
  and a *shrunken* copy for the real-CPU capture strategy;
* :mod:`.build`: the module, the head a user would deploy (causal LM, seq2seq LM), else the
  base model, a class found by its config class, or the module a parent model builds;
* :mod:`.inputs`: the example inputs every forward needs (text ids, pixels at the config's
  image size, audio features, image tokens and grids that agree with the pixels), the family
  recipes, and the repairs that read a forward's error;
* :mod:`.parent` and :mod:`.load`: inputs recorded from a parent model's call, and the
  LoadedModel the analyses take.

This module is the public face: what the rest of neuronprobe uses, re-exported.
"""

from __future__ import annotations

from neuronprobe.loaders.hf.build import WRAPPER_KEYWORDS, BuiltModel, StatefulInput, build_model, entry_point, forward_wrapper, fresh_inputs
from neuronprobe.loaders.hf.config import (
    AUDIO_SAMPLES,
    DEFAULT_IMAGE_SIZE,
    TEXT_ID_LIMIT,
    BuildError,
    build_config,
    complete_config,
    has_parent,
    may_need_unset_fields,
    parents_of,
    parse_override,
    shrink_config,
    sub_configs,
)
from neuronprobe.loaders.hf.inputs.make import make_inputs
from neuronprobe.loaders.hf.inputs.primitives import InputPlan, InputsInfo, inputs_info, text_ids, tokens_before
from neuronprobe.loaders.hf.inputs.repairs import REPAIRS, learn_from_error
from neuronprobe.loaders.hf.load import load
from neuronprobe.loaders.hf.parent import NoParentInputs

__all__ = [
    "AUDIO_SAMPLES",
    "DEFAULT_IMAGE_SIZE",
    "REPAIRS",
    "TEXT_ID_LIMIT",
    "WRAPPER_KEYWORDS",
    "BuildError",
    "BuiltModel",
    "InputPlan",
    "InputsInfo",
    "NoParentInputs",
    "StatefulInput",
    "build_config",
    "build_model",
    "complete_config",
    "entry_point",
    "forward_wrapper",
    "fresh_inputs",
    "has_parent",
    "inputs_info",
    "learn_from_error",
    "load",
    "make_inputs",
    "may_need_unset_fields",
    "parents_of",
    "parse_override",
    "shrink_config",
    "sub_configs",
    "text_ids",
    "tokens_before",
]
