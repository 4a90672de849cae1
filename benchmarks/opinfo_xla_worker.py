"""torch-xla's side of the OpInfo agreement benchmark: run in the torch-xla 2.9 interpreter.

For every OpInfo of ``op_db`` and each dtype of float32/bfloat16/int32/int64/bool
the op supports on CPU, the first ``--max-samples`` sample inputs (every sample
for the OpInfos of ``ALL_SAMPLES``, whose arguments decide the verdict) are moved
to the XLA device (``PJRT_DEVICE=CPU``) and the op is called once; then every
ModuleInfo of ``module_db`` (float32, up to ``MAX_MODULE_INPUTS`` inputs, in train
and eval mode where they differ): the module is built, moved and called once.
torch-xla's CPU fallbacks happen at dispatch time, so ``executed_fallback_ops()``
(cleared after the move, before the call) is known without compiling the graph:
nothing is synced.

One JSON line per sample (``op``, ``dtype``, ``index``, ``fallbacks``, ``error``)
is appended to ``--out``; keys already in the file are skipped, so a worker that
dies (a native crash) is restarted by ``opinfo_agreement.py`` where it stopped.
Before each sample its key is written to ``--current``: the orchestrator records
the sample that killed the worker as ``crashed`` (``op|dtype|*`` when the same
key kills it twice: the whole dtype of the op is then skipped). Standalone: it does not import
neuronprobe (the torch-xla environment does not have it).
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DTYPE_NAMES = ("float32", "bfloat16", "int32", "int64", "bool")
SAMPLE_TIMEOUT_S = 30


def op_label(op: Any) -> str:
    """OpInfo's name plus its variant (``max.reduction_with_dim``): the match key across torch releases."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


class SampleTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise SampleTimeout(f"sample ran over {SAMPLE_TIMEOUT_S} s")


# OpInfos whose arguments pick torch-xla's lowering or a Neuron rule (norm's p, rrelu's training,
# a pool's dilation, addmm's beta...): every sample, not the first --max-samples.
ALL_SAMPLES = (
    "norm*",
    "linalg.norm*",
    "linalg.vector_norm",
    "linalg.matrix_norm",
    "nn.functional.normalize",
    "nn.functional.rrelu",
    "nn.functional.max_pool*",
    "nn.functional.avg_pool*",
    "nn.functional.adaptive_*",
    "nn.functional.embedding_bag",
    "nn.functional.interpolate.*",
    "nn.functional.conv_transpose*",
    "nn.functional.one_hot",
    "addmm*",
    "linalg.eigh",
    "linalg.eigvalsh",
    "linalg.inv_ex",
    "multinomial",
    "randperm",
    "scatter*",
    "index_put",
    "cumprod",
    "cummin",
    "cummax",
    "copysign",
    "topk",
)
MODULE_PREFIX = "module:"
MODULE_DTYPES = ("float32",)
MAX_MODULE_INPUTS = 12  # per module and mode (train/eval): 114 ModuleInfos would otherwise give ~2,000 inputs


def sample_cap(label: str, max_samples: int) -> int | None:
    """How many samples of an OpInfo to take: all of them (None) where the arguments decide the verdict."""
    return None if any(fnmatch.fnmatchcase(label, pattern) for pattern in ALL_SAMPLES) else max_samples


def _to(value: Any, to_device: Callable[[Any], Any]) -> Any:
    from torch.utils._pytree import tree_map

    return tree_map(to_device, value)


