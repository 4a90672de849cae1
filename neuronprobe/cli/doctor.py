"""``neuronprobe doctor``: the detected Neuron environment (issue 7)."""

from __future__ import annotations

from typing import Annotated

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
            from neuronprobe.backends.detect import PACKAGES
            from neuronprobe.report.console_tables import render_doctor_table

            out_console().print(render_doctor_table(detection, chosen, PACKAGES, xla.summary(), native.label(), checks, degraded(checks)))
        resolve_backend("auto", require_backend)  # BackendUnavailable -> one line, exit 2
