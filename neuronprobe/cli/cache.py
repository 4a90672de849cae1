"""``neuronprobe cache explain``: which planned graphs miss the compile cache at cold start (issue 37.5)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from neuronprobe.cli.common import (
    app,
    fail,
    guarded,
    out_console,
)
from neuronprobe.cli.options import DebugOpt

# --- cache (issue 37.5): which planned graphs miss the compile cache at cold start -------------


@app.command()
def cache(
    action: Annotated[str, typer.Argument(help="explain: per planned graph, hit or miss and the key component that differs.")],
    plan: Annotated[Path, typer.Option("--plan", help="The planned deployment: a manifest JSON (scheme, versions, compiler args, target, graphs).")],
    cache_path: Annotated[Path, typer.Option("--cache", help="The compile cache folder, or the manifest written when it was built.")],
    debug: DebugOpt = False,
) -> None:
    """Explain compile-cache hits and misses for vLLM Neuron, TorchNeuron and XLA before a cold start."""
    with guarded(debug):
        if action != "explain":
            raise fail(f"cache {action!r}: the action is explain")
        from neuronprobe.shape_buckets.cache_explain import explain, render_explanation

        console = out_console()
        for line in render_explanation(explain(plan, cache_path)):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
