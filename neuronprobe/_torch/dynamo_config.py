"""``torch._dynamo.config`` recompile limits: raised for the recompile sweep, restored after.

Checked on torch 2.13.0 (not used by the xla-cpu worker).

Dynamo stops compiling a frame after ``recompile_limit`` (default 8) graphs and
silently runs it eagerly; the sweep compiles one graph per traffic shape, so it
raises the limit (and ``accumulated_recompile_limit``) above the number of shapes
with ``config.patch``, which puts the user's values back on exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._dynamo.config.recompile_limit"
DEGRADES = "recompile evidence beyond dynamo's default of 8 compiles per frame"
ACCUMULATED_FACTOR = 4  # the total over all frames gets room for graph breaks' extra frames


def require() -> None:
    """Raise MissingInternal when this torch's dynamo config has no recompile limits to raise."""
    import torch._dynamo

    config = torch._dynamo.config
    if not hasattr(config, "recompile_limit") or not hasattr(config, "accumulated_recompile_limit"):
        raise MissingInternal(INTERNAL, DEGRADES, "torch._dynamo.config has no recompile_limit/accumulated_recompile_limit")


@contextlib.contextmanager
def raised_recompile_limits(limit: int) -> Iterator[None]:
    """Dynamo's recompile limits at least ``limit`` inside the block; raises MissingInternal without them."""
    import torch._dynamo

    require()
    config = torch._dynamo.config
    patch: dict[str, object] = {
        "recompile_limit": max(limit, int(config.recompile_limit)),
        "accumulated_recompile_limit": max(limit * ACCUMULATED_FACTOR, int(config.accumulated_recompile_limit)),
    }
    with config.patch(patch):
        yield


def self_check() -> Check:
    def probe() -> None:
        import torch._dynamo

        before = torch._dynamo.config.recompile_limit
        with raised_recompile_limits(before + 1):
            if torch._dynamo.config.recompile_limit != before + 1:
                raise MissingInternal(INTERNAL, DEGRADES, "config.patch did not change the limit")
        if torch._dynamo.config.recompile_limit != before:
            raise MissingInternal(INTERNAL, DEGRADES, "config.patch did not restore the limit")

    return run_check(INTERNAL, DEGRADES, probe)
