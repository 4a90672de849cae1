"""``tv:<model>`` and ``timm:<model>``: vision models by name, randomly initialised, no weights downloaded.

Built on the meta device like ``hf:`` models; the capture strategies take over
when a forward needs more (detection models make CPU tensors for their anchors
and run ``torchvision::nms``, whose output size depends on the data).
"""

from __future__ import annotations

import difflib
from typing import Any

from neuronprobe.errors import InputError

IMAGE_SIZE = 224
INCEPTION_SIZE = 299
VIDEO_SHAPE = (3, 8, 112, 112)  # channels, frames, height, width for torchvision's video models
DETECTION_SIZE = 320
CLOSEST = 3


def _closest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=CLOSEST, cutoff=0.5)
    return f"; closest: {', '.join(close)}" if close else ""


def _import(package: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(package)  # under load_vision's torchvision_ops.hooked()
    except ImportError as exc:
        raise InputError(f"{package} is not installed: pip install 'neuronprobe[{extra}]'") from exc


def _torchvision_model(name: str, device: str = "meta") -> tuple[Any, str]:
    """The model and its family (classification, detection, segmentation, video, optical_flow)."""
    import torch

    tv = _import("torchvision", "vision")
    names = tv.models.list_models()
    if name not in names:
        raise InputError(f"tv:{name}: no such torchvision model{_closest(name, names)}")
    family = "classification"
    for candidate in ("detection", "segmentation", "video", "optical_flow", "quantization"):
        if name in tv.models.list_models(module=getattr(tv.models, candidate)):
            family = candidate
    kwargs: dict[str, Any] = {"weights": None}
    if family == "detection":
        kwargs["weights_backbone"] = None
        if not name.startswith("ssd"):  # SSD models resize to their own fixed size and refuse min_size
            kwargs["min_size"] = kwargs["max_size"] = DETECTION_SIZE  # the transform resizes to this
    with torch.device(device):
        return tv.models.get_model(name, **kwargs), family


def _torchvision_inputs(name: str, family: str, device: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import torch

    if family == "detection":
        return ([torch.randn(3, DETECTION_SIZE, DETECTION_SIZE, device=device)],), {}
    if family == "video":
        return (torch.randn(1, *VIDEO_SHAPE, device=device),), {}
    if family == "optical_flow":
        frame = torch.randn(1, 3, IMAGE_SIZE, IMAGE_SIZE, device=device)
        return (frame, frame.clone()), {}
    size = INCEPTION_SIZE if name.startswith("inception") else IMAGE_SIZE
    return (torch.randn(1, 3, size, size, device=device),), {}


def _timm_model(name: str, device: str = "meta") -> tuple[Any, tuple[int, ...]]:
    import torch

    timm = _import("timm", "vision")
    names = timm.list_models()
    if name not in names:
        raise InputError(f"timm:{name}: no such timm model{_closest(name, names)}")
    with torch.device(device):
        model = timm.create_model(name, pretrained=False)
    config = timm.data.resolve_data_config({}, model=model)
    return model, tuple(config.get("input_size", (3, IMAGE_SIZE, IMAGE_SIZE)))


def load_vision(spec: str, device: str = "meta") -> Any:
    """``tv:<name>`` or ``timm:<name>`` as a LoadedModel on the meta device (``device="cpu"``: real, randomly
    initialised weights, for parity), with the inputs it expects."""
    import torch

    from neuronprobe.loaders import torchvision_ops
    from neuronprobe.loaders.model import LoadedModel

    prefix, _, name = spec.partition(":")
    if not name:
        raise InputError(f"{spec}: give a model name, e.g. {prefix}:resnet18")
    with torchvision_ops.hooked():
        if prefix == "tv":
            model, family = _torchvision_model(name, device)
            args, kwargs = _torchvision_inputs(name, family, device)
        else:
            model, input_size = _timm_model(name, device)
            args, kwargs = (torch.randn(1, *input_size, device=device),), {}
    model.eval()
    return LoadedModel(name=f"{prefix}_{name}", source=spec, module=model, args=args, kwargs=kwargs, on_meta=device == "meta")
