"""The architecture zoo: analyse every transformers model type that builds from its default config.

    python scripts/zoo.py --out benchmarks/zoo.jsonl [--only llama,gpt2] [--timeout 120]
    python scripts/zoo.py --table benchmarks/zoo.jsonl > benchmarks/zoo.md
    python scripts/zoo.py --out benchmarks/zoo.jsonl --replace --only $(python scripts/zoo.py --moe)
    OMP_NUM_THREADS=1 python scripts/zoo.py --tier tests/data/zoo_tier.json [--results benchmarks/zoo.jsonl]

Each model type gets small layer counts (every layer-count field of the config
and its sub-configs set to 1 with ``--set``), is analysed with the static
backend, and gives one JSON line: analysed or not and by which capture strategy,
ops, findings by verdict, seconds, and the reason when it failed. A benchmark,
not a test: the whole zoo takes about 20 minutes as two processes (each with --only half the types) on two cores.

``--tier`` writes the zoo tier ``make test`` runs (``tests/test_zoo_tier_*.py``): a few dozen types
that together exercise every family recipe and input repair of the ``hf:`` loader and every capture
strategy, chosen from the zoo results by a greedy cover (see :func:`write_tier`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

LAYER_FIELD = re.compile(r"^(num_hidden_layers|num_layers|n_layer|n_layers|encoder_layers|decoder_layers|num_decoder_layers|num_encoder_layers)$")
# A mixture-of-experts config: an expert count above one, or any moe_* field set (issue 23).
EXPERT_COUNT = re.compile(r"^(num_experts|num_local_experts|n_routed_experts|moe_num_experts|num_routed_experts)$")
MOE_PREFIX = re.compile(r"^moe_")
# A finding of the routing: its source line or module names the router, the gate, the experts or the top-k choice.
ROUTING = re.compile(r"expert|rout|gate|gating|topk|top_k", re.I)


class Timeout(BaseException):
    """A BaseException, so that the capture's own ``except Exception`` cannot take it for a strategy failure."""


def small_layer_overrides(model_type: str) -> list[str]:
    """``--set`` values that make every stack of the default config as shallow as it can be while it keeps a layer of
    every kind the full stack has (dotted for sub-configs): one layer, or as many as the config's layer-kind fields
    need (nllb-moe's MoE layer every 4th, gemma3's global attention every 6th, mllama's first cross-attention layer at
    index 3, deepseek's dense layers before the MoE ones: neuronprobe's own ``kind_depth``, issue 33)."""
    from transformers import AutoConfig, PretrainedConfig

    from neuronprobe.loaders.hf.config import kind_depth

    config = AutoConfig.for_model(model_type)
    out: list[str] = []

    def walk(cfg: Any, prefix: str, depth: int) -> None:
        for name, value in vars(cfg).items():
            if isinstance(value, PretrainedConfig) and depth < 2:
                walk(value, f"{prefix}{name}.", depth + 1)
            elif (
                LAYER_FIELD.match(name)
                and isinstance(value, int)
                and not isinstance(value, bool)
                and value > 1
                and (keep := kind_depth(cfg, value, floor=1)) < value
            ):
                out.append(f"{prefix}{name}={keep}")

    walk(config, "", 0)
    return out


def moe_fields(model_type: str) -> list[str]:
    """The config fields that make ``model_type`` a mixture of experts (dotted for sub-configs); empty when none."""
    from transformers import AutoConfig, PretrainedConfig

    out: list[str] = []

    def walk(cfg: Any, prefix: str, depth: int) -> None:
        for name, value in vars(cfg).items():
            if isinstance(value, PretrainedConfig) and depth < 2:
                walk(value, f"{prefix}{name}.", depth + 1)
            elif EXPERT_COUNT.match(name) and isinstance(value, int) and not isinstance(value, bool) and value > 1:
                out.append(f"{prefix}{name}={value}")
            elif MOE_PREFIX.match(name) and value not in (None, False, 0, "", [], {}):
                out.append(f"{prefix}{name}")

    walk(AutoConfig.for_model(model_type), "", 0)
    return out


def routing_findings(report: Any) -> list[str]:
    """The report's problem findings in the routing (by :data:`ROUTING`), as ``op verdict file:line``."""
    out = []
    for f in report.findings:
        if ROUTING.search(f.source_line or "") or ROUTING.search(f.module or ""):
            out.append(f"{f.op} {f.verdict} {os.path.basename(f.file or '?')}:{f.line}")
    return list(dict.fromkeys(out))


