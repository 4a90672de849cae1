"""Capture that does not give up: try the cheap way first, then ways that run more of the model.

1. ``meta``: weights and inputs on the meta device. No memory, but ops without a
   meta kernel (``nonzero`` in mixture-of-experts routing), value reads and
   tensors the forward makes on the CPU next to meta weights all raise.
2. ``fake``: the same meta-built model with its weights and inputs turned into
   fake CPU tensors (``FakeTensorMode``): data-dependent ops get unbacked sizes,
   CPU tensors made in the forward mix in, and still nothing is allocated. A
   branch on such a size (a detection model's ``if boxes.numel() == 0`` after
   ``nms``) is followed with an assumed size and named in the report, so the
   ops after it (``roi_align``) are still seen.
3. ``cpu-shrunk`` (``hf:`` only): real CPU weights on a shrunken config that keeps a
   layer of every kind the full config has (loaders/hf/shrink.py). The shapes differ
   from the real model; the op kinds and their lines do not, unless the report names
   what the shrunken build lacks.

Each failed way leaves its root error; the report says which way worked and
why the earlier ones did not. When none works, the caller gets every reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from neuronprobe.errors import InternalError, ModelLoadError, NeuronprobeError, error_line, root_error
from neuronprobe.loaders import hf
from neuronprobe.loaders.fake_weights import fake_module, fake_value
from neuronprobe.loaders.fired import Fired, recording
from neuronprobe.loaders.hf.search import Step, capture_learner, learn_inputs, search
from neuronprobe.vocabulary import CaptureStrategy

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.capture.graph import OpGraph
    from neuronprobe.loaders.resolve import LoadedModel
    from neuronprobe.report.model import Report, StrategyReason

META = CaptureStrategy.META
FAKE = CaptureStrategy.FAKE
CPU_SHRUNK = CaptureStrategy.CPU_SHRUNK
AS_GIVEN = CaptureStrategy.AS_GIVEN  # a model file or module with real weights: run as it is
NONE = CaptureStrategy.NONE  # every strategy failed
HF_STRATEGIES = (META, FAKE, CPU_SHRUNK)
INPUT_RETRIES = 6  # inputs rebuilt from what the forward's error said (hf.REPAIRS: image tokens, frames, audio channels, sizes, needed inputs)


@dataclass
class Attempt:
    strategy: CaptureStrategy
    reason: str
    build_failed: bool = False  # the constructor raised (the config's fault) rather than the forward


@dataclass
class Captured:
    """What one way's capture saw: the model as it ran (its inputs as the search remade them) and its op graph.

    Only the capture runs inside the search; classifying, observing on a live backend, predicting traffic
    and assembling the report run once, on the captured model of the way that won.
    """

    loaded: LoadedModel
    graph: OpGraph
    step: Any = None  # --train: the training step's own capture (training.TrainCapture), which the search does not read

    @property
    def nodes(self) -> int:
        """Op calls captured, the training step's included: what two partial captures are compared by."""
        return len(self.graph.calls) + (len(self.step.calls) if self.step is not None else 0)


Capturer = Callable[["LoadedModel"], Captured]  # capture one loaded model (ModelLoadError: its forward raised)


@dataclass
class Outcome:
    """The captured model of the first way that worked, or every attempt's reason when none did."""

    captured: Captured | None
    attempts: list[Attempt]
    notes: list[str]
    strategy: CaptureStrategy = NONE
    fired: Fired = dataclasses.field(default_factory=Fired)  # hf: the recipes and repairs of the strategy that captured

    @property
    def loaded(self) -> LoadedModel | None:
        return self.captured.loaded if self.captured is not None else None

    @property
    def graph(self) -> OpGraph | None:
        return self.captured.graph if self.captured is not None else None

    @property
    def reasons(self) -> list[StrategyReason]:
        """Why each way before the one that captured (every way, when none did) failed, as the report says it."""
        from neuronprobe.report.model import StrategyReason

        return [StrategyReason(a.strategy, a.reason) for a in self.attempts]


REASON_CHARS = 400  # a guard on ninety box counts is one line of 8,000 characters: the start says enough


def describe(exc: BaseException) -> str:
    """An attempt's reason: the root error's first line, cut to :data:`REASON_CHARS`."""
    return error_line(exc, REASON_CHARS)


# --- fake tensors -------------------------------------------------------------------------


