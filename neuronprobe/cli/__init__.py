"""The command line: a thin edge over the library, one module per command.

It parses arguments, calls one library function, renders, writes files
atomically and maps typed errors to exit codes (0 done, 1 a requested gate
failed, 2 unusable input or configuration or the model's own code failed, 3 a bug
in neuronprobe). Nothing heavy is imported at module
level: ``neuronprobe --help`` must not import torch, pandas or matplotlib.

``common`` holds the Typer app and what every command shares (the error edge, the consoles,
atomic writes); ``options`` the option definitions reused across commands. Importing a command's
module registers it on the app, in the order ``--help`` lists them.
"""

from __future__ import annotations

import importlib

from neuronprobe.cli.common import COMMANDS, app

for _command in COMMANDS:
    importlib.import_module(f"neuronprobe.cli.{_command}")


def main() -> None:
    from neuronprobe.console_io import final_exit_code, guard_streams

    guard_streams()  # a closed or broken stdout ends quietly with its own exit code
    try:
        app()
    except SystemExit as exc:
        raise SystemExit(final_exit_code(exc.code)) from None


__all__ = ["app", "main"]
