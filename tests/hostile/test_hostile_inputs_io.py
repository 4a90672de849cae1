"""Issue 34, points 1 and 3: inputs the output guard knows, exclusive writes, bounded reading, killable model imports.

Each hostile case runs the real command in its own process (io_cli.run_cli) and asserts the exit
code, one line on stderr and no traceback, the inputs byte-identical afterwards, and a time bound
(the subprocess timeout). The library-level checks of the same bounds follow each group.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import MODELS
from io_cli import IO_MODELS, refused_line, run_cli

from neuronprobe.errors import InputError
from neuronprobe.files import folder_lock, read_input, write_folder_exclusive, write_new

TRACE = "prompt_tokens,output_tokens\n100,20\n200,40\n150,30\n"


def _trace(tmp_path: Path, text: str = TRACE, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _fifo(tmp_path: Path, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


def _copy_model(tmp_path: Path, source: Path, name: str = "m.py") -> Path:
    target = tmp_path / name
    target.write_bytes(source.read_bytes())
    return target


# --- point 1: every input is known to the output guard ---------------------------------------


def test_buckets_decode_never_writes_over_its_model_file(tmp_path):
    model = _copy_model(tmp_path, MODELS / "decode_wide_lm.py")
    trace = _trace(tmp_path)
    line = refused_line(["buckets", str(trace), "--decode", "--model", str(model), "--json", str(model)], [model, trace])
    assert line == f"error: --json {model} is an input of this command ({model}); write the output elsewhere"


def test_buckets_decode_never_writes_over_its_step_times(tmp_path):
    steps = tmp_path / "steps.csv"
    steps.write_text("length,seconds\n100,0.01\n200,0.02\n400,0.05\n")
    trace = _trace(tmp_path)
    line = refused_line(["buckets", str(trace), "--decode", "--step-times", str(steps), "--json", str(steps)], [steps, trace])
    assert line.startswith(f"error: --json {steps} is an input of this command")


def _split_model(tmp_path: Path) -> tuple[Path, Path]:
    """The split model (a file beside it and a package root elsewhere) copied: (its folder, the package root)."""
    import shutil

    folder, root = tmp_path / "split_model", tmp_path / "split_pkgroot"
    shutil.copytree(MODELS / "split_model", folder)
    shutil.copytree(MODELS / "split_pkgroot", root)
    return folder, root


@pytest.mark.parametrize("command", ["analyze", "parity"])
def test_a_helper_the_model_imports_is_an_input_not_an_output(tmp_path, command):
    """`analyze model.py --json helper.py` used to write the report over the helper model.py imports (exit 0)."""
    folder, _ = _split_model(tmp_path)
    helper = folder / "helper.py"
    line = refused_line([command, str(folder / "model.py"), "--json", str(helper), "--no-html"], [helper, folder / "model.py"])
    assert line == f"error: --json {helper} is an input of this command ({helper.resolve()}); write the output elsewhere"
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == ["decode_shape.py", "helper.py", "model.py", "uses_package.py"]


def test_buckets_decode_never_writes_over_a_module_its_model_imports_from_path(tmp_path):
    """`buckets --decode --model m.py --path ROOT --json ROOT/pkg/mod.py`: the module the model imports from --path is an input."""
    folder, root = _split_model(tmp_path)
    shapes = root / "splitlib" / "shapes.py"
    trace = _trace(tmp_path)
    args = ["buckets", str(trace), "--decode", "--model", str(folder / "decode_shape.py"), "--path", str(root), "--json", str(shapes)]
    line = refused_line(args, [shapes, trace, folder / "decode_shape.py"])
    assert line == f"error: --json {shapes} is an input of this command ({shapes.resolve()}); write the output elsewhere"


def test_two_parity_runs_saving_into_one_folder_never_overwrite_each_other(tmp_path):
    """Two `parity --save-reference ref` at once: one reference, complete and self-consistent; the other run exit 2, nothing written."""
    model = _copy_model(tmp_path, MODELS / "parity_reference.py")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "neuronprobe", "parity", str(model), "--save-reference", "ref", "-o", f"r{i}", "--no-html"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    results = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in procs]
    for p in procs:
        for stream in (p.stdout, p.stderr):
            if stream is not None:
                stream.close()
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    lines = loser.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in loser, loser
    assert lines[0].startswith("error: --save-reference ref: ") and "nothing was written" in lines[0], lines[0]
    ref = tmp_path / "ref"
    assert sorted(p.name for p in ref.iterdir()) == ["manifest.json", "outputs.safetensors"]  # no temp files, no third file
    from neuronprobe.parity.reference import load_reference

    frozen = load_reference(ref)  # the manifest names the sha256 of the tensors beside it: one run's pair
    assert frozen.entries


def _race_writer(folder: str, tag: str, start: float, queue: multiprocessing.Queue) -> None:
    while time.time() < start:
        time.sleep(0.001)
    try:
        write_folder_exclusive(folder, [(f"{tag}.json", tag.encode()), ("_shard.json", tag.encode())], "--output-dir", taken="another run wrote here first")
        queue.put((tag, "ok"))
    except InputError as exc:
        queue.put((tag, str(exc)))


def test_two_processes_filling_one_folder_at_the_same_moment_one_wins_whole():
    """The primitive under references and shards, raced by two real processes started on the same instant."""
    import tempfile

    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "shard"
            ctx = multiprocessing.get_context("fork")
            queue: multiprocessing.Queue = ctx.Queue()
            start = time.time() + 0.5
            procs = [ctx.Process(target=_race_writer, args=(str(folder), tag, start, queue)) for tag in ("a", "b")]
            for p in procs:
                p.start()
            for p in procs:
                p.join(60)
            outcomes = dict(queue.get(timeout=10) for _ in procs)
            winners = [t for t, o in outcomes.items() if o == "ok"]
            assert len(winners) == 1, outcomes
            loser = next(t for t in outcomes if t not in winners)
            assert "another run wrote here first" in outcomes[loser] and "nothing was written" in outcomes[loser]
            assert (folder / "_shard.json").read_bytes() == winners[0].encode()  # the manifest is the winner's own
            assert sorted(p.name for p in folder.iterdir()) == sorted([f"{winners[0]}.json", "_shard.json"])


def test_write_new_never_replaces_a_file(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_text("first")
    with pytest.raises(FileExistsError):
        write_new(target, b"second")
    assert target.read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # the temporary file is gone


def test_a_second_writer_waits_for_the_folder_lock_and_then_sees_the_first_ones_files(tmp_path):
    folder = tmp_path / "ref"
    seen: list[str] = []

    def second() -> None:
        try:
            write_folder_exclusive(folder, [("manifest.json", b"2")], "--save-reference", taken="the folder already holds a reference")
            seen.append("ok")
        except InputError as exc:
            seen.append(str(exc))

    with folder_lock(folder, "--save-reference"):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.3)
        assert not seen  # waiting on the lock, not writing
        write_new(folder / "manifest.json", b"1")
    thread.join(30)
    assert seen and seen[0].startswith(f"--save-reference {folder}: the folder already holds a reference")
    assert (folder / "manifest.json").read_bytes() == b"1"


def test_a_shard_folder_that_holds_a_shard_is_refused_before_any_work(tmp_path):
    model = _copy_model(tmp_path, MODELS / "mlp.py")
    config = tmp_path / "n.toml"
    config.write_text(f'[[models]]\nmodel = "{model.name}"\n')
    shard = tmp_path / "shard"
    shard.mkdir()
    (shard / "_shard.json").write_text('{"format": 1}\n')
    line = refused_line(["nightly", str(config), "--shard", "1/1", "-o", str(shard), "--date", "2026-01-02"], [config, model, shard / "_shard.json"])
    assert line == f"error: --output-dir {shard}: the folder already holds a shard (_shard.json); give each shard run its own folder, or remove it"
    assert sorted(p.name for p in shard.iterdir()) == ["_shard.json"]


# --- point 3: bounded reading --------------------------------------------------------------


@pytest.mark.parametrize("command", ["buckets", "analyze"])
def test_a_fifo_trace_without_a_writer_is_a_bounded_wait_not_a_hang(tmp_path, command):
    fifo = _fifo(tmp_path)
    args = (
        ["buckets", str(fifo), "--decode"]
        if command == "buckets"
        else ["analyze", str(MODELS / "mlp.py"), "--decode-trace", str(fifo), "-o", str(tmp_path / "r")]
    )
    line = refused_line(args, [], env={"NEURONPROBE_PIPE_WAIT_S": "1"})
    assert line == f"error: {fifo}: the trace pipe's writer never wrote for 1 s; neuronprobe waits at most that long for a pipe (NEURONPROBE_PIPE_WAIT_S)"
    assert not (tmp_path / "r").exists()


def test_a_pipe_with_a_writer_is_read_as_it_writes(tmp_path):
    """`buckets <(cut ...) --decode`: a pipe given on purpose still works."""
    fifo = _fifo(tmp_path)

    def writer() -> None:
        time.sleep(0.5)
        with open(fifo, "w") as fh:
            fh.write(TRACE)

    thread = threading.Thread(target=writer)
    thread.start()
    ran = run_cli(["buckets", str(fifo), "--decode", "-k", "2"])
    thread.join(30)
    assert ran.code == 0, ran.stderr
    assert "decode steps" in ran.stdout or "bucket" in ran.stdout


@pytest.mark.parametrize("target", ["/dev/zero", "link"])
@pytest.mark.parametrize("where", ["decode", "lengths", "step-times", "analyze"])
def test_dev_zero_or_a_link_to_it_is_refused_before_a_byte_is_read(tmp_path, target, where):
    path = Path("/dev/zero")
    if target == "link":
        path = tmp_path / "trace.csv"
        path.symlink_to("/dev/zero")
    trace = _trace(tmp_path, name="good.csv")
    args = {
        "decode": ["buckets", str(path), "--decode"],
        "lengths": ["buckets", str(path)],
        "step-times": ["buckets", str(trace), "--decode", "--step-times", str(path)],
        "analyze": ["analyze", str(MODELS / "mlp.py"), "--decode-trace", str(path), "-o", str(tmp_path / "r")],
    }[where]
    what = {"decode": "trace", "lengths": "length", "step-times": "step times", "analyze": "trace"}[where]
    line = refused_line(args, [trace])
    assert line == f"error: {path}: is a device, not a {what} file"


def test_the_reader_caps_bytes_and_names_the_cap(tmp_path):
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(InputError, match=r"larger than 1024 bytes \(neuronprobe's cap on one input file\)"):
        read_input(big, "trace", cap=1024)
    assert read_input(big, "trace", cap=2048) == b"x" * 2048


def test_a_pipe_that_sends_too_much_is_stopped_at_the_cap(tmp_path):
    fifo = _fifo(tmp_path)

    def writer() -> None:
        try:
            with open(fifo, "wb") as fh:
                for _ in range(64):
                    fh.write(b"1\n" * 1024)
        except BrokenPipeError:
            pass

    thread = threading.Thread(target=writer)
    thread.start()
    with pytest.raises(InputError, match=r"the length pipe sent more than 4096 bytes"):
        read_input(fifo, "length", cap=4096, pipes=True, wait_s=5)
    thread.join(30)


def test_trace_caps_on_rows_values_and_steps_are_named(tmp_path, monkeypatch):
    from neuronprobe.shape_buckets import decode_trace
    from neuronprobe.shape_buckets.decode_trace import read_decode_trace

    trace = _trace(tmp_path, "prompt_tokens,output_tokens\n" + "10,5\n" * 50)
    monkeypatch.setattr(decode_trace, "MAX_TRACE_ROWS", 20)
    with pytest.raises(InputError, match=r"more than 20 requests; .*\(MAX_TRACE_ROWS\)"):
        read_decode_trace(trace)
    jsonl = _trace(tmp_path, "".join('{"prompt_tokens": 10, "output_tokens": 5}\n' for _ in range(50)), "t.jsonl")
    with pytest.raises(InputError, match=r"line 21: more than 20 requests; .*\(MAX_TRACE_ROWS\)"):
        read_decode_trace(jsonl)
    monkeypatch.setattr(decode_trace, "MAX_TRACE_ROWS", 10**6)
    monkeypatch.setattr(decode_trace, "MAX_TRACE_VALUES", 60)
    with pytest.raises(InputError, match=r"at most 60 values \(MAX_TRACE_VALUES\)"):
        read_decode_trace(trace)
    monkeypatch.setattr(decode_trace, "MAX_TRACE_VALUES", 10**6)
    monkeypatch.setattr(decode_trace, "MAX_TRACE_STEPS", 100)
    with pytest.raises(InputError, match=r"250 output tokens in all; neuronprobe replays at most 100 \(MAX_TRACE_STEPS\)"):
        read_decode_trace(trace)


def test_the_replay_of_continuous_batching_is_bounded_before_and_while_it_runs(monkeypatch):
    import numpy as np

    from neuronprobe.shape_buckets import schedule

    monkeypatch.setattr(schedule, "MAX_REPLAY_STEPS", 100)
    prompts, outputs = np.full(10, 10), np.full(10, 50)
    with pytest.raises(InputError, match=r"needs at least 245 decode steps; neuronprobe replays at most 100 \(MAX_REPLAY_STEPS\)"):
        schedule.replay(prompts, outputs, np.arange(10.0), 2, 0, step_seconds=0.01)
    monkeypatch.setattr(schedule, "MAX_REPLAY_STEPS", 260)  # arrivals far apart: the batches are not full, the walk is longer
    with pytest.raises(InputError, match=r"needs more than 260 decode steps"):
        schedule.replay(prompts, outputs, np.arange(10.0) * 100, 2, 0, step_seconds=0.01)


def test_a_trace_with_a_byte_order_mark_is_read(tmp_path):
    from neuronprobe.shape_buckets.decode_trace import read_decode_trace
    from neuronprobe.shape_buckets.reading import read_lengths

    csv = tmp_path / "bom.csv"
    csv.write_bytes(b"\xef\xbb\xbf" + TRACE.encode())
    assert read_decode_trace(csv).prompt_column == "prompt_tokens"
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + b'{"prompt_tokens": 10, "output_tokens": 5}\n')
    assert len(read_decode_trace(jsonl)) == 1
    lengths = tmp_path / "bom.txt"
    lengths.write_bytes(b"\xef\xbb\xbf5\n9\n")
    assert read_lengths(lengths).lengths.tolist() == [5, 9]


BOM = b"\xef\xbb\xbf"  # what Excel and Notepad put before UTF-8 text


def test_every_trace_reader_reads_past_a_byte_order_mark(tmp_path):
    """Issue 34.9 on every reader a serving trace, a scrape or a measurement goes through (buckets, --decode,
    --decode-trace, --serving-trace, --metrics, --compile-times, --step-times, --shapes): the mark is not part of
    the first column's or metric's name. The Azure trace puts TIMESTAMP first: kept, a mark would cost the arrivals."""
    from neuronprobe.recompiles.traffic import read_shapes
    from neuronprobe.shape_buckets.compile_bill import read_compile_times
    from neuronprobe.shape_buckets.decode_trace import read_decode_trace
    from neuronprobe.shape_buckets.metrics import read_scrape, traffic_from_scrapes
    from neuronprobe.shape_buckets.reading import read_lengths, read_step_times

    def marked(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_bytes(BOM + text.encode())
        return path

    azure = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.68,374,44\r\n2023-11-16 18:15:50.99,396,109\r\n"
    for name, text in (("azure.csv", azure), ("azure.tsv", azure.replace(",", "\t"))):
        trace = read_decode_trace(marked(name, text))
        assert (trace.prompt_column, trace.time_column) == ("ContextTokens", "TIMESTAMP") and trace.arrivals is not None
        assert trace.arrivals.tolist() == pytest.approx([0.0, 4.31])
    scrape = marked("s.prom", 'vllm_neuron:num_seqs_padding_bucket{bucket_name="decode_b8",le="+Inf"} 40.0\n')
    (decode,) = traffic_from_scrapes([read_scrape(scrape)]).decode
    assert (decode.bucket, sum(decode.counts)) == (8, 40)
    (sample,) = read_compile_times(marked("ct.csv", "graph,seconds\ndecode_b8,60\n"), 4096)
    assert (sample.name, sample.seconds) == ("decode_b8", 60.0)
    lengths, seconds = read_step_times(marked("steps.csv", "length,seconds\n100,0.01\n200,0.02\n"))
    assert lengths.tolist() == [100, 200] and seconds.tolist() == [0.01, 0.02]
    assert len(read_shapes(marked("shapes.jsonl", '{"x": [1, 8]}\n{"x": [1, 16]}\n')).signatures) == 2
    assert read_lengths(marked("L.csv", "length\n5\n9\n")).lengths.tolist() == [5, 9]
    assert read_lengths(marked("L.jsonl", '{"n": 5}\n{"n": 9}\n'), field="n").lengths.tolist() == [5, 9]


def test_a_get_model_that_loops_is_stopped_at_the_timeout_in_its_worker(tmp_path):
    model = _copy_model(tmp_path, IO_MODELS / "shape_get_model_loops.py")
    trace = _trace(tmp_path)
    line = refused_line(["buckets", str(trace), "--decode", "--model", str(model), "--timeout", "3"], [model, trace])
    # The line comes from the worker's stack dump at the kill (line 5 or 6, wherever the loop is when the dump lands).
    assert re.fullmatch(
        rf"error: {re.escape(str(model))}(:[456])?: the analysis did not finish within --timeout 3 s and was stopped; fix the loop, or raise --timeout", line
    ), line


def test_a_model_file_that_exits_zero_does_not_end_the_command_with_zero(tmp_path):
    model = _copy_model(tmp_path, IO_MODELS / "shape_exit_zero.py")
    trace = _trace(tmp_path)
    line = refused_line(["buckets", str(trace), "--decode", "--model", str(model)], [model, trace])
    assert line == f"error: {model}: the model code ended the analysis with exit code 0 (os._exit?) before it finished"


def test_the_model_file_is_never_imported_in_the_command_process(tmp_path, monkeypatch):
    """run_decode without a worker refuses a model file: the CLI's process never runs its code."""
    from neuronprobe.shape_buckets.decode_cli import DecodeOptions, run_decode

    model = _copy_model(tmp_path, IO_MODELS / "shape_exit_zero.py")
    with pytest.raises(InputError, match="a model file is imported only in a worker"):
        run_decode(DecodeOptions(trace=_trace(tmp_path), max_buckets=2, model=str(model)))


def test_many_precision_values_are_bounded_before_they_are_built(tmp_path):
    model = _copy_model(tmp_path, MODELS / "mlp.py")
    many = [a for i in range(200) for a in ("--sdk", f"2.{i}")]
    line = refused_line(["parity", str(model), *many, "-o", str(tmp_path / "r")], [model])
    assert line == "error: the precision flags ask for 200 precisions; parity runs at most 128 per command (each one runs the whole model)"
    assert not (tmp_path / "r").exists()


def test_repeated_values_of_one_axis_count_once():
    from neuronprobe.parity.precision import requested_precisions

    many = ",".join(["matmult", "all"] * 50_000)
    got = requested_precisions(auto_cast=many, auto_cast_type=",".join(["bf16", "fp16"] * 50_000))
    assert len(got) == 4


def test_json_of_a_decode_proposal_is_strict_json(tmp_path):
    trace = _trace(tmp_path)
    out = tmp_path / "p.json"
    ran = run_cli(["buckets", str(trace), "--decode", "-k", "2", "--json", str(out)])
    assert ran.code == 0, ran.stderr
    from neuronprobe.jsonio import loads_strict

    assert isinstance(loads_strict(out.read_text()), dict)
    json.loads(out.read_text())