def to_fake(loaded: LoadedModel) -> LoadedModel:
    """The model's weights and inputs as fake CPU tensors (in place: the model was built for this attempt)."""
    from neuronprobe._torch.fake_tensor import fake_mode_with_shapes

    mode = fake_mode_with_shapes()
    fake_module(loaded.module, mode)
    make = loaded.make_inputs

    def fake_inputs(batch: int, seq: int) -> Any:
        return fake_value(mode, make(batch, seq)) if make is not None else None

    return dataclasses.replace(
        loaded,
        args=fake_value(mode, loaded.args),
        kwargs=fake_value(mode, loaded.kwargs),
        make_inputs=fake_inputs if make is not None else None,
        on_meta=True,
        assume_sizes=True,  # fake sizes from nonzero or nms have no value to branch on: assume a few survive
    )


def has_meta_weights(module: Any) -> bool:
    return any(p.is_meta for p in module.parameters())


# --- the chains ----------------------------------------------------------------------------


def try_capture(capture: Capturer, loaded: LoadedModel, require_ops: bool = True) -> tuple[Captured | None, BaseException | None]:
    """Capture one way; a forward that raises (or an internal tracer error) is a failed attempt, bad input is not."""
    try:
        captured = capture(loaded)
    except ModelLoadError as exc:
        return None, exc
    except (NeuronprobeError, InternalError):
        raise  # a bad option: the user's to fix; a bug in neuronprobe: exit 3, not "could not analyse"
    except Exception as exc:  # a tracer's own failure on this way of running the model
        return None, exc
    failure = captured.graph.failure
    if require_ops and captured.nodes == 0 and failure is not None:  # nothing captured: another way may see the ops
        return None, RuntimeError(f"no op captured ({failure.exception}: {failure.message})")
    return captured, None


def capture_hf(
    model_type: str,
    overrides: list[str],
    seq_len: int,
    batch: int,
    capture: Capturer,
    strategies: tuple[CaptureStrategy, ...] = HF_STRATEGIES,
) -> Outcome:
    """Try meta, fake and cpu-shrunk in turn for ``hf:<model_type>``: load and capture only.

    ``strategies``: the ways to try, in order. The analysis always passes all
    three; ``benchmarks/bench_strategies.py`` passes one at a time to time each
    way on a model the cheaper ways could already capture.
    """
    unknown = set(strategies) - set(HF_STRATEGIES)
    if unknown:
        raise ValueError(f"unknown capture strategies {sorted(unknown)}; known: {', '.join(HF_STRATEGIES)}")
    attempts: list[Attempt] = []
    parent_failed = False
    partial: Outcome | None = None
    for strategy in strategies:

        def attempt(plan: hf.InputPlan, strategy: CaptureStrategy = strategy) -> Step[Captured]:
            device = "cpu" if strategy == CPU_SHRUNK else "meta"
            try:
                loaded = hf.load(model_type, overrides, seq_len, batch, device=device, shrink=strategy == CPU_SHRUNK, plan=plan)
            except NeuronprobeError:
                raise
            except Exception as exc:  # the build, the parent's recording or the inputs raised: nothing to learn
                return Step(error=exc)
            if strategy == FAKE:
                loaded = to_fake(loaded)
            captured, error = try_capture(capture, loaded)
            if captured is not None:
                return Step(value=captured)
            assert error is not None
            return Step(error=error, info=hf.inputs_info(loaded.module.model, loaded.kwargs or {}, root_error(error)))

        # The last try may be inputs recorded from a parent.
        with recording() as fired:  # this strategy's own: each strategy starts from fresh inputs
            found = search(attempt, capture_learner(model_type, overrides, parents=not parent_failed), retries=INPUT_RETRIES + 1)
        if found.value is not None:
            captured = found.value
            remade = found.plan.describe()
            outcome = Outcome(captured, list(attempts), [*captured.loaded.notes, *([remade] if remade else [])], strategy, fired)
            stop = stopped_early(captured.graph)
            if stop is None:  # the forward ran to its end: this beats any capture that stopped, whatever its op count
                return outcome
            partial = fuller(outcome, partial)  # a later way may run the forward through: kept in case none does
            attempts.append(Attempt(strategy, f"the capture stopped after {captured.nodes} ops ({stop})"[:REASON_CHARS]))
        elif isinstance(found.error, hf.BuildError):
            attempts.append(Attempt(strategy, str(found.error), build_failed=True))
        elif isinstance(found.error, hf.NoParentInputs):  # say why the config's inputs failed, then why no parent helped
            parent_failed = True  # the parents' runs do not depend on the strategy: not tried again
            config_error = describe(found.errors[-2]) if len(found.errors) > 1 else ""
            attempts.append(Attempt(strategy, f"{config_error}; inputs from a parent: {found.error}"[:REASON_CHARS]))
        else:
            attempts.append(Attempt(strategy, describe(found.error) if found.error is not None else "the input retries ran out"))
    # Every way stopped partway: the fullest capture, with every way's reason (its own stop among them).
    return dataclasses.replace(partial, attempts=attempts) if partial else Outcome(None, attempts, [])


