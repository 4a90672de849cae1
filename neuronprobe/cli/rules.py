"""``neuronprobe rules``: every rule id a finding can carry (issue 27)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from neuronprobe.cli.common import (
    app,
    guarded,
    out_console,
)
from neuronprobe.cli.options import DebugOpt


@app.command("rules")
def list_rules(
    rules: Annotated[Path | None, typer.Option("--rules", help="Also list the rules of this user rules file (JSON).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rules as JSON.")] = False,
    debug: DebugOpt = False,
) -> None:
    """List every rule id a finding can carry (and --fail-on accepts): verdict, severity, catalogue, provenance."""
    with guarded(debug):
        import json

        from neuronprobe.support import rule_set

        entries = list(rule_set(rules).registry)  # a bad --rules file is refused here (exit 2)
        if as_json:
            out_console().print_json(json.dumps([r.as_json() for r in entries]))
            return
        from neuronprobe.report.console_tables import render_rules_table

        out_console().print(render_rules_table(entries))
