"""A good guest (issue 15): ``neuronprobe.analyze`` in a notebook leaves the process as it found it.

The user's own compiled function keeps its dynamo cache (no recompile after an
analysis that compiled a model over a whole traffic), the user's torch log
settings, environment variables, dynamo statistics, transformers' log level and
stdout/stderr are as they were; and ``neuronprobe doctor`` self-checks every
private torch internal the tool relies on.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
import torch
import torch._dynamo
from conftest import leaks, torch_log_settings
from helpers import MODELS
from torch._dynamo.utils import counters
from torch._logging import _internal
from typer.testing import CliRunner

import neuronprobe
from neuronprobe._torch import dynamo_guards, self_checks
from neuronprobe._torch.check import MissingInternal
from neuronprobe.analysis import TrafficOptions
from neuronprobe.cli import app
from neuronprobe.loaders.resolve import load_model
from neuronprobe.recompiles import analyze_traffic

DATA = MODELS.parent / "data"


@pytest.fixture
def user_log_settings() -> Iterator[None]:
    """The user's ``TORCH_LOGS=recompiles`` (read by torch as it does at import); torch's settings are put back after."""
    saved = os.environ.get(_internal.LOG_ENV_VAR)
    levels, artifacts = dict(_internal.log_state.log_qname_to_level), set(_internal.log_state.artifact_names)
    os.environ[_internal.LOG_ENV_VAR] = "recompiles"
    _internal._init_logs()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(_internal.LOG_ENV_VAR, None)
        else:
            os.environ[_internal.LOG_ENV_VAR] = saved
        _internal.log_state.clear()
        _internal.log_state.log_qname_to_level.update(levels)
        _internal.log_state.artifact_names.update(artifacts)
        _internal._init_logs()


def _counting_backend(compiles: list[int]) -> Callable[..., Callable[..., object]]:
    def backend(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
        compiles.append(1)
        return gm.forward

    return backend


def _counters() -> dict[str, Counter[object]]:
    return {k: Counter(v) for k, v in counters.items()}


def test_analyze_with_traffic_leaves_the_users_compiled_function_and_settings_as_they_were(user_log_settings: None) -> None:
    compiles: list[int] = []

    @torch.compile(backend=_counting_backend(compiles))
    def user_fn(x: torch.Tensor) -> torch.Tensor:
        return x.cos() * 2

    x = torch.ones(3, 5)
    user_fn(x)
    assert len(compiles) == 1
    logs, env, stats = torch_log_settings(), dict(os.environ), _counters()
    assert _internal.log_state.is_artifact_enabled("recompiles")
    stdout, stderr = sys.stdout, sys.stderr

    # The sweep and the symbolic-size probe compile the model over the traffic; data_branch.py takes the dynamo capture.
    traffic = TrafficOptions(shapes=DATA / "recompile_branch_shapes.jsonl")
    report = neuronprobe.analyze(str(MODELS / "recompile_branch.py"), traffic=traffic)
    assert report.recompiles is not None and report.recompiles.observed is not None
    assert report.recompiles.observed.compiles == 4  # the evidence really ran
    fallback = neuronprobe.analyze(str(MODELS / "data_branch.py"))
    assert fallback.graph_breaks  # the dynamo capture really ran

    user_fn(x)
    assert len(compiles) == 1, "the user's compiled function recompiled after analyze"
    assert leaks(logs, torch_log_settings()) == []
    assert dict(os.environ) == env
    assert _counters() == stats
    assert sys.stdout is stdout and sys.stderr is stderr


def test_an_hf_model_leaves_the_hub_setting_and_transformers_log_level_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hub
    import transformers

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_info()
    try:
        loaded = load_model("hf:gpt2", ["n_layer=1", "n_embd=32", "n_head=2", "vocab_size=64"])
        assert loaded.on_meta
        assert "HF_HUB_OFFLINE" not in os.environ
        assert hub.HF_HUB_OFFLINE is False
        assert transformers.logging.get_verbosity() == logging.INFO
    finally:
        transformers.logging.set_verbosity(level)


def test_a_missing_torch_internal_becomes_a_limitation_not_fewer_results(monkeypatch: pytest.MonkeyPatch) -> None:
    def gone() -> dict[object, list[object]]:
        raise MissingInternal(dynamo_guards.INTERNAL, dynamo_guards.DEGRADES, "removed for this test")

    monkeypatch.setattr(dynamo_guards, "_failures", gone)
    loaded = load_model(str(MODELS / "recompile_static.py"))
    result = analyze_traffic(loaded, TrafficOptions(shapes=DATA / "recompile_static_shapes.jsonl"))
    whys = [lim.why for lim in result.limitations]
    assert any(dynamo_guards.INTERNAL in why and dynamo_guards.DEGRADES in why for why in whys), whys


def test_every_self_check_passes_on_the_tested_torch() -> None:
    checks = self_checks()
    assert len(checks) >= 15
    failed = [f"{c.internal}: {c.detail}" for c in checks if not c.ok]
    assert failed == []


def test_doctor_lists_each_torch_internal_and_the_degraded_features() -> None:
    done = CliRunner().invoke(app, ["doctor", "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    names = [c["internal"] for c in data["torch_internals"]]
    assert "torch._dynamo.guard_failures" in names and "torch.utils._pytree" in names
    assert all(c["ok"] and c["degrades"] for c in data["torch_internals"])
    assert data["degraded_features"] == []
    table = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "torch internal" in table.stdout and "torch._dynamo.guard_failures" in table.stdout
    assert "degraded features" in table.stdout


def test_doctor_names_the_feature_a_missing_internal_degrades(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch._dynamo.config, "recompile_limit")
    done = CliRunner().invoke(app, ["doctor", "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    (check,) = [c for c in data["torch_internals"] if c["internal"] == "torch._dynamo.config.recompile_limit"]
    assert check["ok"] is False
    assert "beyond dynamo's default of 8" in " ".join(data["degraded_features"])
