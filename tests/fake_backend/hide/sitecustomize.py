"""Test helper: make the packages named in FAKE_NEURON_HIDE (comma-separated) impossible to import.

Put this folder first on PYTHONPATH to simulate a partial Neuron stack (for
example ``FAKE_NEURON_HIDE=torch_xla``) even on a host where the real package
is installed: finding the module raises ModuleNotFoundError, as for a package
that is not there.
"""

from __future__ import annotations

import os
import sys


class HideModules:
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def install(names: set[str]) -> HideModules:
    finder = HideModules(names)
    sys.meta_path.insert(0, finder)
    return finder


_names = {n.strip() for n in os.environ.get("FAKE_NEURON_HIDE", "").split(",") if n.strip()}
if _names:
    install(_names)
