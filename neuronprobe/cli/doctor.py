"""``neuronprobe doctor``: the detected Neuron environment (issue 7)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from neuronprobe.cli.common import (
    app,
    err_console,
    guarded,
    out_console,
)
from neuronprobe.cli.options import DebugOpt
from neuronprobe.errors import NeuronprobeError

# --- doctor (issue 7) --------------------------------------------------------------


@app.command()
def doctor(
    require_backend: Annotated[
        str | None,
        typer.Option("--require-backend", help="Exit 2 unless this backend is really there (neuron: the real SDK)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the detected environment as JSON.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Show the detected Neuron environment: which stack, its versions, and the backend `analyze` would use."""
    with guarded(debug):
        import dataclasses
        import json

        from neuronprobe.backends import resolve_backend
        from neuronprobe.backends.detect import detect

        detection = detect()
        chosen = None
        try:
            chosen = resolve_backend("auto", None).info
        except NeuronprobeError as exc:  # auto never raises today; say so if it ever does
            chosen = None
            err_console().print(f"warning: --backend auto: {exc}", markup=False)
        from rich.text import Text

        from neuronprobe._torch import degraded, self_checks
        from neuronprobe.backends.xla_env import find_env
        from neuronprobe.support.native.table import native_table

        xla = find_env()
        checks = self_checks()
        native = native_table()  # issue 36: which native table a --stack native analysis would use, and its age
        if as_json:
            data = dataclasses.asdict(detection) | {
                "usable": detection.usable,
                "real": detection.is_real,
                "auto_backend": dataclasses.asdict(chosen) if chosen else None,
                "xla_cpu": dataclasses.asdict(xla) | {"usable": xla.usable},
                "torch_internals": [dataclasses.asdict(c) for c in checks],
                "degraded_features": degraded(checks),
                "native_table": {
                    "origin": native.origin,
                    "where": native.where,
                    "release": native.release,
                    "dated": native.dated,
                    "age_days": native.age_days(),
                },
            }
            out_console().print_json(json.dumps(data))
        else:
            table = _doctor_table(detection, chosen)
            table.add_row("xla-cpu environment", Text(xla.summary()))  # a path: data, not markup
            table.add_row("native table", Text(native.label()))
            for check in checks:
                status = "ok     " if check.ok else "MISSING"
                value = f"{status} {check.internal}" + ("" if check.ok else f" ({check.detail}): degrades {check.degrades}")
                table.add_row("torch internal", Text(value, style="" if check.ok else "red"))
            table.add_row("degraded features", Text("; ".join(degraded(checks)) or "none"))
            out_console().print(table)
        resolve_backend("auto", require_backend)  # BackendUnavailable -> one line, exit 2


def _doctor_table(detection: Any, chosen: Any) -> Any:
    from rich.table import Table
    from rich.text import Text

    from neuronprobe.backends.detect import PACKAGES

    table = Table(title="neuronprobe doctor", title_justify="left", show_header=False, show_edge=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    stack = detection.kind_label + (" — THE TEST FAKE, not hardware" if detection.fake else "")
    table.add_row("Neuron stack", Text(stack))
    for module, dist in PACKAGES.items():
        version = detection.versions.get(dist)
        path = detection.paths.get(module)
        value = f"{version or '(version unknown)'}  {path}" if path else "not installed"
        table.add_row(dist, Text(value))
    table.add_row("Neuron devices", Text(f"{detection.devices} (/dev/neuron*)"))
    if detection.problem:
        table.add_row("live backend", Text(f"unavailable: {detection.problem}", style="red"))
        table.add_row("what to do", Text(detection.hint))
    else:
        table.add_row("live backend", Text("available" + (" (tests only: NEURONPROBE_ALLOW_FAKE_SDK=1)" if detection.fake else "")))
    if chosen is not None:
        table.add_row("--backend auto", Text(f"{chosen.name}: {chosen.detail}"))
    for note in detection.notes:
        table.add_row("note", Text(note))
    return table
