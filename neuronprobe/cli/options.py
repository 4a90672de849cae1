"""Option definitions shared by the commands (one ``Annotated`` type per option, reused)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DebugOpt = Annotated[bool, typer.Option("--debug", help="Show Python tracebacks for errors.")]
PathOpt = Annotated[
    list[Path] | None,
    typer.Option("--path", help="A folder the model file imports packages from, put on sys.path after the model's own folder (repeatable)."),
]


# --stack and --support-table (issue 36): the software stack a target runs, and a TorchNeuron release's own op table.
StackOpt = Annotated[
    str | None,
    typer.Option("--stack", help="xla (torch-neuronx 2.9, trn1/inf2) or native (TorchNeuron, trn2/trn3); default from --target and --sdk."),
]
SupportTableOpt = Annotated[
    Path | None,
    typer.Option("--support-table", help="--stack native: a release's torch_api_compatibility.md (or a table from `setup native-table`)."),
]