def stopped_early(graph: OpGraph) -> str | None:
    """Why dynamo stopped partway through the forward (a value read of a fake size, a CPU grid next to meta
    weights), or None when it ran the forward to its end: such a capture holds only the ops before the stop."""
    return graph.stopped


def fuller(outcome: Outcome, partial: Outcome | None) -> Outcome:
    """Of two captures that both stopped partway, the one with more ops (a complete capture never comes here:
    it is returned as soon as it is made, since a shrunken CPU copy that ran to the end has fewer ops than a
    full-size meta capture that stopped, and is still the better account of the forward)."""
    if partial is None or partial.captured is None or outcome.captured is None:
        return outcome
    return outcome if outcome.captured.nodes >= partial.captured.nodes else partial


def capture_loaded(loaded: LoadedModel, capture: Capturer) -> Outcome:
    """A model file: as given; one with meta weights whose forward fails there gets the fake way too."""
    if not has_meta_weights(loaded.module):  # real weights: the one way there is, whatever it captures
        captured, error = try_capture(capture, loaded, require_ops=False)
        if error is not None:
            raise error  # a model with real weights whose forward raises: the model file's own bug
        return Outcome(captured, [], loaded.notes, AS_GIVEN)
    captured, error = try_capture(capture, loaded)
    if captured is not None:
        return Outcome(captured, [], loaded.notes, META)
    assert error is not None
    attempts = [Attempt(META, describe(error))]
    captured, second = try_capture(capture, to_fake(loaded))
    if captured is not None:
        return Outcome(captured, attempts, loaded.notes, FAKE)
    assert second is not None
    attempts.append(Attempt(FAKE, describe(second)))
    return Outcome(None, attempts, [])


def check_input_blame(model_type: str, overrides: list[str], outcome: Outcome, seq_len: int, batch: int, capture: Capturer) -> None:
    """Raise InputError when the failure is the input's: a config no device can build, or ``--set`` values
    the default config does not need (it captures without them on the meta device)."""
    from neuronprobe.errors import InputError

    if outcome.attempts and all(a.build_failed for a in outcome.attempts):
        raise InputError(
            f"hf:{model_type}: transformers cannot build the model from this config ({outcome.attempts[-1].reason}); give the fields it needs with --set KEY=VALUE"
        )
    if not overrides:
        return

    def attempt(plan: hf.InputPlan) -> Step[Captured]:  # the default config with the same input repairs the capture had
        try:
            plain = hf.load(model_type, [], seq_len, batch, device="meta", plan=plan)
        except Exception as exc:
            return Step(error=exc)
        captured, error = try_capture(capture, plain)
        if error is None:
            return Step(value=captured)
        return Step(error=error, info=hf.inputs_info(plain.module.model, plain.kwargs or {}, root_error(error)))

    if search(attempt, learn_inputs, retries=INPUT_RETRIES).value is not None:
        fields = ", ".join(o.partition("=")[0].strip() for o in overrides)
        forward = next((a.reason for a in outcome.attempts if not a.build_failed), outcome.attempts[-1].reason)
        raise InputError(
            f"hf:{model_type}: with --set {fields} the model's forward raised {forward}; the default config analyses, so these values make the model inconsistent"
        )


def finish(report: Report, outcome: Outcome) -> Report:
    """Say in the report how the capture went and what the model build changed."""
    from neuronprobe.report.model import Limitation

    report.capture.strategy = outcome.strategy
    report.capture.strategy_reasons = outcome.reasons
    report.capture.input_recipes = list(outcome.fired.recipes)
    report.capture.input_repairs = list(outcome.fired.repairs)
    report.not_analysed.extend(Limitation(what="model build", why=n) for n in outcome.notes)
    return report


def give_up_reason(outcome: Outcome) -> str:
    return "; ".join(f"{a.strategy}: {a.reason}" for a in outcome.attempts)
