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

# The options analyze and parity share: the model's config overrides, the report files, the training step's optimizer.
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override a config field of an hf: model, KEY=VALUE (repeatable).")]
JsonReportOpt = Annotated[Path | None, typer.Option("--json", help="Where to write the JSON report.")]
OutputDirOpt = Annotated[Path, typer.Option("--output-dir", "-o", help="Folder for the JSON and HTML reports.")]
HtmlOpt = Annotated[bool, typer.Option("--html/--no-html", help="Also write the self-contained HTML report.")]
OptimizerOpt = Annotated[str, typer.Option("--optimizer", help="--train without get_optimizer(): adamw, adam or sgd.")]
OptimizerImplOpt = Annotated[str, typer.Option("--optimizer-impl", help="--train without get_optimizer(): for-loop, foreach or fused.")]