def analyse_one(model_type: str, timeout: int) -> dict[str, Any]:
    from neuronprobe.analysis import AnalyzeOptions, analyze_spec
    from neuronprobe.errors import InputError

    row: dict[str, Any] = {"model_type": model_type}
    start = time.perf_counter()

    def alarm(signum: int, frame: Any) -> None:
        raise Timeout(f"over {timeout} s")

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(timeout)
    from neuronprobe.loaders import torchvision_ops

    try:
        with torchvision_ops.hooked():  # a config's import may import torchvision, as under the loader
            overrides = small_layer_overrides(model_type)
            moe = moe_fields(model_type)
        row["set"] = overrides
        if moe:  # listed in the MoE table even when the analysis fails
            row["moe"] = moe
        try:
            report = analyze_spec(f"hf:{model_type}", AnalyzeOptions(backend="static", overrides=overrides))
        except InputError as exc:
            if not overrides or "--set" not in str(exc):
                raise
            # The zoo's own one-layer --set broke the model (the default config captures): use the default config.
            row["set"] = []
            report = analyze_spec(f"hf:{model_type}", AnalyzeOptions(backend="static"))
        row["strategy"] = report.capture.strategy
        row["analysed"] = report.capture.strategy != "none"
        row["partial"] = report.capture.stopped is not None  # every way stopped partway: the fullest capture is the row's
        row["ops"] = report.summary.ops_total
        row["findings"] = dict(Counter(f.verdict for f in report.findings))
        row["reason"] = "; ".join(f"{a.strategy}: {a.reason}" for a in report.capture.strategy_reasons)
        row["inputs"] = inputs_made(report)
        row["graph_breaks"] = report.summary.graph_breaks
        row["verdict"] = report.verdict
        row["recipes"] = list(report.capture.input_recipes)  # the loader's recipes and repairs that made the inputs
        row["repairs"] = list(report.capture.input_repairs)
        if "moe" in row:
            row["routing"] = routing_findings(report)
    except Timeout as exc:
        row.update(analysed=False, strategy="timeout", reason=str(exc))
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        row.update(analysed=False, strategy="error", reason=f"{type(exc).__name__}: {text}"[:400])
    finally:
        signal.alarm(0)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def inputs_made(report: Any) -> str:
    """How the capture's inputs were made when not from the config alone: recorded from a parent, or a config field filled."""
    notes = [lim.why for lim in report.not_analysed if lim.what == "model build"]
    out = []
    for note in notes:
        if m := re.search(r"inputs recorded from the parent model (hf:\S+)", note):
            out.append(f"from {m.group(1)}")
        elif m := re.search(r"the (?:capture|build) used (.*?) \(give yours", note):
            out.append(f"config {m.group(1)}")
        elif m := re.search(r"inputs remade after the forward's own errors: (.*)", note):
            out.append(f"remade {m.group(1)}")
    return "; ".join(out)


# Why a type failed, by the first reason's words: the account of the long tail in docs/concepts/capture.md.
FAILURE_CLASSES: tuple[tuple[str, str], ...] = (
    ("no forward of its own (generation or encode methods only)", r"_forward_unimplemented"),
    ("a tracking model driven through a session object, not a forward call", r"get_obj_num|frame_idx must be provided"),
    ("the default config is refused by transformers", r"ValidationError|Unrecognized model type for subconfig"),
    (
        "inputs the config does not describe",
        r"missing \d+ required (positional|keyword)|You (have|must) to specify|must specify|must be provided|cannot be `?None|is required|should be specified|are passed|language unknown|expected to be `None`",
    ),
    ("a value read or data-dependent branch no capture can follow", r"\.item\(\) cannot be called|GuardOnDataDependent|Cannot copy out of meta"),
    (
        "input layout or size the loader guessed wrong",
        r"unpack|Dimension out of range|channel|reduction dim|broadcast|is invalid for input of size|shapes cannot be multiplied|doesn't match|too many indices|split_with_sizes|Sizes of tensors must match|Expected \d+D|Input type|multiple of|must be mono|too small|Last dimension|normalized_shape|stride should not be zero|shape `|mean\(\): could not infer|permute",
    ),
    ("the default config is inconsistent at run time", r"NoneType|divisible|not set|KeyError"),
    ("over the per-type time limit", r"^over \d+ s"),
)


