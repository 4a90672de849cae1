"""One validation of an :class:`~neuronprobe.request.model.AnalyzeRequest`, whatever door built it.

Each bad field is one :class:`~neuronprobe.errors.InputError` sentence that names its command-line
option; the command line exits 2 with it, the Python API raises it, and the nightly prefixes the
config file and the ``[[models]]`` entry. The checks run before any work (no model is imported,
no torch): a request that passes can still fail on the model's own code, never on an option.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronprobe.errors import InputError
from neuronprobe.request.model import FIELDS, OPTION_NAMES, AnalyzeRequest, flag_of

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.gates import Gates
    from neuronprobe.process.worker import WorkerLimits
    from neuronprobe.support import SupportTable

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PATH_FIELDS = tuple(n for n, f in FIELDS.items() if "Path" in str(f.type) and n != "path")
_INT_TUPLES = ("batch_sizes", "buckets")


def build_request(model: str, **options: Any) -> AnalyzeRequest:
    """An AnalyzeRequest from keyword arguments as a person writes them (lists, strings for paths, ``"a,b"``).

    The Python API and the notebook build their request here; an unknown keyword is one sentence
    that lists the known ones (a typo must not be dropped silently).
    """
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise InputError(
            f"unknown option {unknown[0]!r}; the options are the command line's, as keywords: {', '.join(n for n in OPTION_NAMES if n != 'model')}"
        )
    values: dict[str, Any] = {"model": str(model)}
    for name, value in options.items():
        values[name] = _normal(name, value)
    return AnalyzeRequest(**values)


def _normal(name: str, value: Any) -> Any:
    """One keyword's value in the request's own type (paths as Path, sequences as tuples, ``"a,b"`` split)."""
    if value is None:
        return None
    if name in _PATH_FIELDS or name == "output_dir":
        return Path(value) if isinstance(value, (str, os.PathLike)) else value
    if name == "path":
        return tuple(Path(p) for p in ([value] if isinstance(value, (str, os.PathLike)) else value))
    if name in ("set", "fail_on"):
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip()) if name == "fail_on" else (value,)
        return tuple(value)
    if name in _INT_TUPLES:
        if isinstance(value, str):
            return tuple(int_list(value, flag_of(name)) or ())
        return tuple(value)
    if name == "env":
        items = value.items() if hasattr(value, "items") else value
        return tuple(sorted((str(k), str(v)) for k, v in items))
    return value


def split_csv(value: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``: a comma list as the command line takes it."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def int_list(value: str | None, flag: str) -> list[int] | None:
    """``1,4,8`` as integers; a usable sentence (exit 2) for anything else."""
    if not value:
        return None
    try:
        return [int(v) for v in split_csv(value)]
    except ValueError:
        raise InputError(f"{flag} {value!r}: use whole numbers separated by commas, e.g. 1,4,8") from None


def rule_table(rules: Path | None) -> SupportTable:
    """The support table ``--fail-on`` rule ids are checked against: the bundled one, with ``--rules`` first."""
    from neuronprobe.support import load_table, with_user_rules

    return load_table() if rules is None else with_user_rules(load_table(), rules)


def request_gates(request: AnalyzeRequest) -> Gates:
    """The request's gates, checked: an unknown verdict or rule id is one sentence with the closest known ones."""
    from neuronprobe.gates import Gates, check_gates, known_rule_ids

    return check_gates(Gates(tuple(request.fail_on), request.fail_on_recompiles), lambda: known_rule_ids(rule_table(request.rules)))


def request_limits(request: AnalyzeRequest) -> WorkerLimits:
    """The analysis worker's limits (``--timeout``, ``--max-memory``), checked."""
    from neuronprobe.process.worker import limits_from_options

    return limits_from_options(request.timeout, request.max_memory)


def check_stack_options(request: AnalyzeRequest) -> None:
    """The target, its stack, the release and the backend: the sentences the pipeline would give, before any work."""
    from neuronprobe.backends import BACKEND_CHOICES
    from neuronprobe.support import check_target, load_table
    from neuronprobe.support.native.compile import check_native_mode
    from neuronprobe.support.native.stack import NATIVE, check_native_sdk, check_stack

    check_target(request.target)
    stack = check_stack(request.stack, request.target, request.sdk)
    check_native_mode(request.native_mode, stack)
    if request.sdk is not None:
        check_native_sdk(request.sdk) if stack == NATIVE else load_table().check_sdk(request.sdk)
    if request.backend not in BACKEND_CHOICES:
        raise InputError(f"--backend {request.backend!r}: use one of {', '.join(BACKEND_CHOICES)}")
    if request.require_backend not in (None, "neuron", "static", "xla-cpu"):
        raise InputError(f"--require-backend {request.require_backend!r}: use neuron, xla-cpu (or static, which is always there)")


def check_request(request: AnalyzeRequest) -> AnalyzeRequest:
    """``request`` with its folders resolved, when every field is usable; else one InputError naming the first bad field.

    The order is the command line's: the target, stack, release and backend, the gates, the import folders, training, the time limits,
    the epoch, the recompile gate's traffic, the audit path, the worker's limits and environment.
    """
    from neuronprobe.loaders.resolve import check_import_paths
    from neuronprobe.options import check_epoch, check_number, check_seconds

    if not isinstance(request.model, str) or not request.model.strip():
        raise InputError("give a MODEL: a model file, hf:<model_type>, tv:<name> or timm:<name>")
    for name in FIELDS:  # every number within int64 and finite, whichever door built the request (the CLI checks its own first)
        value = getattr(request, name)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, (int, float)):
                check_number(item, flag_of(name))
    if request.buckets:
        from neuronprobe.shape_buckets.runtime import check_edges

        check_edges(request.buckets, "--buckets")
    check_stack_options(request)
    request_gates(request)
    paths = tuple(check_import_paths(list(request.path)))
    if request.train:
        from neuronprobe.training import TrainOptions, check_options

        check_options(TrainOptions(request.optimizer, request.optimizer_impl, request.dataset_size, request.batch_size))
    elif request.dataset_size is not None or request.batch_size is not None:
        raise InputError("--dataset-size and --batch-size describe a training epoch: add --train")
    check_seconds(request.timeout, "--timeout")
    check_seconds(request.op_timeout, "--op-timeout")
    if request.compile_seconds is not None:
        check_seconds(request.compile_seconds, "--compile-seconds", zero=True)
    check_epoch(request.dataset_size, request.batch_size)
    if request.fail_on_recompiles is not None and not request.traffic_given and request.model.startswith("hf:"):
        raise InputError("--fail-on-recompiles needs traffic: give --shapes or --lengths")
    if request.audit is not None and not Path(request.audit).exists():
        raise InputError(f"--audit {request.audit}: no such file or folder")
    request_limits(request)
    for key, _value in request.env:
        if not _ENV_NAME.match(key):
            raise InputError(f"env {key!r}: not an environment variable name (letters, digits and '_', not starting with a digit)")
    return dataclasses.replace(request, path=paths)


__all__ = ["build_request", "check_request", "check_stack_options", "int_list", "request_gates", "request_limits", "rule_table", "split_csv"]
