"""Let torchvision import beside a CPU-only torch when its compiled ops cannot load.

PyPI's Linux torchvision wheels are CUDA builds: their ``_C`` extension needs
``libc10_cuda.so``, which a CPU torch lacks, and torchvision 0.28's
``_meta_registrations`` then fails at import (it registers fake kernels for
ops that were never defined), taking every ``import transformers.models...``
that touches torchvision down with it.

neuronprobe only traces models (meta and fake tensors): it needs the *schemas*
of torchvision's ops (``torchvision::nms``, ``torchvision::roi_align``, ...) and
their fake kernels, which torchvision registers itself, not their CPU kernels.
So when ``_C`` does not load, the schemas are defined here and torchvision is
told its ops exist. Where ``_C`` loads (a matching wheel), nothing changes.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterator
from typing import Any

# The schemas torchvision 0.28's _C registers (read from its TORCH_LIBRARY block).
SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, int sampling_ratio, bool aligned) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, float rois_scale, int rois_zero_point, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "_cuda_version() -> int",
)
_libraries: list[Any] = []  # keep the definitions alive for the process


def define_schemas() -> None:
    """Define torchvision's op schemas (no kernels) unless they exist already."""
    import torch

    if _libraries or hasattr(torch.ops.torchvision, "nms"):
        return
    lib = torch.library.Library("torchvision", "DEF")
    for schema in SCHEMAS:
        lib.define(schema)
    lib.impl("_cuda_version", _no_cuda, "CompositeExplicitAutograd")  # torchvision asks at import
    _libraries.append(lib)


def _no_cuda() -> int:
    return -1


class _ExtensionLoader(importlib.abc.Loader):
    def __init__(self, original: Any) -> None:
        self.original = original

    def create_module(self, spec: Any) -> Any:
        return self.original.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.original.exec_module(module)
        if not module._has_ops():
            define_schemas()
            module._has_ops = lambda: True  # the schemas and fake kernels are there: tracing works


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torchvision.extension":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _ExtensionLoader(spec.loader)
        return spec


def install() -> _Finder | None:
    """Watch for torchvision's import (cheap: nothing is imported now); the finder put in place, if any."""
    if any(isinstance(f, _Finder) for f in sys.meta_path) or "torchvision" in sys.modules:
        return None
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    return finder


@contextlib.contextmanager
def hooked() -> Iterator[None]:
    """The import hook, only while a model is built (a model file, an ``hf:`` or ``tv:``/``timm:`` model).

    Neither ``import neuronprobe`` nor the pytest plugin installs it: an unrelated
    program (a pytest session of another project in the same environment) imports
    torchvision as it would without neuronprobe. A torchvision imported while the
    hook was in place stays usable afterwards: its ops were defined then.
    """
    finder = install()
    try:
        yield
    finally:
        if finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(finder)
