"""The order `make test` hands files to its workers (issue 35.5): the longest files first, named files that exist."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from conftest import LONGEST_FILES, longest_files_first
from helpers import ROOT, TESTS


def test_every_longest_file_is_a_test_file_of_the_suite():
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)
    for name in LONGEST_FILES:
        assert (TESTS / name).is_file(), f"tests/conftest.py LONGEST_FILES names {name}, which is not a test file: remove it or rename it"


def test_the_longest_files_come_first_in_their_order_and_each_file_keeps_its_own():
    def item(name: str, test: str) -> SimpleNamespace:
        return SimpleNamespace(path=Path("tests") / name, nodeid=f"tests/{name}::{test}")

    first, second = LONGEST_FILES[0], LONGEST_FILES[1]
    items = [item("test_a.py", "t1"), item(second, "t1"), item("test_b.py", "t1"), item(first, "t1"), item(second, "t2"), item("test_a.py", "t2")]
    longest_files_first(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        f"tests/{first}::t1",
        f"tests/{second}::t1",
        f"tests/{second}::t2",
        "tests/test_a.py::t1",
        "tests/test_b.py::t1",
        "tests/test_a.py::t2",
    ]


def test_make_test_keeps_the_collection_order():
    # pytest-xdist's loadfile sorts files by their number of tests unless told not to, which undoes the order above
    (command,) = re.findall(r"^\t\$\(VENV\)/bin/pytest .*$", (ROOT / "Makefile").read_text(), re.M)
    assert "--dist loadfile" in command and "--no-loadscope-reorder" in command, command