def cases(max_samples: int, wanted: set[str]) -> Iterator[tuple[str, str, Callable[[], list[Any]], Callable[..., Callable[[], Any]]]]:
    """Every (label, dtype name, samples, prepare) the benchmark runs, in a fixed order both sides share.

    ``samples()`` builds the sample list (seeded); ``prepare(sample, to_device)`` moves a sample
    (and, for a ModuleInfo, a freshly built module) to the device and returns the call to observe,
    so that building the inputs stays outside what is recorded.
    """
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    for op in op_db:
        label = op_label(op)
        if wanted and label not in wanted:
            continue
        supported = op.supported_dtypes("cpu")
        cap = sample_cap(label, max_samples)
        for dtype_name in DTYPE_NAMES:
            dtype = getattr(torch, dtype_name)
            if dtype not in supported:
                continue

            def samples(op: Any = op, dtype: Any = dtype, cap: int | None = cap) -> list[Any]:
                torch.manual_seed(0)
                return list(itertools.islice(op.sample_inputs("cpu", dtype), cap))

            def prepare(sample: Any, to_device: Callable[[Any], Any], op: Any = op) -> Callable[[], Any]:
                moved = sample.transform(to_device)
                return lambda: op(moved.input, *moved.args, **moved.kwargs)

            yield label, dtype_name, samples, prepare
    if wanted and not any(w.startswith(MODULE_PREFIX) for w in wanted):
        return
    from torch.testing._internal.common_modules import module_db

    for info in module_db:
        for training in (True, False) if info.train_and_eval_differ else (False,):
            # By class, not info.name: torch 2.9's module_db reports nn.GRU as "GRU" by the time it is reached.
            label = f"{MODULE_PREFIX}nn.{info.module_cls.__name__}.{'train' if training else 'eval'}"
            if wanted and label not in wanted:
                continue
            for dtype_name in MODULE_DTYPES:
                dtype = getattr(torch, dtype_name)
                if dtype not in info.dtypes:
                    continue

                def module_samples(info: Any = info, dtype: Any = dtype, training: bool = training) -> list[Any]:
                    torch.manual_seed(0)
                    inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=False, training=training)
                    return list(inputs)[:MAX_MODULE_INPUTS]

                def module_prepare(sample: Any, to_device: Callable[[Any], Any], info: Any = info, training: bool = training) -> Callable[[], Any]:
                    torch.manual_seed(0)
                    ctor = sample.constructor_input
                    module = info.module_cls(*ctor.args, **ctor.kwargs)
                    module.train(training)
                    module = to_device(module)
                    fwd = sample.forward_input
                    args, kwargs = _to(fwd.args, to_device), _to(fwd.kwargs, to_device)
                    return lambda: module(*args, **kwargs)

                yield label, dtype_name, module_samples, module_prepare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--current", type=Path, required=True)
    parser.add_argument("--max-samples", type=int, default=16)
    parser.add_argument("--skip", type=Path, help="file of keys (op|dtype|index) to skip (crashed before)")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo labels, module:NAME.train|eval (default: all)")
    args = parser.parse_args()

    os.environ.setdefault("PJRT_DEVICE", "CPU")  # before torch_xla is imported (here, not at import: the harness imports this file)
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    done: set[str] = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            rec = json.loads(line)
            done.add(f"{rec['op']}|{rec['dtype']}|{rec['index']}")
    if args.skip and args.skip.exists():
        done |= set(args.skip.read_text().split())
    wanted = set(filter(None, args.ops.split(",")))
    device = torch_xla.device()
    signal.signal(signal.SIGALRM, _alarm)
    to_device = lambda t: t.to(device) if isinstance(t, (torch.Tensor, torch.nn.Module)) else t  # noqa: E731
    with args.out.open("a") as out:
        for label, dtype_name, samples, prepare in cases(args.max_samples, wanted):
            if f"{label}|{dtype_name}|*" in done or f"{label}|{dtype_name}|-1" in done:
                continue
            args.current.write_text(f"{label}|{dtype_name}|samples")
            try:
                built = samples()
            except Exception as exc:  # OpInfo itself cannot build samples under torch 2.9
                rec = {"op": label, "dtype": dtype_name, "index": -1, "fallbacks": [], "error": f"samples: {exc!r}"[:300]}
                out.write(json.dumps(rec) + "\n")
                continue
            for index, sample in enumerate(built):
                key = f"{label}|{dtype_name}|{index}"
                if key in done:
                    continue
                args.current.write_text(key)
                error = None
                met.clear_all()
                signal.alarm(SAMPLE_TIMEOUT_S)
                try:
                    call = prepare(sample, to_device)
                    met.clear_all()  # after the move: only the op (or the module's forward) is observed
                    call()
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"[:300]
                finally:
                    signal.alarm(0)
                fallbacks = sorted(set(met.executed_fallback_ops()))
                rec = {"op": label, "dtype": dtype_name, "index": index, "fallbacks": fallbacks, "error": error}
                out.write(json.dumps(rec) + "\n")
                out.flush()
    args.current.write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main())
