"""``torch._logging`` artifact loggers: read dynamo's ``graph_breaks`` records without changing log settings.

Checked on torch 2.13.0 (not used by the xla-cpu worker).

``torch._logging.set_logs(graph_breaks=True)`` followed by ``set_logs()``
replaced the user's log settings (the ones a notebook set with ``set_logs``)
with none. Instead, the loggers registered for the artifact
(``log_registry.artifact_log_qnames`` whose ``artifact_name`` matches) get a
recording handler and DEBUG level for the duration of the block, with
propagation off so nothing reaches the user's console, and each logger's level,
propagation and handlers are put back afterwards. ``torch._logging``'s own
state (``_internal.log_state``) is never written, and ``TORCH_LOGS`` keeps
working as the user set it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._logging._internal.log_registry (artifact loggers)"
GRAPH_BREAKS = "graph_breaks"
DEGRADES = "graph-break locations (file and line of each break)"


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a malformed record must not break the compile
            self.messages.append(record.getMessage())


def artifact_loggers(artifact: str) -> list[logging.Logger]:
    """The loggers torch registered for ``artifact``; raises MissingInternal when there are none."""
    try:
        from torch._logging import _internal
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    registry = getattr(_internal, "log_registry", None)
    names = getattr(registry, "artifact_log_qnames", None)
    if not isinstance(names, set):
        raise MissingInternal(INTERNAL, DEGRADES, "torch._logging._internal.log_registry.artifact_log_qnames is gone")
    loggers = [logging.getLogger(n) for n in sorted(names)]
    found = [lg for lg in loggers if getattr(lg, "artifact_name", None) == artifact]
    if not found:
        raise MissingInternal(INTERNAL, DEGRADES, f"no logger is registered for the {artifact!r} artifact")
    return found


@contextlib.contextmanager
def recorded_artifact(artifact: str) -> Iterator[list[str]]:
    """Yield a list that fills with the messages of ``artifact`` logged inside the block."""
    loggers = artifact_loggers(artifact)
    recorder = _Recorder()
    saved = [(lg, lg.level, lg.propagate, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
        lg.disabled = False
        lg.addHandler(recorder)
    try:
        yield recorder.messages
    finally:
        for lg, level, propagate, disabled in saved:
            lg.removeHandler(recorder)
            lg.setLevel(level)
            lg.propagate = propagate
            lg.disabled = disabled


def self_check() -> Check:
    def probe() -> None:
        loggers = artifact_loggers(GRAPH_BREAKS)
        with recorded_artifact(GRAPH_BREAKS) as messages:
            loggers[0].debug("neuronprobe self-check")
        if messages != ["neuronprobe self-check"]:
            raise MissingInternal(INTERNAL, DEGRADES, "a record on the artifact logger was not seen")

    return run_check(INTERNAL, DEGRADES, probe)
