"""Result-cache entries are written atomically and exclusively (issue 34.1, last part).

Two nightlies sharing one cache folder (two CI jobs, two shards) commit their entries at
the same moment: each entry is complete or absent, and one run's entry is never
overwritten by the other's. The writers here are real processes started together.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest
from diff_fixtures import finding, make_report
from io_cli import bounded

from neuronprobe.errors import InputError
from neuronprobe.nightly.cache import ResultCache, Secret
from neuronprobe.nightly.run import Analysed, load_config

KEY = b"k" * 64
NIGHTS = ("2025-06-01", "2025-06-02")


def _setup(root: Path) -> None:
    (root / "shared.py").write_text("# a model both nightlies analyse\n")
    (root / "n.toml").write_text('[[models]]\nmodel = "shared.py"\n')


def _cache(root: Path, night: str) -> tuple[ResultCache, object]:
    cfg = load_config(root / "n.toml")
    cache = ResultCache(root / "cache", cfg, None, night, secret=Secret(KEY, "test"))
    model = cfg.models[0]
    from neuronprobe.file_reads import FileReads

    cache.remember(model, Analysed(model.name, report=make_report([finding("aten::nonzero", "dynamic_shape", 3)], model=night), reads=FileReads()))
    return cache, model


def _writer(root: str, night: str, barrier, results) -> None:  # a separate process
    cache, _ = _cache(Path(root), night)
    (content,) = cache.pending.values()
    barrier.wait()
    results.put((night, cache.commit(), content))


def _race(root: Path) -> tuple[dict[str, int], dict[str, str]]:
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(root), night, barrier, results)) for night in NIGHTS]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return {n: w for n, w, _ in got}, {n: c for n, _, c in got}


@pytest.mark.parametrize("round_", range(5))
def test_two_concurrent_nightlies_never_overwrite_each_others_entry(tmp_path: Path, round_: int) -> None:
    _setup(tmp_path)
    started = time.monotonic()
    written, contents = _race(tmp_path)
    assert time.monotonic() - started < 60
    assert sorted(written.values()) == [0, 1]  # one run wrote the entry, the other kept it
    (winner,) = [n for n, w in written.items() if w == 1]
    entries = [p for p in (tmp_path / "cache").iterdir()]
    assert [p.suffix for p in entries] == [".json"]  # one entry, no temporary file left behind
    assert entries[0].read_text() == contents[winner]  # the winner's bytes, whole
    reader, model = _cache(tmp_path, "2025-06-03")
    hit = reader.lookup(model)
    assert hit is not None and hit.reused_from == winner


def test_a_valid_entry_already_there_is_kept_byte_identical(tmp_path: Path) -> None:
    _setup(tmp_path)
    first, _ = _cache(tmp_path, NIGHTS[0])
    assert first.commit() == 1
    (entry,) = (tmp_path / "cache").iterdir()
    before = entry.read_bytes()
    second, _ = _cache(tmp_path, NIGHTS[1])
    assert second.commit() == 0
    assert entry.read_bytes() == before


@pytest.mark.parametrize("planted", [b"", b'{"format": 1, "body": "{}", "hmac": "00"}', b"\x00" * 100])
def test_an_entry_that_no_longer_verifies_is_replaced_whole(tmp_path: Path, planted: bytes) -> None:
    _setup(tmp_path)
    cache, model = _cache(tmp_path, NIGHTS[0])
    file = cache.folder / f"{cache.key_of(model)}.json"
    file.parent.mkdir()
    file.write_bytes(planted)
    (content,) = cache.pending.values()
    assert cache.commit() == 1
    assert file.read_text() == content
    assert [p.name for p in cache.folder.iterdir()] == [file.name]


def test_a_fifo_planted_as_an_entry_is_a_miss_and_a_refusal_not_a_hang(tmp_path: Path) -> None:
    _setup(tmp_path)
    cache, model = _cache(tmp_path, NIGHTS[0])
    file = cache.folder / f"{cache.key_of(model)}.json"
    file.parent.mkdir()
    os.mkfifo(file)
    with bounded(cpu_s=5):  # CPU seconds, and a watchdog: a FIFO opened for reading blocks without a writer
        assert cache.lookup(model) is None
        with pytest.raises(InputError, match=r"^result cache .*cannot write"):
            cache.commit()
    assert file.is_fifo()


def test_a_committed_entry_is_strict_json(tmp_path: Path) -> None:
    _setup(tmp_path)
    cache, _ = _cache(tmp_path, NIGHTS[0])
    cache.commit()
    (entry,) = (tmp_path / "cache").iterdir()
    json.loads(entry.read_text(), parse_constant=lambda c: pytest.fail(c))