def failure_class(row: dict[str, Any]) -> str:
    reason = row.get("reason") or ""
    first = reason.split("; fake:")[0]
    for name, pattern in FAILURE_CLASSES:
        if re.search(pattern, first):
            return name
    return "other"


def moe_types() -> list[str]:
    """Every model type of transformers' CONFIG_MAPPING whose default config is a mixture of experts."""
    from transformers import CONFIG_MAPPING

    out = []
    for model_type in sorted(CONFIG_MAPPING.keys()):
        try:
            fields = moe_fields(model_type)
        except Exception:  # a config transformers cannot make: not listed
            continue
        if fields:
            out.append(model_type)
    return out


def run_zoo(out: Path, only: list[str] | None, timeout: int, replace: bool = False) -> None:
    """Append a row per type; ``replace``: the rows of the ``only`` types are run again and replace the old ones
    in place (the rest of the file is kept)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import CONFIG_MAPPING

    types = only or sorted(CONFIG_MAPPING.keys())
    if replace and out.exists():
        _replace_rows(out, types, timeout)
        return
    done = set()
    if out.exists():
        done = {json.loads(line)["model_type"] for line in out.read_text().splitlines() if line.strip()}
    with out.open("a", encoding="utf-8") as fh:
        for model_type in types:
            if model_type in done:
                continue
            row = analyse_one(model_type, timeout)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(f"{model_type}: {row['strategy']} {row.get('ops', '')} {row['seconds']}s {row.get('reason', '')[:120]}", file=sys.stderr)


def _replace_rows(out: Path, types: list[str], timeout: int) -> None:
    """Run ``types`` again; each new row replaces its old one where it stood (new types go at the end).
    The file is rewritten after every type, so a stopped run keeps what it finished."""
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    for model_type in types:
        row = analyse_one(model_type, timeout)
        at = next((i for i, r in enumerate(rows) if r["model_type"] == model_type), None)
        if at is None:
            rows.append(row)
        else:
            rows[at] = row
        tmp = out.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        tmp.replace(out)
        print(f"{model_type}: {row['strategy']} {row.get('ops', '')} {row['seconds']}s {row.get('routing', '')}", file=sys.stderr)


THIN_OPS = 20  # fewer captured ops than this: counted as analysed, listed as thin
UNBUILDABLE = "cannot build the model from this config"  # the loader's words for a config no device can build


def does_not_build(row: dict[str, Any]) -> bool:
    """A type whose default config transformers itself cannot build: outside the goal's denominator."""
    return row["strategy"] == "error" and UNBUILDABLE in (row.get("reason") or "")


