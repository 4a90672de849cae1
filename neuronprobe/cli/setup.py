"""``neuronprobe setup``: the environment a backend runs in (issue 10)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from neuronprobe.cli.common import (
    app,
    err_console,
    fail,
    guarded,
    out_console,
)
from neuronprobe.cli.options import DebugOpt

# --- setup (issue 10) --------------------------------------------------------------


@app.command()
def setup(
    backend: Annotated[str, typer.Argument(help="What to set up: xla-cpu, or native-table (on a Neuron host: the installed TorchNeuron's op table).")],
    path: Annotated[
        Path | None,
        typer.Option("--path", help="Where to create it (default: ${XDG_CACHE_HOME:-~/.cache}/neuronprobe/xla-cpu or .../native-table.json)."),
    ] = None,
    from_dump: Annotated[
        Path | None, typer.Option("--from-dump", help="native-table: build it from a recorded registrations dump instead of the installed SDK.")
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Create the environment a backend runs in (xla-cpu: torch 2.9 + torch-xla 2.9 from PyPI); reuses a complete one."""
    with guarded(debug):
        if backend == "native-table":
            _setup_native_table(path, from_dump)
            return
        if backend != "xla-cpu":
            raise fail(f"setup {backend!r}: the only backend with an environment to set up is xla-cpu")
        from rich.markup import escape

        from neuronprobe.backends.xla_env import default_env_path, setup_env

        target = path or default_env_path()
        from neuronprobe.files import check_outputs

        check_outputs([], [], folders=[("--path", target)])
        err = err_console()
        with err.status(f"setting up the xla-cpu environment at {escape(str(target))}") as status:
            env = setup_env(target, progress=lambda line: status.update(f"xla-cpu set-up: {escape(line[-150:])}"))
        out = out_console()
        how = "already complete, reused" if env.reused else f"created in {env.setup_seconds:.0f} s"
        out.print(f"xla-cpu environment {how}: {env.path}", markup=False)
        out.print(f"python: {env.python}", markup=False)
        out.print("versions: " + ", ".join(f"{k} {v}" for k, v in sorted(env.versions.items())), markup=False)


def _setup_native_table(path: Path | None, from_dump: Path | None) -> None:
    """Write the installed TorchNeuron release's op table (issue 36), which later native analyses use."""
    import json

    from neuronprobe.files import check_outputs, write_atomic
    from neuronprobe.support.native import installed
    from neuronprobe.support.native.table import installed_path

    out = path or installed_path()
    check_outputs([("--path", out)], [from_dump])
    probe = installed.read_dump(from_dump) if from_dump is not None else installed.probe_installed()
    doc = installed.table_from_probe(probe, str(from_dump) if from_dump is not None else "the installed torch_neuronx")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(doc, indent=1) + "\n")
    out_console().print(f"native table for {doc['release']}: {len(doc['neuron_kernel'])} overloads with a Neuron kernel, written to {out}", markup=False)
