"""The report's bucket section (``--traffic``): the proposed sequence-length ladder, its curve and baselines."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.vocabulary import Fit


@dataclass
class Overhead:
    tokens: float  # padded-token overhead, % of real tokens
    attention: float  # attention-cost (x^2) overhead, % of real attention cost


@dataclass
class CurvePoint:
    k: int
    edges: list[int]
    overhead: Overhead
    cost: float = 0.0  # total padding cost, sum of f(bucket) - f(length), in the cost model's units
    objective: float | None = None  # runtime + compile cost, when --compile-seconds was given


@dataclass
class Baseline:
    name: str
    edges: list[int]
    overhead: Overhead
    graphs: int = 0
    beyond_last: int = 0
    cost: float = 0.0  # total padding cost under the proposal's cost model
    optimal_at_same_k: Overhead | None = None  # the optimum with as many buckets (graphs)


@dataclass
class Histogram:
    """The length distribution: distinct lengths and their counts, or bins when there are many."""

    values: list[int] = field(default_factory=list)  # each length, or each bin's upper end
    counts: list[int] = field(default_factory=list)
    bin_width: int | None = None  # None: values are the exact distinct lengths (schema 2: a one-element list)


@dataclass
class HoldoutScore:
    """A ladder scored on the held-out lengths."""

    tokens: float  # padded-token overhead, %
    attention: float  # attention-cost overhead, %
    beyond_last: int = 0


@dataclass
class Holdout:
    """The proposal fitted on the first part of the lengths and scored on the rest (``--holdout``)."""

    fraction: float  # the share held out
    order: str  # "time order" or "file order (no timestamp column)"
    fit_lengths: int
    test_lengths: int
    overhead: Overhead | None = None  # the proposed edges on the held-out part
    beyond_last: int = 0
    baselines: dict[str, HoldoutScore] = field(default_factory=dict)


@dataclass
class BucketProposal:
    """The answer of ``propose_buckets``: optimal edges, the curve and the baselines."""

    edges: list[int]
    k: int
    cost_model: str
    overhead: Overhead
    cost: float = 0.0
    fit: Fit = Fit.INCLUSIVE
    max_len: int = 0
    curve: list[CurvePoint] = field(default_factory=list)
    baselines: list[Baseline] = field(default_factory=list)
    beyond_last: int = 0
    n_lengths: int = 0
    n_distinct: int = 0
    notes: list[str] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)
    histogram: Histogram = field(default_factory=Histogram)
    holdout: Holdout | None = None  # schema 3: typed (was a free-form object)
    cost_params: dict[str, float] = field(default_factory=dict)  # {"A": a, "B": b}: f(x) = A*x + B*x^2
    max_buckets: int = 0  # K as requested (k <= K; clamps are in notes)
    multiple_of: int | None = None
    min_bucket: int | None = None
    compile_seconds: float | None = None
    compile_weight: float = 1.0
    chosen_by: str = ""  # "max_buckets" or "runtime+compile"
    source: str = ""  # the length file (and column) or "" for in-memory lengths

    def __post_init__(self) -> None:
        self.fit = Fit(self.fit)