def table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    buildable = [r for r in rows if not does_not_build(r)]
    analysed = [r for r in buildable if r["analysed"]]
    by = Counter("does not build" if does_not_build(r) else r["strategy"] for r in rows)
    try:
        from transformers import CONFIG_MAPPING

        total = f" of the {len(list(CONFIG_MAPPING.keys()))} in transformers' `CONFIG_MAPPING`"
    except ImportError:  # pragma: no cover - the table of a results file needs no transformers
        total = ""
    lines = [
        "# The transformers architecture zoo",
        "",
        f"**{len(analysed)} of {len(buildable)} buildable model types analysed "
        f"({100.0 * len(analysed) / max(1, len(buildable)):.1f}%)**; {len(rows)} types run{total}; " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())),
        "",
        "Made by `python scripts/zoo.py --out benchmarks/zoo.jsonl` then `--table`. Strategy: how the capture ran "
        "(meta, fake, cpu-shrunk), or why it did not (none: every strategy failed; error: another failure; timeout). "
        "`does not build`: transformers cannot build the type from its default config on any device; those types are "
        "listed but not counted in the percentage (the goal counts the types that build).",
        "",
    ]
    thin = [r["model_type"] for r in analysed if (r.get("ops") or 0) < THIN_OPS]
    if thin:
        lines += [
            f"{len(thin)} analysed types captured fewer than {THIN_OPS} ops (a capture that stopped early or a very small module): {', '.join(thin)}.",
            "",
        ]
    partial = [r["model_type"] for r in analysed if r.get("partial")]
    if partial:
        lines += [
            f"{len(partial)} analysed types are partial: the forward stopped partway on every strategy (at a value read or a "
            f"data-dependent branch the report names), and the row is the fullest capture: {', '.join(partial)}.",
            "",
        ]
    failed = [r for r in buildable if not r["analysed"]]
    if failed:
        lines += ["## Why the others were not analysed", "", "| class of failure | types |", "|---|---|"]
        classes = Counter(failure_class(r) for r in failed)
        lines += [f"| {name} | {count} |" for name, count in classes.most_common()]
        lines.append("")
    moe = [r for r in rows if "moe" in r]
    if moe:
        lines += [
            "## Mixture-of-experts types and their routing findings",
            "",
            f"{len(moe)} types have a mixture-of-experts default config (an expert count above one: num_experts, "
            "num_local_experts, n_routed_experts, moe_num_experts; or a moe_* field set). Routing findings: the problem "
            "findings whose source line or module names the router, gate, experts or top-k (a data-dependent `nonzero` "
            "is `dynamic_shape`; routing that sorts or histograms expert ids meets the sort and histc rules). Rerun them "
            "with `OMP_NUM_THREADS=1 python scripts/zoo.py --out benchmarks/zoo.jsonl --replace --only $(python scripts/zoo.py --moe)`.",
            "",
            "| architecture | strategy | graph breaks | verdict | routing findings |",
            "|---|---|---|---|---|",
        ]
        for r in moe:
            routing = "; ".join(r.get("routing") or []) or "-"
            lines.append(f"| {r['model_type']} | {r['strategy']} | {r.get('graph_breaks', '-')} | {r.get('verdict', '-')} | {routing} |")
        lines.append("")
    lines += [
        "Inputs: how the capture's inputs were made when not from the config alone (`from hf:X`: recorded at the parent "
        "model's call of this component; `config`: a field the default config leaves unset was given a value; `remade`: "
        "inputs rebuilt at the layout the forward's own error asked for).",
        "",
        "| architecture | analysed | strategy | inputs | ops | findings | seconds | why not / earlier strategies |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        findings = ", ".join(f"{k} {v}" for k, v in sorted(r.get("findings", {}).items())) or "-"
        reason = (r.get("reason") or "").replace("|", "/").replace("\n", " ")[:200]
        strategy = "does not build" if does_not_build(r) else r["strategy"]
        made = (r.get("inputs") or "-").replace("|", "/").replace("remade after the forward's own errors: ", "remade ")
        lines.append(
            f"| {r['model_type']} | {('partial' if r.get('partial') else 'yes') if r['analysed'] else 'no'} | {strategy} | {made} | {r.get('ops', '-')} | {findings} | {r['seconds']} | {reason} |"
        )
    return "\n".join(lines) + "\n"


# --- the zoo tier (issue 27): a few dozen types that exercise every recipe and repair of the loader ---------------

TIER_OPS_FRACTION = 0.8  # a tier type must still capture this share of the ops it captured when recorded
TIER_TYPE_COST = 2.0  # seconds a type costs the test beyond its own analysis (a process-wide import is paid once)
TIER_STRATEGIES = ("meta", "fake", "cpu-shrunk")
TIER_PROBE_TIMEOUT = 30
TIER_PER_STRATEGY = 3  # candidates for a strategy alone: the quickest of its types


def registered_inputs_rules() -> tuple[list[str], list[str]]:
    """The names of the loader's family recipes and input repairs, in their registries' order."""
    from neuronprobe.loaders import hf
    from neuronprobe.loaders.hf.inputs.families import registered as recipes

    return [r.name for r in recipes()], [r.__name__ for r in hf.REPAIRS]


def probe_recipes(model_type: str, overrides: list[str]) -> list[str]:
    """The recipes that fire when ``model_type``'s first inputs are made on the meta device (no forward run):
    a cheap pass over every type that finds the candidates worth a recorded analysis."""
    from neuronprobe.loaders import fired, hf
    from neuronprobe.loaders.resolve import HF_DEFAULT_BATCH, HF_DEFAULT_SEQ_LEN, hf_build_scope

    def alarm(signum: int, frame: Any) -> None:
        raise Timeout(f"over {TIER_PROBE_TIMEOUT} s")

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(TIER_PROBE_TIMEOUT)
    with fired.recording() as names:
        try:
            with hf_build_scope():
                hf.load(model_type, overrides, HF_DEFAULT_SEQ_LEN, HF_DEFAULT_BATCH, device="meta")
        except (Exception, Timeout):  # a type whose first inputs fail still tells which recipes fired on the way
            pass
        finally:
            signal.alarm(0)
    return list(names.recipes)


def tier_candidates(rows: list[dict[str, Any]], probe: dict[str, list[str]]) -> list[str]:
    """The analysed types worth recording: every type whose inputs were made beyond the config alone (repairs,
    parents, filled fields; the zoo's ``inputs`` column), every type the probe saw a recipe fire in, and the
    :data:`TIER_PER_STRATEGY` quickest types of each strategy other than meta (captured whole). Partial
    captures are candidates too: some families' recipes fire in no type the capture runs through."""
    analysed = [r for r in rows if r["analysed"]]
    whole = [r for r in analysed if not r.get("partial")]
    out = {r["model_type"] for r in analysed if r.get("inputs") or probe.get(r["model_type"])}
    for strategy in TIER_STRATEGIES[1:]:
        out.update(r["model_type"] for r in sorted((r for r in whole if r["strategy"] == strategy), key=lambda r: r["seconds"])[:TIER_PER_STRATEGY])
    return [r["model_type"] for r in sorted(analysed, key=lambda r: (r["seconds"], r["model_type"])) if r["model_type"] in out]  # quickest first


def greedy_tier(recorded: list[dict[str, Any]], goal: set[str]) -> list[tuple[dict[str, Any], list[str]]]:
    """A greedy weighted set cover of ``goal`` (recipe and repair names, ``strategy:<name>``): each step takes the
    recorded type that adds the most uncovered names per second of analysis; ties go to the cheaper type, then
    by name. Types captured whole come first; partial captures (the forward stopped partway on every strategy)
    only cover what no whole one does. Returns each chosen row with the names it was chosen for."""

    def names(row: dict[str, Any]) -> set[str]:
        return {*row.get("recipes", []), *row.get("repairs", []), f"strategy:{row['strategy']}"}

    left = set(goal)
    chosen: list[tuple[dict[str, Any], list[str]]] = []
    for partial in (False, True):
        pool = [r for r in recorded if r.get("analysed") and bool(r.get("partial")) == partial]
        while left:
            useful = [r for r in pool if names(r) & left]
            if not useful:
                break
            best = min(useful, key=lambda r: (-len(names(r) & left) / (r["seconds"] + TIER_TYPE_COST), r["seconds"], r["model_type"]))
            new = sorted(names(best) & left)
            chosen.append((best, new))
            left -= set(new)
            pool.remove(best)
    return chosen


def tier_json(data: dict[str, Any]) -> str:
    """The tier file: indented, with one line per type (a regenerated tier diffs by type)."""
    head = json.dumps({k: v for k, v in data.items() if k != "types"}, indent=1)
    types = ",\n".join(f"  {json.dumps(t)}" for t in data["types"])
    return f'{head[:-2]},\n "types": [\n{types}\n ]\n}}\n'


def write_tier(tier: Path, results: Path, record: Path, timeout: int, budget: float | None = None) -> None:
    """Choose the zoo tier from ``results`` and write it to ``tier``.

    1. a probe (inputs made on the meta device, no forward) over every analysed type finds where recipes fire;
    2. the candidates (:func:`tier_candidates`) are analysed as the zoo does, recording the recipes and repairs
       that made the captured inputs (``Report.capture.input_recipes`` / ``input_repairs``); the rows go to
       ``record`` (resumed when it exists: delete it after a loader change);
    3. a greedy cover (:func:`greedy_tier`) of every registered recipe and repair and every capture strategy.

    Run it in one process on one core (``OMP_NUM_THREADS=1``): about a quarter of the full zoo's time.
    ``budget``: stop recording new candidates after this many seconds (the quickest are recorded first) and
    choose from what is recorded; a later run resumes.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    previous: dict[str, dict[str, Any]] = {}  # a type's probe line, then its recorded analysis
    if record.exists():
        for line in record.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                previous.setdefault(r["model_type"], {}).update(r)
    probe: dict[str, list[str]] = {}
    recorded: list[dict[str, Any]] = []
    skipped: list[str] = []  # candidates the budget left unrecorded
    with record.open("a", encoding="utf-8") as fh:
        for r in rows:
            if r["analysed"]:
                if r["model_type"] in previous:
                    probe[r["model_type"]] = previous[r["model_type"]].get("probe", [])
                    continue
                probe[r["model_type"]] = probe_recipes(r["model_type"], r.get("set") or [])
                fh.write(json.dumps({"model_type": r["model_type"], "probe": probe[r["model_type"]]}) + "\n")
                fh.flush()
        start = time.monotonic()
        for model_type in tier_candidates(rows, probe):
            if model_type in previous and "recipes" in previous[model_type]:
                recorded.append(previous[model_type])
                continue
            if budget is not None and time.monotonic() - start > budget:
                skipped.append(model_type)
                continue
            row = analyse_one(model_type, timeout)
            row["probe"] = probe.get(model_type, [])
            recorded.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(f"{model_type}: {row['strategy']} {row.get('ops', '')} {row['seconds']}s {row.get('recipes')} {row.get('repairs')}", file=sys.stderr)
    recipes, repairs = registered_inputs_rules()
    goal = {*recipes, *repairs, *(f"strategy:{s}" for s in TIER_STRATEGIES)}
    quiet = {r["model_type"]: r["seconds"] for r in rows}  # the zoo's own seconds: a steadier cost than a busy recording's
    chosen = greedy_tier([{**r, "seconds": quiet.get(r["model_type"], r["seconds"])} for r in recorded], goal)
    covered = {n for _, new in chosen for n in new}
    data = {
        "about": "The zoo tier: hf: model types that together exercise every family recipe and input repair of the loader "
        "and every capture strategy; tests/test_zoo_tier_*.py analyse each as the zoo does. Generated, not hand-picked.",
        "command": f"OMP_NUM_THREADS=1 python scripts/zoo.py --tier {tier} --results {results}",
        "recorded_on": {"torch": torch.__version__, "transformers": transformers.__version__},
        "ops_fraction": TIER_OPS_FRACTION,
        # Registered names no analysed type fires: kept in the loader, listed here so the coverage test knows them.
        "unexercised": {"recipes": [n for n in recipes if n not in covered], "repairs": [n for n in repairs if n not in covered]},
        "candidates_not_recorded": skipped,  # left by --budget: a complete tier has none
        "types": [
            {
                "model_type": r["model_type"],
                "set": r.get("set") or [],
                "strategy": r["strategy"],
                "partial": bool(r.get("partial")),
                "ops": r["ops"],
                "min_ops": math.floor(TIER_OPS_FRACTION * r["ops"]),
                "recipes": r.get("recipes", []),
                "repairs": r.get("repairs", []),
                "chosen_for": new,
                "seconds": r["seconds"],
            }
            for r, new in sorted(chosen, key=lambda c: c[0]["model_type"])
        ],
    }
    tier.write_text(tier_json(data), encoding="utf-8")
    print(f"{tier}: {len(chosen)} types, {sum(r['seconds'] for r, _ in chosen):.0f} s recorded; unexercised {data['unexercised']}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="append one JSON line per model type (resumes where it stopped)")
    parser.add_argument("--only", help="comma-separated model types")
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--table", type=Path, help="print the markdown table of a results file")
    parser.add_argument("--replace", action="store_true", help="with --only: run these types again and replace their rows")
    parser.add_argument("--moe", action="store_true", help="print the mixture-of-experts model types, comma-separated")
    parser.add_argument("--tier", type=Path, help="write the zoo tier (tests/data/zoo_tier.json) chosen from --results")
    parser.add_argument("--results", type=Path, default=Path("benchmarks/zoo.jsonl"), help="with --tier: the zoo results to choose from")
    parser.add_argument("--budget", type=float, help="with --tier: seconds to spend recording new candidates (quickest first)")
    parser.add_argument(
        "--record",
        type=Path,
        default=Path("benchmarks/zoo_tier_record.jsonl"),
        help="with --tier: the recorded candidates (resumed; delete after a loader change)",
    )
    args = parser.parse_args()
    if args.moe:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        print(",".join(moe_types()))
        return
    if args.tier:
        write_tier(args.tier, args.results, args.record, args.timeout, args.budget)
        return
    if args.table:
        sys.stdout.write(table(args.table))
        return
    if not args.out:
        parser.error("give --out or --table")
    if args.replace and not args.only:
        parser.error("--replace needs --only")
    run_zoo(args.out, args.only.split(",") if args.only else None, args.timeout, replace=args.replace)


if __name__ == "__main__":
    main()
