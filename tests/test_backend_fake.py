"""The fake Neuron SDK mimics the documented surface (../shared/research/neuron_api.md).

The fake runs in a forked child (neuronprobe's own isolation), because its
torch_xla records every op of the process it is imported into.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from conftest import FAKE_PLACEHOLDER
from helpers import MODELS

from neuronprobe.process.isolation import run_isolated

DOCUMENTED_KEYS = {"torch_neuronx_version", "neuronx_cc_version", "support_percentage", "supported_operators", "unsupported_operators"}


def _in_child(fn, tmp_path: Path, *args):
    result = run_isolated(fn, (str(tmp_path), *args), limit_s=120, workdir=tmp_path / "work", name="fake")
    assert result.ok, f"{result.error}\n{result.traceback}\n{result.log}"
    return result.value, result.log


def _mlp():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_check_mlp", MODELS / "mlp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_model(), module.get_example_inputs()


def check_trace(tmp: str, progress) -> dict:
    import torch
    import torch_neuronx

    model, inputs = _mlp()
    out: dict = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch_neuronx.trace(model, inputs, {}, compiler_workdir=f"{tmp}/trace", bogus=1)
    out["warnings"] = sorted(type(w.message).__name__ + ": " + str(w.message)[:60] for w in caught)
    try:
        torch_neuronx.trace(model, inputs, 1, 2, 3, 4, 5, 6)
    except RuntimeError as exc:
        out["too_many"] = str(exc)
    out["files"] = sorted(str(p.relative_to(f"{tmp}/trace")) for p in Path(f"{tmp}/trace").rglob("*") if p.is_file())
    out["same_shape"] = list(traced(torch.randn(2, 16)).shape)
    try:
        traced(torch.randn(3, 16))
    except RuntimeError as exc:
        out["other_shape"] = str(exc)
    assert torch_neuronx.dynamic_batch(traced) is traced
    out["dynamic_batch"] = list(traced(torch.randn(7, 16)).shape)
    try:
        traced(torch.randn(7, 15))
    except ValueError as exc:
        out["other_dim"] = str(exc)
    config = torch_neuronx.PartitionerConfig()
    out["partitioner"] = dict(vars(config))
    return out


def test_trace_has_the_documented_signature_and_fixed_shapes(tmp_path):
    out, _ = _in_child(check_trace, tmp_path)
    assert any(w.startswith("DeprecationWarning: Received 3 positional arguments but expected 2") for w in out["warnings"])
    assert "UserWarning: Unexpected keyword arguments: ['bogus']" in out["warnings"]
    assert out["too_many"] == "Received 8 positional arguments but expected 2"
    assert {"model/graph.hlo", "model/metadata.json", "command.txt", "graph.neff"} <= set(out["files"])
    assert out["same_shape"] == [2, 4]
    assert "failed in the TorchScript interpreter" in out["other_shape"] and "[fake torch_neuronx]" in out["other_shape"]
    assert out["dynamic_batch"] == [7, 4]
    assert "only varies dim 0" in out["other_dim"]
    assert out["partitioner"] == {
        "trace_kwargs": None,
        "model_support_percentage_threshold": 0.5,
        "min_subgraph_size": -1,
        "max_subgraph_count": -1,
        "ops_to_partition": None,
        "analyze_parameters": None,
    }


def check_analyze_and_failure(tmp: str, progress) -> dict:
    import torch_neuronx

    model, inputs = _mlp()
    report = torch_neuronx.analyze(model, inputs, compiler_workdir=f"{tmp}/analyze")
    try:
        torch_neuronx.trace(model, inputs, compiler_workdir=f"{tmp}/trace")
        failure = None
    except RuntimeError as exc:
        failure = str(exc)
    return {"report": report, "failure": failure}


def test_analyze_returns_the_documented_dict_and_trace_fails_like_neuronx_cc(tmp_path, monkeypatch):
    fixture = tmp_path / "fixture.json"
    fixture.write_text(
        json.dumps(
            {
                "analyze_unsupported": {"aten::gelu": "neuronx-cc", "aten::layer_norm": "Lowering to HLO"},
                "compile_errors": {"aten::gelu": {"code": "NCC_EVRF001", "message": "Operation gelu is not supported on trn1."}},
            }
        )
    )
    monkeypatch.setenv("FAKE_NEURON_FIXTURE", str(fixture))
    out, log = _in_child(check_analyze_and_failure, tmp_path)
    report = out["report"]
    assert set(report) == DOCUMENTED_KEYS
    assert re.fullmatch(r"\d+\.\d\d%", report["support_percentage"]) and report["support_percentage"] == "60.00%"
    assert report["supported_operators"] == {"aten::linear": 2, "aten::softmax": 1}
    entries = report["unsupported_operators"]
    assert [(e["kind"], e["failureAt"]) for e in entries] == [("aten::gelu", "neuronx-cc"), ("aten::layer_norm", "Lowering to HLO")]
    assert all(set(e) == {"kind", "failureAt", "call", "opGraph"} for e in entries)
    assert "mlp.py(" in entries[0]["call"] and entries[0]["opGraph"].startswith("graph(")
    assert out["failure"] == "neuronx-cc failed with 1"
    assert "[NCC_EVRF001] Operation gelu is not supported on trn1." in log


def check_lazy_cache(tmp: str, progress) -> dict:
    import os

    import torch

    os.environ["NEURON_COMPILE_CACHE_URL"] = f"{tmp}/cache"
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    model, _ = _mlp()
    device = xm.xla_device()
    model = model.to(device)
    for batch in (2, 2, 4):
        model(torch.randn(batch, 16).to(device))
        xm.mark_step()
    cache = Path(f"{tmp}/cache")
    return {
        "entries": sorted(sorted(p.name for p in d.iterdir()) for d in cache.glob("neuronxcc-*/MODULE_*")),
        "names": sorted(d.name for d in cache.glob("neuronxcc-*/MODULE_*")),
        "uncached": met.counter_value("UncachedCompile"),
        "cached": met.counter_value("CachedCompile"),
        "compile_time": met.metric_data("CompileTime")[:2],
        "fallbacks": met.executed_fallback_ops(),
        "gelu": met.counter_value("aten::gelu"),
    }


def test_lazy_graphs_fill_the_neuron_cache_and_the_metrics(tmp_path, monkeypatch):
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"fallback_ops": ["aten::gelu"]}))
    monkeypatch.setenv("FAKE_NEURON_FIXTURE", str(fixture))
    out, _ = _in_child(check_lazy_cache, tmp_path)
    assert len(out["names"]) == 2 and all(re.fullmatch(r"MODULE_[0-9a-f]{20}\+[0-9a-f]{8}", n) for n in out["names"])
    assert all({"model.neff", "model.done", "model.hlo_module.pb", "compile_flags.json"} <= set(e) for e in out["entries"])
    assert (out["uncached"], out["cached"]) == (2, 1)
    assert out["compile_time"][0] == 2  # TotalSamples; the values are nanoseconds
    assert out["fallbacks"] == ["aten::gelu"] and out["gelu"] == 3


def test_the_placeholder_raises_wrong_package_on_import(tmp_path):
    def check(tmp: str, progress) -> str:
        import sys

        sys.path.insert(0, str(FAKE_PLACEHOLDER))
        sys.modules.pop("torch_neuronx", None)
        try:
            import torch_neuronx  # noqa: F401
        except ImportError as exc:
            return str(exc)
        return "imported"

    out, _ = _in_child(check, tmp_path)
    assert out == "WRONG PACKAGE. Please install the package from Neuron Repository - pip.repos.neuron.amazonaws.com"


@pytest.fixture(autouse=True)
def _fake_on_path(fake_sdk):
    """Every check here runs against the fake XLA-era stack."""
