"""The one supervisor (issue 35.3): any started child, the same endings, a deadline the caller may move.

The forked analysis worker, the fork server's workers and the xla-cpu worker (an exec'd
interpreter writing JSON lines) all end through :func:`supervise`; here a scripted child
shows each ending and that the child is killed on every one of them.
"""

from __future__ import annotations

import time
from typing import Any

from neuronprobe.process.supervisor import Deadline, fixed_deadline, supervise
from neuronprobe.vocabulary import REPORTED_STEP_STATUSES, StepStatus


class Scripted:
    """A child that sends ``script`` one message per receive, then ends with ``code`` (or closes its channel)."""

    def __init__(self, script: list[Any], code: int | None = None, closes: bool = False) -> None:
        self.script = list(script)
        self.code = code
        self.closes = closes
        self.kills = 0

    @property
    def pid(self) -> int:
        return 2**22 + 1  # never read: no memory bound, no stack files here

    def receive(self, wait: float) -> list[Any] | None:
        time.sleep(min(wait, 0.01))
        if self.script:
            return [self.script.pop(0)]
        return None if self.closes else []

    def exit_code(self) -> int | None:
        return self.code if not self.script else None

    def kill(self) -> None:
        self.kills += 1


def test_the_conversation_ends_when_the_caller_says_so_and_the_child_is_killed_anyway():
    child = Scripted([("progress", 1), ("ok", 2), ("late", 3)])
    seen: list[Any] = []
    ending = supervise(child, lambda m: seen.append(m) or m[0] == "ok", deadline=fixed_deadline(30))
    assert ending.status is StepStatus.OK and seen == [("progress", 1), ("ok", 2)]
    assert child.kills == 1


def test_a_child_that_ends_before_its_reply_died_with_its_exit_status():
    child = Scripted([("progress", 1)], code=3)
    ending = supervise(child, lambda m: False, deadline=fixed_deadline(30))
    assert (ending.status, ending.exit_code, child.kills) == (StepStatus.DIED, 3, 1)


def test_a_closed_channel_is_a_death_too():
    child = Scripted([], closes=True)
    assert supervise(child, lambda m: False, deadline=fixed_deadline(30)).status is StepStatus.DIED


def test_the_deadline_may_move_with_what_the_child_reports_and_names_the_limit_it_hit():
    """The xla-cpu worker's case: --timeout for the whole run, a shorter --op-timeout once a timed step starts."""
    start = time.monotonic()
    step_started: list[float] = []

    def on_message(message: Any) -> bool:
        step_started.append(time.monotonic())
        return False

    def deadline() -> Deadline:
        whole = Deadline(start + 30, "--timeout 30 s")
        return Deadline(step_started[0] + 0.3, "--op-timeout 0.3 s") if step_started else whole

    child = Scripted([("start", "observe")])
    ending = supervise(child, on_message, deadline=deadline, poll_s=0.05)
    assert (ending.status, ending.limit, child.kills) == (StepStatus.TIMEOUT, "--op-timeout 0.3 s", 1)
    assert 0.3 <= ending.seconds < 10


def test_one_vocabulary_whose_report_subset_is_what_a_report_can_hold():
    assert StepStatus.values() == ("ok", "failed", "timeout", "died", "skipped", "memory", "exit")
    assert {str(s) for s in REPORTED_STEP_STATUSES} == {"ok", "failed", "timeout", "died", "skipped"}
