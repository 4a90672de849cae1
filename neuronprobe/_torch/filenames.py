"""``torch.utils._traceback.shorten_filename``: dynamo prints source paths shortened against torch's folder.

Checked on torch 2.13.0 (not used by the xla-cpu worker). Without it, a guard's
``path.py:12`` is matched only when dynamo printed the full path.
"""

from __future__ import annotations

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch.utils._traceback.shorten_filename"
DEGRADES = "recompile causes placed in files dynamo printed with a shortened path"


def shorten_filename(path: str) -> str:
    try:
        from torch.utils._traceback import shorten_filename as shorten
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    return str(shorten(path))


def self_check() -> Check:
    def probe() -> None:
        import torch

        short = shorten_filename(torch.__file__)
        if not short or not torch.__file__.endswith(short):
            raise MissingInternal(INTERNAL, DEGRADES, f"{torch.__file__} shortened to {short!r}")

    return run_check(INTERNAL, DEGRADES, probe)
