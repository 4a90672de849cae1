"""The analysis request: every option of ``neuronprobe analyze``, as one frozen value.

The command line's flags, the nightly config's keys (``[[models]]`` tables and their top-level
defaults), the keyword arguments of :func:`neuronprobe.analyze` and the notebook's ``%%neuronprobe``
options all build this one dataclass, so what a user can ask for does not depend on the door they
came in by. A field's name is its Python keyword and its nightly key; its ``flag`` metadata is the
command-line option, which every error sentence about it names (:mod:`neuronprobe.request.check`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronprobe.defaults import (
    DEFAULT_BACKEND,
    DEFAULT_MAX_BUCKETS,
    DEFAULT_MAX_COMPILES,
    DEFAULT_OP_TIMEOUT_S,
    DEFAULT_TARGET,
    DEFAULT_TIMEOUT_S,
)

DEFAULT_OUTPUT_DIR = Path("reports")


def _meta(flag: str, group: str) -> dict[str, str]:
    """A request field's metadata: the command-line option it mirrors and the group it belongs to."""
    return {"flag": flag, "group": group}


@dataclass(frozen=True)
class AnalyzeRequest:
    """One analysis, as every door asks for it (see the module docstring). Build it, then :func:`check_request` it."""

    # --- the model and its inputs ---
    model: str = dataclasses.field(default="", metadata=_meta("MODEL", "model"))  # a model file, hf:<type>, tv:<name> or timm:<name>
    set: tuple[str, ...] = dataclasses.field(default=(), metadata=_meta("--set", "model"))  # hf: config overrides, KEY=VALUE
    entry: str | None = dataclasses.field(default=None, metadata=_meta("--entry", "model"))  # the method to analyse instead of forward (None: the file's ENTRY)
    path: tuple[Path, ...] = dataclasses.field(default=(), metadata=_meta("--path", "model"))  # folders a model file imports packages from
    # --- the target, its software stack and the rules that apply ---
    target: str = dataclasses.field(default=DEFAULT_TARGET, metadata=_meta("--target", "stack"))
    stack: str | None = dataclasses.field(default=None, metadata=_meta("--stack", "stack"))  # xla | native (None: the SDK's default for the target)
    sdk: str | None = dataclasses.field(default=None, metadata=_meta("--sdk", "stack"))  # the Neuron SDK release whose rules apply
    support_table: Path | None = dataclasses.field(default=None, metadata=_meta("--support-table", "stack"))  # --stack native: a release's op table
    native_mode: str | None = dataclasses.field(default=None, metadata=_meta("--native-mode", "stack"))  # eager | compile (None: eager)
    compiler_args: str | None = dataclasses.field(default=None, metadata=_meta("--compiler-args", "stack"))  # neuronx-cc flags (None: $NEURON_CC_FLAGS)
    rules: Path | None = dataclasses.field(default=None, metadata=_meta("--rules", "stack"))  # a user's rule file, applied before the bundled rules
    # --- the backend and the limits ---
    backend: str = dataclasses.field(default=DEFAULT_BACKEND, metadata=_meta("--backend", "backend"))
    require_backend: str | None = dataclasses.field(default=None, metadata=_meta("--require-backend", "backend"))
    timeout: float = dataclasses.field(default=DEFAULT_TIMEOUT_S, metadata=_meta("--timeout", "limits"))
    op_timeout: float = dataclasses.field(default=DEFAULT_OP_TIMEOUT_S, metadata=_meta("--op-timeout", "limits"))
    max_memory: str | None = dataclasses.field(default=None, metadata=_meta("--max-memory", "limits"))  # e.g. 8G or 50% (None: 75% of the machine)
    env: tuple[tuple[str, str], ...] = dataclasses.field(
        default=(), metadata=_meta("env", "limits")
    )  # environment variables of the worker (the nightly's [env])
    # --- traffic (the recompile prediction) ---
    shapes: Path | None = dataclasses.field(default=None, metadata=_meta("--shapes", "traffic"))
    lengths: Path | None = dataclasses.field(default=None, metadata=_meta("--lengths", "traffic"))
    column: str | None = dataclasses.field(default=None, metadata=_meta("--column", "traffic"))
    field: str | None = dataclasses.field(default=None, metadata=_meta("--field", "traffic"))
    batch_sizes: tuple[int, ...] | None = dataclasses.field(default=None, metadata=_meta("--batch-sizes", "traffic"))
    buckets: tuple[int, ...] | None = dataclasses.field(default=None, metadata=_meta("--buckets", "traffic"))
    max_buckets: int = dataclasses.field(default=DEFAULT_MAX_BUCKETS, metadata=_meta("--max-buckets", "traffic"))
    compile_seconds: float | None = dataclasses.field(default=None, metadata=_meta("--compile-seconds", "traffic"))
    max_compiles: int = dataclasses.field(default=DEFAULT_MAX_COMPILES, metadata=_meta("--max-compiles", "traffic"))
    # --- serving: a decode trace, a vLLM Neuron plan ---
    decode_trace: Path | None = dataclasses.field(default=None, metadata=_meta("--decode-trace", "serving"))
    serving_trace: Path | None = dataclasses.field(default=None, metadata=_meta("--serving-trace", "serving"))
    serving_engine: str | None = dataclasses.field(default=None, metadata=_meta("--serving-engine", "serving"))
    max_num_batched_tokens: int | None = dataclasses.field(default=None, metadata=_meta("--max-num-batched-tokens", "serving"))
    max_num_seqs: int | None = dataclasses.field(default=None, metadata=_meta("--max-num-seqs", "serving"))
    max_model_len: int | None = dataclasses.field(default=None, metadata=_meta("--max-model-len", "serving"))
    tensor_parallel_size: int | None = dataclasses.field(default=None, metadata=_meta("--tensor-parallel-size", "serving"))
    # measured compile times that price the serving plan's graphs (the formats `buckets --compile-times` reads)
    compile_times: Path | None = dataclasses.field(default=None, metadata=_meta("--compile-times", "serving"))
    # --- training, parity, audit: the other sections ---
    train: bool = dataclasses.field(default=False, metadata=_meta("--train", "train"))
    optimizer: str = dataclasses.field(default="adamw", metadata=_meta("--optimizer", "train"))
    optimizer_impl: str = dataclasses.field(default="for-loop", metadata=_meta("--optimizer-impl", "train"))
    dataset_size: int | None = dataclasses.field(default=None, metadata=_meta("--dataset-size", "train"))
    batch_size: int | None = dataclasses.field(default=None, metadata=_meta("--batch-size", "train"))
    parity: bool = dataclasses.field(default=False, metadata=_meta("--parity", "parity"))
    audit: Path | None = dataclasses.field(default=None, metadata=_meta("--audit", "audit"))
    # --- gates and outputs (the library evaluates the gates; only the command line writes files) ---
    fail_on: tuple[str, ...] = dataclasses.field(default=(), metadata=_meta("--fail-on", "gates"))
    fail_on_recompiles: int | None = dataclasses.field(default=None, metadata=_meta("--fail-on-recompiles", "gates"))
    json: Path | None = dataclasses.field(default=None, metadata=_meta("--json", "outputs"))
    output_dir: Path = dataclasses.field(default=DEFAULT_OUTPUT_DIR, metadata=_meta("--output-dir", "outputs"))
    html: bool = dataclasses.field(default=True, metadata=_meta("--html", "outputs"))
    # --- provenance, not an option: the command line the report records ---
    command_line: str = dataclasses.field(default="", metadata=_meta("", "provenance"))

    @property
    def traffic(self) -> Any:
        """The traffic options of the analysis (:class:`~neuronprobe.analysis.TrafficOptions`)."""
        from neuronprobe.analysis import TrafficOptions

        return TrafficOptions(
            shapes=self.shapes,
            lengths=self.lengths,
            column=self.column,
            field=self.field,
            batch_sizes=list(self.batch_sizes) if self.batch_sizes is not None else None,
            buckets=list(self.buckets) if self.buckets is not None else None,
            max_buckets=self.max_buckets,
            compile_seconds=self.compile_seconds,
            max_compiles=self.max_compiles,
        )

    @property
    def traffic_given(self) -> bool:
        return self.shapes is not None or self.lengths is not None

    @property
    def vllm_options(self) -> dict[str, int | None]:
        """vLLM's own option names for the serving plan (``--max-num-seqs`` ...)."""
        return {
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": self.max_num_seqs,
            "max_model_len": self.max_model_len,
            "tensor_parallel_size": self.tensor_parallel_size,
        }

    @property
    def wants_serving(self) -> bool:
        return (
            self.serving_trace is not None
            or self.serving_engine is not None
            or self.compile_times is not None
            or any(v is not None for v in self.vllm_options.values())
        )

    def reads(self) -> list[Any]:
        """The files the request names that an analysis reads (no output may be one of them); audit folders are walked by the caller."""
        from neuronprobe.loaders.resolve import model_file_imports

        files: list[Any] = [self.model, self.shapes, self.lengths, self.rules, self.decode_trace, self.support_table]
        files += model_file_imports(self.model, self.path)  # the helpers it imports are inputs too
        if self.wants_serving:
            files += [self.serving_trace, self.compile_times]
        return files


def flag_of(name: str) -> str:
    """The command-line option of a request field (``max_memory`` -> ``--max-memory``)."""
    return str(FIELDS[name].metadata["flag"])


FIELDS: dict[str, dataclasses.Field[Any]] = {f.name: f for f in dataclasses.fields(AnalyzeRequest)}
# Fields a user may set (the command line is provenance; outputs are where the command line writes).
OPTION_NAMES: tuple[str, ...] = tuple(n for n, f in FIELDS.items() if f.metadata["group"] != "provenance")
OUTPUT_NAMES: tuple[str, ...] = tuple(n for n, f in FIELDS.items() if f.metadata["group"] == "outputs")


__all__ = ["DEFAULT_OUTPUT_DIR", "FIELDS", "OPTION_NAMES", "OUTPUT_NAMES", "AnalyzeRequest", "flag_of"]
