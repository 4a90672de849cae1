"""The Python API of the request: ``neuronprobe.analyze``, and the bucket proposals with their command's files
(``neuronprobe.parity`` and ``neuronprobe.audit`` live in their packages: ``parity/api.py``, ``audit/api.py``).

Each takes the options of its command as keyword arguments (``--max-memory`` is ``max_memory=``,
``--set`` is ``set=``; a comma list may be a string or a sequence) and runs the same library
path as the command: the analysis builds the one :class:`~neuronprobe.request.model.AnalyzeRequest`
the command line and the nightly build. The library writes no file (a report's ``to_json()`` and
``to_html()`` do that for a notebook) and never exits: a gate that fails raises :class:`GateFailed`,
which carries the result, where the command would exit 1.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronprobe import defaults
from neuronprobe.errors import GateFailed, InputError
from neuronprobe.request.check import build_request
from neuronprobe.request.model import OUTPUT_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.report.model import Report


def _gate_message(failures: Sequence[Any]) -> str:
    return "; ".join(getattr(f, "message", str(f)) for f in failures)


def analyze(model: Any, example_inputs: Any = None, *, name: str | None = None, traffic: Any = None, paths: Any = None, **options: Any) -> Report:
    """Analyse a model for Neuron, with the options of ``neuronprobe analyze`` as keywords.

    ``model`` is a ``torch.nn.Module`` (with ``example_inputs`` a tuple of positional arguments or a
    dict of keyword arguments), a model file, or an ``hf:``/``tv:``/``timm:`` spec. A spec runs in
    this process (not in the command's worker: ``timeout`` bounds the backend's own workers, ``max_memory``
    what auto's observation must fit). ``name`` names a module object's report; ``traffic`` (a
    ``TrafficOptions``) and ``paths`` are the older spellings of the traffic keywords and ``path``.
    ``parity=True`` needs a file or spec (parity rebuilds the model from its seed). A failed gate
    (``fail_on=``, ``fail_on_recompiles=``) raises :class:`GateFailed` with the report.
    """
    import dataclasses

    from neuronprobe.request.run import analyse, analysis_options, finish, plan_request

    given = [n for n in OUTPUT_NAMES if n in options]
    if given:
        raise InputError(f"{given[0]}: the library writes no file; write the returned report with report.to_json() or report.to_html()")
    if paths is not None:
        options.setdefault("path", paths)
    if traffic is not None:  # the older keyword: its fields are the request's traffic keywords
        options = {**{k: v for k, v in dataclasses.asdict(traffic).items() if v is not None}, **options}
    is_spec = isinstance(model, (str, os.PathLike))
    plan = plan_request(build_request(str(model) if is_spec else (name or type(model).__name__), **options))
    if is_spec:
        report = analyse(plan)
    else:
        if plan.request.parity:
            raise InputError("parity=True rebuilds the model from its seed: give a model file or an hf:/tv:/timm: spec, or call neuronprobe.parity")
        from neuronprobe.analysis import analyze_module
        from neuronprobe.request.run import worker_environment

        with worker_environment(plan.request.env):
            report = analyze_module(model, example_inputs, analysis_options(plan.request, plan.limits.max_memory_bytes), plan.request.traffic, name)
    outcome = finish(plan, report)
    if outcome.gate_failures:
        raise GateFailed(_gate_message(outcome.gate_failures), outcome.report, outcome.gate_failures)
    return outcome.report


# --- buckets ------------------------------------------------------------------------------


def propose_buckets(
    lengths: Any,
    max_buckets: int = defaults.DEFAULT_MAX_BUCKETS,
    *,
    column: str | None = None,
    field: str | None = None,
    step_times: Any = None,
    **options: Any,
) -> Any:
    """``neuronprobe buckets FILE``'s options as keywords: ``lengths`` a file (read as the command reads it, with
    ``column=``/``field=``) or the lengths themselves; ``step_times`` the command's ``--step-times`` CSV (length,seconds),
    which fits the cost. Every other keyword is :func:`neuronprobe.shape_buckets.propose_buckets`'s (``cost``, ``max_len``,
    ``multiple_of``, ``min_bucket``, ``fit``, ``compile_seconds``, ``compile_weight``, ``holdout``)."""
    from neuronprobe.shape_buckets import fit_step_times, read_lengths, read_step_times
    from neuronprobe.shape_buckets import propose_buckets as propose

    if isinstance(lengths, (str, os.PathLike)):
        lengths = read_lengths(Path(lengths), column=column, field=field)
    elif column is not None or field is not None:
        raise InputError("--column and --field name the lengths in a file: give lengths as a file")
    if step_times is not None:
        if options.get("cost", "tokens") != "tokens":
            raise InputError("give either --cost or --step-times, not both")
        options["cost"] = fit_step_times(*read_step_times(Path(step_times))) if isinstance(step_times, (str, os.PathLike)) else step_times
    return propose(lengths, max_buckets, **options)


def propose_decode_buckets(
    trace: Any,
    max_buckets: int = defaults.DEFAULT_MAX_BUCKETS,
    *,
    prompt_column: str | None = None,
    output_column: str | None = None,
    time_column: str | None = None,
    step_times: Any = None,
    set: Sequence[str] = (),
    path: Sequence[str | os.PathLike[str]] = (),
    **options: Any,
) -> Any:
    """``neuronprobe buckets TRACE --decode``'s options as keywords: ``trace`` a file of prompt and output lengths (read
    as the command reads it, with the column keywords) or a DecodeTrace, DataFrame or (prompts, outputs) pair;
    ``step_times`` the ``--step-times`` CSV; ``set``/``path`` the ``--model``'s ``--set`` and ``--path``. Every other keyword
    is :func:`neuronprobe.shape_buckets.propose_decode_buckets`'s (``runtime``, ``model``, ``target``, ``tp_degree``, ...)."""
    from neuronprobe.shape_buckets import fit_step_times, read_step_times
    from neuronprobe.shape_buckets import propose_decode_buckets as propose
    from neuronprobe.shape_buckets.decode_trace import read_decode_trace

    if isinstance(trace, (str, os.PathLike)):
        trace = read_decode_trace(Path(trace), prompt_column, output_column, time_column)
    elif any(c is not None for c in (prompt_column, output_column, time_column)):
        raise InputError("--prompt-column, --output-column and --time-column name the columns of a trace file: give the trace as a file")
    if step_times is not None:
        options["step_times"] = fit_step_times(*read_step_times(Path(step_times))) if isinstance(step_times, (str, os.PathLike)) else step_times
    if set:
        options["model_overrides"] = tuple(set)
    if path:
        options["model_paths"] = tuple(str(p) for p in path)
    return propose(trace, max_buckets, **options)


__all__ = ["GateFailed", "analyze", "propose_buckets", "propose_decode_buckets"]
