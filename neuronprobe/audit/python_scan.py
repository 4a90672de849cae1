"""The Python scanner: CUDA assumptions found in the syntax tree, never in text.

Working on the tree (``ast``) keeps positions exact and never flags a comment or
a docstring. Names are resolved through the file's imports, so ``from torch
import cuda``, ``import torch.cuda as tc`` and ``import torch as th`` all reach
``torch.cuda.*``. A variable assigned from a CUDA probe (``use_cuda =
torch.cuda.is_available()``) counts as the probe where it is tested.

:func:`scan_python` returns ``(rule id, line, column)`` hits; the rule catalogue
(``data/rules.toml``) supplies messages and fixes.
"""

from __future__ import annotations

import ast
import bisect
import gc
import re
from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar

Hit = tuple[str, int, int]  # rule id, 1-based line, 1-based column

CUDA_DEVICE = re.compile(r"^cuda(:\d+)?$")
PROBES = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})
GENERIC_DEVICE_NAMES = frozenset({"xla", "neuron"})
GENERIC_PREFIXES = ("torch.accelerator", "torch_xla", "torch_neuronx")
RUNTIME_API = frozenset(
    [
        "set_device",
        "current_device",
        "device_count",
        "get_device_name",
        "get_device_properties",
        "get_device_capability",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "reset_peak_memory_stats",
        "reset_max_memory_allocated",
        "empty_cache",
        "mem_get_info",
        "memory_stats",
        "memory_summary",
        "manual_seed",
        "manual_seed_all",
        "seed",
        "seed_all",
        "Stream",
        "stream",
        "current_stream",
        "default_stream",
        "device",
        "CUDAGraph",
        "graph",
        "make_graphed_callables",
        "set_per_process_memory_fraction",
        "ipc_collect",
        "get_rng_state",
        "set_rng_state",
        "get_rng_state_all",
        "set_rng_state_all",
        "utilization",
    ]
)
AMP_NAMES = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler", "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd"})
DEVICE_AMP_CALLS = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.GradScaler", "torch.GradScaler"})
PROCESS_GROUP_INIT = frozenset({"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"})
BACKEND_KEYWORDS = frozenset({"backend", "process_group_backend", "dist_backend", "ddp_backend", "distributed_backend"})
DDP_NAMES = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.init_process_group",
    }
)
KERNEL_LIBS = frozenset({"triton", "flash_attn", "flash_attn_interface", "flash_attn_2_cuda", "xformers", "apex", "bitsandbytes", "mamba_ssm", "causal_conv1d"})
# Hugging Face's kernel hub: get_kernel("kernels-community/flash-attn3") downloads and loads a pre-compiled
# kernel for "cpu or the backend that Torch is compiled for" (https://huggingface.co/docs/kernels/main/en/api/kernels,
# get_kernel's `backend` parameter): CUDA or ROCm builds, none for Neuron.
HUB_KERNEL_CALLS = frozenset({"kernels.get_kernel"})
# torch.cuda.FloatTensor(...) and its siblings: the legacy constructors of CUDA tensors.
CUDA_TENSOR_TYPE = re.compile(r"^torch\.cuda\.[A-Z][A-Za-z]*Tensor$")
INDUCTOR_MODES = frozenset({"reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"})
GPU_COMPILE_BACKENDS = frozenset({"inductor", "cudagraphs"})
# Names a star import of these modules binds, for the rules that look for them (``from torch.cuda.amp import *``).
STAR_NAMES = frozenset({*AMP_NAMES, *PROBES, "torch.cuda.synchronize", "torch.cuda.Event", *(f"torch.cuda.{n}" for n in RUNTIME_API)})
# A compiled CUDA extension module by its name: xentropy_cuda_lib, fused_layer_norm_cuda, cuda_ext.
CUDA_MODULE = re.compile(r"(?:^|_)cuda(?:_|$)")
# Names that hold a compile setting: a string "inductor" assigned to one selects Inductor by default.
COMPILE_SETTING = re.compile(r"backend|compile", re.I)
SKIP_DECORATORS = frozenset({"pytest.mark.skipif", "unittest.skipIf", "unittest.skipUnless", "unittest.case.skipIf", "unittest.case.skipUnless"})
SKIP_CALLS = frozenset({"pytest.skip", "unittest.SkipTest", "unittest.case.SkipTest"})
IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError", "RuntimeError"})
# A variable holds a probe's answer only when assigned a boolean expression (not the device it chose).
BOOLEAN_EXPRESSIONS = (ast.Call, ast.BoolOp, ast.UnaryOp, ast.Compare)
# A file holds none of the CUDA assumptions unless it contains one of these words, so a file
# without any is not parsed at all (most of a large package). Every rule needs one of them:
# "cuda" in any case (torch.cuda, CUDA_HOME, ProfilerActivity.CUDA, "cuda:0"), nccl, cuBLAS/cuDNN,
# an inductor-only compile setting, or an import of a CUDA-only kernel library.
PREFILTER = re.compile(
    rb"(?i:cuda|nccl|cublas|cudnn)|reduce-overhead|max-autotune|inductor|cudagraphs|triton|torch\.compile\b"
    rb"|(?:import|from)\s+(?:flash_attn\w*|xformers|apex|bitsandbytes|mamba_ssm|causal_conv1d)\b|get_kernel"
)


def _bind_import(names: dict[str, str], node: ast.Import | ast.ImportFrom) -> None:
    """Record the local names an import binds (local name -> dotted module path)."""
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname:
                names[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                names[top] = top
    elif node.level == 0 and node.module:
        for a in node.names:
            if a.name != "*":
                names[a.asname or a.name] = f"{node.module}.{a.name}"
            else:
                for known in STAR_NAMES:
                    module, _, name = known.rpartition(".")
                    if module == node.module:
                        names[name] = known


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` as written (no alias resolution), or None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_cuda_device(node: ast.AST | None) -> bool:
    s = _str(node)
    if s is None and isinstance(node, ast.JoinedStr) and node.values:  # f"cuda:{local_rank}"
        s = _str(node.values[0])
        return s is not None and s.lower() == "cuda:" and len(node.values) == 2
    return s is not None and bool(CUDA_DEVICE.match(s.lower()))


def _names_nccl(text: str) -> bool:
    """'nccl', or NCCL inside a per-device backend spec: 'cuda:nccl,cpu:gloo'."""
    return text == "nccl" or ("nccl" in text.replace(":", ",").split(",") and ":" in text)


def trigger_lines(source: bytes) -> list[int]:
    """1-based numbers of the lines holding a PREFILTER word, ascending."""
    lines: list[int] = []
    line, pos = 1, 0
    for m in PREFILTER.finditer(source):
        line += source.count(b"\n", pos, m.start())
        pos = m.start()
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


class _Scanner(ast.NodeVisitor):
    def __init__(self, triggers: list[int] | None = None) -> None:
        # With the trigger lines known, a function or class whose lines hold none of them
        # (decorators included) cannot produce a finding and is not walked: most of a large file.
        self.triggers = triggers
        # Filled in source order as imports and assignments are visited (one pass over the tree:
        # a name is resolved from the imports above it, as Python itself would at run time).
        self.aliases: dict[str, str] = {}
        self.hits: dict[Hit, None] = {}
        self.consumed: set[int] = set()  # ids of "cuda" constants already part of a reported branch
        self.in_condition = 0
        self.guarded = 0  # inside try/except ImportError or an availability check
        self.probe_vars: set[str] = set()

    # -- dispatch (ast.NodeVisitor's, with the method lookup cached per node class) ----------
    _methods: ClassVar[dict[type, Callable[[_Scanner, ast.AST], None]]] = {}

    def visit(self, node: ast.AST) -> None:
        cls = type(node)
        method = self._methods.get(cls)
        if method is None:
            method = getattr(type(self), "visit_" + cls.__name__, None) or _Scanner.generic_visit
            self._methods[cls] = method
        method(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    # -- names ------------------------------------------------------------------
    def qual(self, node: ast.AST) -> str | None:
        """The dotted name with the first part resolved through the imports; None when it is not an import."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def _record_probe_variable(self, targets: list[ast.expr], value: ast.AST | None) -> None:
        """``use_cuda = torch.cuda.is_available()``: the variable now stands for the probe."""
        if isinstance(value, BOOLEAN_EXPRESSIONS) and any(isinstance(n, ast.Call) and self.qual(n.func) in PROBES for n in ast.walk(value)):
            for name in (d for d in (_dotted(t) for t in targets) if d):
                self._add_probe_name(name)

    def _add_probe_name(self, name: str) -> None:
        """A variable or helper that stands for a CUDA probe; a function using only its name must still be walked."""
        self.probe_vars.add(name)
        if not PREFILTER.search(name.encode()):
            self.triggers = None

    def has_probe(self, expr: ast.AST) -> bool:
        for n in ast.walk(expr):
            if isinstance(n, ast.Call) and self.qual(n.func) in PROBES:
                return True
            if isinstance(n, (ast.Name, ast.Attribute)) and _dotted(n) in self.probe_vars:
                return True
        return False

    def _availability_probe(self, expr: ast.AST) -> ast.AST | None:
        """The probe of CUDA being there in ``expr``, other than ``device_count()`` (which cuda-runtime-api already
        reports); None when ``expr`` also holds a probe that cuda-probe-gate reports on its own (is_bf16_supported)."""
        found: ast.AST | None = None
        for n in ast.walk(expr):
            if isinstance(n, ast.Call) and self.qual(n.func) == "torch.cuda.is_bf16_supported":
                return None
            if isinstance(n, ast.Attribute) and self.qual(n) == "torch.version.cuda":
                return None
            if found is None and isinstance(n, ast.Call) and self.qual(n.func) == "torch.cuda.is_available":
                found = n
            if found is None and isinstance(n, (ast.Name, ast.Attribute)) and _dotted(n) in self.probe_vars:
                found = n
        return found

    def _cuda_comparison(self, expr: ast.AST) -> ast.AST | None:
        """Where ``expr`` compares a device with 'cuda' (or reads ``.is_cuda``), or None."""
        for n in ast.walk(expr):
            if isinstance(n, (ast.Compare, ast.Call, ast.Attribute)) and self.compares_to_cuda(n):
                return n
        return None

    def compares_to_cuda(self, expr: ast.AST) -> bool:
        """``'cuda' in device``, ``device.type == 'cuda'``, ``str(device).startswith('cuda')``."""
        for n in ast.walk(expr):
            if isinstance(n, ast.Compare) and any(_is_cuda_device(c) for c in [n.left, *n.comparators]):
                return True
            if isinstance(n, ast.Attribute) and n.attr == "is_cuda":  # tensor.is_cuda / module.is_cuda
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "startswith" and n.args and _str(n.args[0]) == "cuda":
                return True
        return False

    def is_cpu(self, node: ast.AST | None) -> bool:
        if _str(node) == "cpu":
            return True
        return isinstance(node, ast.Call) and self.qual(node.func) == "torch.device" and bool(node.args) and _str(node.args[0]) == "cpu"

    def is_cuda(self, node: ast.AST | None) -> bool:
        if _is_cuda_device(node):
            return True
        return isinstance(node, ast.Call) and self.qual(node.func) == "torch.device" and bool(node.args) and _is_cuda_device(node.args[0])

    def is_generic(self, nodes: Iterable[ast.AST]) -> bool:
        """Mentions a Neuron/XLA device or torch.accelerator: the branch is not CUDA-only."""
        for top in nodes:
            for n in ast.walk(top):
                if _str(n) in GENERIC_DEVICE_NAMES:
                    return True
                if isinstance(n, (ast.Name, ast.Attribute)):
                    q = self.qual(n) or ""
                    if q.startswith(GENERIC_PREFIXES):
                        return True
        return False

    def hit(self, rule: str, node: ast.AST | None) -> None:
        """Record ``rule`` at ``node``'s position (every node passed here is an expression or statement)."""
        if node is not None:
            self.hits[(rule, getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1)] = None

    def consume(self, nodes: Iterable[ast.AST]) -> None:
        for top in nodes:
            for n in ast.walk(top):
                if _is_cuda_device(n):
                    self.consumed.add(id(n))

    # -- context ----------------------------------------------------------------
    def visit_condition(self, node: ast.AST) -> None:
        self.in_condition += 1
        self.visit(node)
        self.in_condition -= 1

    def visit_While(self, node: ast.While) -> None:
        self.visit_condition(node.test)
        for child in [*node.body, *node.orelse]:
            self.visit(child)

    def visit_Assert(self, node: ast.Assert) -> None:
        # ``assert torch.cuda.is_available()``, ``assert x.is_cuda``, ``assert x.device.type == "cuda"``
        where = self._availability_probe(node.test) or self._cuda_comparison(node.test)
        if where is not None and not self.is_generic([node.test]):
            self.hit("cuda-required", where)
        self.visit_condition(node.test)
        if node.msg is not None:
            self.visit(node.msg)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        for v in node.values:
            self.visit_condition(v)

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        catches = any(
            h.type is None or any((_dotted(t) or "").split(".")[-1] in IMPORT_ERRORS for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]))
            for h in node.handlers
        )
        self.guarded += catches
        for child in node.body:
            self.visit(child)
        self.guarded -= catches
        for other in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(other)

    def visit_TryStar(self, node: ast.TryStar) -> None:
        self.visit_Try(node)

    # -- branches ---------------------------------------------------------------
    def _ifexp_chain(self, node: ast.IfExp) -> tuple[list[ast.AST], list[ast.AST]]:
        tests: list[ast.AST] = []
        branches: list[ast.AST] = []
        cur: ast.AST = node
        while isinstance(cur, ast.IfExp):
            tests.append(cur.test)
            branches.append(cur.body)
            cur = cur.orelse
        branches.append(cur)
        return tests, branches

    def visit_IfExp(self, node: ast.IfExp) -> None:
        tests, branches = self._ifexp_chain(node)
        texts = [s.lower() for s in (_str(b) for b in branches) if s]
        if "nccl" in texts and "gloo" in texts:
            self.hit("nccl-backend", node)
            self.consumed.update(id(b) for b in branches if (_str(b) or "").lower() == "nccl")
        cpu = any(self.is_cpu(b) for b in branches)
        if cpu and not self.is_generic([*tests, *branches]):
            probe = any(self.has_probe(t) for t in tests)
            if any(self.is_cuda(b) for b in branches):
                self.hit("silent-cpu-fallback" if probe else "cuda-only-branch", node)
                self.consume(branches)
            elif any(self.compares_to_cuda(t) for t in tests):
                self.hit("cuda-only-branch", node)
        elif any(self.compares_to_cuda(t) for t in tests) and not self.is_generic([*tests, *branches]):
            # ``torch.float16 if str(x.device).startswith("cuda") else torch.float32``: only CUDA gets the first
            self.hit("cuda-probe-branch", next(w for w in map(self._cuda_comparison, tests) if w is not None))
        self.visit_condition(node.test)
        self.visit(node.body)
        self.visit(node.orelse)

    def _assigned_values(self, body: list[ast.stmt]) -> list[ast.AST]:
        values: list[ast.AST] = []
        for stmt in body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Return)) and stmt.value is not None:
                values.append(stmt.value)
        return values

    def visit_If(self, node: ast.If) -> None:
        before = len(self.hits)
        tests: list[ast.AST] = [node.test]
        bodies: list[list[ast.stmt]] = [node.body]
        cur = node
        while len(cur.orelse) == 1 and isinstance(cur.orelse[0], ast.If):
            cur = cur.orelse[0]
            tests.append(cur.test)
            bodies.append(cur.body)
        final_else = cur.orelse
        probe = any(self.has_probe(t) for t in tests)
        cudaish = probe or any(self.compares_to_cuda(t) for t in tests)
        branch_values = [v for b in bodies for v in self._assigned_values(b)]
        else_values = self._assigned_values(final_else)
        if (
            final_else
            and any(self.is_cuda(v) for v in branch_values)
            and any(self.is_cpu(v) for v in else_values)
            and not self.is_generic([*tests, *branch_values, *else_values])
        ):
            self.hit("silent-cpu-fallback" if probe else "cuda-only-branch", node)
            self.consume([*branch_values, *else_values])
        if cudaish and not node.orelse and self._calls_any(node.body, DDP_NAMES, {"DistributedDataParallel", "DDP", "FSDP"}):
            self.hit("cuda-only-branch", node)
        if probe and self._skips(node.body):
            self.hit("cuda-test-skip", node)
        if len(self.hits) == before and not self.is_generic(tests):
            # A condition on CUDA alone, at module level, in a helper or anywhere: what it guards
            # (bf16, TF32, a memory log, a fast path) silently does not happen on a Neuron host.
            probe_node = self._availability_probe(node.test)
            comparison = self._cuda_comparison(node.test)
            if probe_node is not None:
                self.hit("cuda-probe-branch", probe_node)
            elif comparison is not None:
                self.hit("cuda-probe-branch", comparison)
        availability = any(isinstance(n, ast.Call) and re.search(r"available|find_spec", _dotted(n.func) or "") for n in ast.walk(node.test))
        self.visit_condition(node.test)
        guard = availability or bool(node.orelse)
        self.guarded += guard
        for child in node.body:
            self.visit(child)
        self.guarded -= guard
        for child in node.orelse:
            self.visit(child)

    def _calls_any(self, body: list[ast.stmt], qualnames: frozenset[str], bare: set[str]) -> bool:
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Call) and (self.qual(n.func) in qualnames or (_dotted(n.func) or "").split(".")[-1] in bare):
                    return True
        return False

    def _skips(self, body: list[ast.stmt]) -> bool:
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Call) and (self.qual(n.func) in SKIP_CALLS or (_dotted(n.func) or "").endswith(".skipTest")):
                    return True
        return False

    # -- imports ----------------------------------------------------------------
    def _bind(self, node: ast.Import | ast.ImportFrom) -> None:
        new: dict[str, str] = {}
        _bind_import(new, node)
        self.aliases.update(new)
        # ``from torch.cuda.amp import autocast`` binds a name without a trigger word: a function
        # that uses only ``autocast`` must still be walked, so the quiet-function shortcut is off.
        if self.triggers is not None:
            for local, target in new.items():
                if target.startswith("torch.cuda.") and not PREFILTER.search(local.encode()):
                    self.triggers = None
                    break

    def visit_Import(self, node: ast.Import) -> None:
        self._bind(node)
        if not self.guarded and any(a.name.split(".")[0] in KERNEL_LIBS or CUDA_MODULE.search(a.name.split(".")[0]) for a in node.names):
            self.hit("cuda-kernel-import", node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._bind(node)
        top = (node.module or "").split(".")[0]
        if not self.guarded and node.level == 0 and (top in KERNEL_LIBS or CUDA_MODULE.search(top)):
            self.hit("cuda-kernel-import", node)

    # -- calls, names, constants ------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        q = self.qual(node.func) or ""
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        first = node.args[0] if node.args else None
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if q == "torch.cuda.synchronize":
            self.hit("cuda-synchronize", node)
        elif q == "torch.cuda.Event":
            self.hit("cuda-event-timing", node)
        elif (
            q in AMP_NAMES
            or q.startswith("torch.cuda.amp.")
            or (q in DEVICE_AMP_CALLS and (_str(first) == "cuda" or _str(kw.get("device_type")) == "cuda" or _str(kw.get("device")) == "cuda"))
        ):
            self.hit("cuda-amp", node)
        elif q.startswith(("torch.cuda.nvtx", "torch.cuda.profiler")):
            self.hit("cuda-profiler", node)
        elif q == "torch.cuda.is_bf16_supported":
            if self.in_condition:
                self.hit("cuda-probe-gate", node)
        elif q.startswith("torch.cuda.") and q.split(".")[2] in RUNTIME_API:
            self.hit("cuda-runtime-api", node)
        elif q.endswith("cpp_extension.CUDAExtension"):
            self.hit("cuda-extension", node)
        elif q == "torch.compile":
            options = kw.get("options")
            option_keys = [(_str(k) or "") for k in options.keys] if isinstance(options, ast.Dict) else []
            if (
                "backend" not in kw  # the default backend is Inductor
                or _str(kw.get("mode")) in INDUCTOR_MODES
                or _str(kw.get("backend")) in GPU_COMPILE_BACKENDS
                or any("cudagraph" in k or k.startswith("triton") for k in option_keys)
            ):
                self.hit("compile-backend", node)
        elif q in SKIP_DECORATORS and first is not None:
            condition = first
            text = _str(first)
            if (text is not None and "cuda" in text) or self.has_probe(condition):
                self.hit("cuda-test-skip", node)
        if (q in PROCESS_GROUP_INIT or attr == "init_process_group" or (isinstance(node.func, ast.Name) and node.func.id == "init_process_group")) and (
            _str(first) or ""
        ).lower() == "nccl":
            self.hit("nccl-backend", first)
        if q in HUB_KERNEL_CALLS:
            self.hit("cuda-kernel-import", node)
        for name, value in kw.items():
            text = (_str(value) or "").lower()
            if _names_nccl(text) and (name in BACKEND_KEYWORDS or name == "default") and id(value) not in self.consumed:
                self.hit("nccl-backend", value)
            elif _is_cuda_device(value) and name in ("device", "map_location", "default") and id(value) not in self.consumed:
                self.hit("hardcoded-cuda-device", value)
            elif text == "inductor" and q != "torch.compile" and (name == "default" or COMPILE_SETTING.search(name)):
                self.hit("compile-backend", value)  # --compile-backend default, compile_backend="inductor"
        if q == "torch.device" and _is_cuda_device(first) and id(first) not in self.consumed:
            self.hit("hardcoded-cuda-device", first)
            self.consumed.add(id(first))
        if attr == "to" and first is not None and _is_cuda_device(first) and id(first) not in self.consumed:
            self.hit("hardcoded-cuda-device", first)
        if attr == "cuda" and isinstance(node.func, ast.Attribute) and not (self.qual(node.func.value) or "").startswith("torch"):
            # at ``.cuda`` itself: in ``Model(\n...\n).cuda()`` the call starts lines above it
            end_line, end_col = node.func.end_lineno or node.lineno, node.func.end_col_offset or 0
            self.hits[("dot-cuda", end_line, max(end_col - len("cuda"), 0))] = None
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        q = self.qual(node)
        if q is None:
            self.generic_visit(node)
            return
        if q == "torch.version.cuda" and self.in_condition:
            self.hit("cuda-probe-gate", node)
        elif q.startswith(("torch.backends.cudnn.", "torch.backends.cuda.")):
            self.hit("cuda-backend-flags", node)
        elif q.endswith("ProfilerActivity.CUDA"):
            self.hit("cuda-profiler", node)
        elif q == "torch.distributed.Backend.NCCL":
            self.hit("nccl-backend", node)
        elif q in AMP_NAMES or q.startswith("torch.cuda.amp."):
            self.hit("cuda-amp", node)
        elif q.endswith("cpp_extension.CUDA_HOME") and self.in_condition:
            self.hit("cuda-extension-guard", node)
        elif CUDA_TENSOR_TYPE.match(q):
            self.hit("hardcoded-cuda-device", node)
        # a resolved dotted name has only names inside: nothing further to visit

    def visit_Name(self, node: ast.Name) -> None:
        q = self.aliases.get(node.id)
        if q is not None and q.endswith("cpp_extension.CUDA_HOME") and self.in_condition:
            self.hit("cuda-extension-guard", node)
        elif q is not None and (q in AMP_NAMES or q.startswith("torch.cuda.amp.")) and isinstance(node.ctx, ast.Load):
            self.hit("cuda-amp", node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value == "CUBLAS_WORKSPACE_CONFIG":
            self.hit("cuda-determinism", node)
        elif node.value == "CUDA_HOME" and self.in_condition:
            self.hit("cuda-extension-guard", node)

    def _defaults(self, args: ast.arguments) -> Iterator[tuple[str, ast.AST]]:
        positional = [*args.posonlyargs, *args.args]
        for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=False):
            yield arg.arg, default
        for kwarg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=False):
            if kw_default is not None:
                yield kwarg.arg, kw_default

    def _check_defaults(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for name, default in self._defaults(node.args):
            lname = name.lower()
            if "backend" in lname and (_str(default) or "").lower() == "nccl":
                self.hit("nccl-backend", default)
                self.consumed.add(id(default))
            elif "device" in lname and _is_cuda_device(default):
                self.hit("hardcoded-cuda-device", default)
                self.consumed.add(id(default))
            elif COMPILE_SETTING.search(name) and (_str(default) or "").lower() == "inductor":
                self.hit("compile-backend", default)

    def _quiet(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
        """No trigger word from the first decorator to the last line: nothing to find inside."""
        if self.triggers is None:
            return False
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        i = bisect.bisect_left(self.triggers, start)
        return i == len(self.triggers) or self.triggers[i] > (node.end_lineno or node.lineno)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self._quiet(node):
            return
        self._check_defaults(node)
        for decorator in node.decorator_list:  # a bare ``@torch.compile``
            if not isinstance(decorator, ast.Call) and self.qual(decorator) == "torch.compile":
                self.hit("compile-backend", decorator)
        # only a short helper's own return statements: a full walk of every function would double the tree walk
        returns = [n.value for n in node.body if isinstance(n, ast.Return) and n.value is not None] if len(node.body) <= 3 else []
        if returns and all(isinstance(v, BOOLEAN_EXPRESSIONS) and self._availability_probe(v) is not None for v in returns):
            self._add_probe_name(node.name)  # ``def has_cuda(): return torch.cuda.is_available()``: a helper probe
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if not self._quiet(node):
            self.generic_visit(node)

    def _inductor_setting(self, targets: list[ast.expr], value: ast.AST | None) -> None:
        """``compile_backend = "inductor"`` (a config default, a dataclass field): Inductor chosen by configuration."""
        if (_str(value) or "").lower() == "inductor" and any(COMPILE_SETTING.search(_dotted(t) or "") for t in targets):
            self.hit("compile-backend", value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._record_probe_variable([node.target], node.value)
        self._inductor_setting([node.target], node.value)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._record_probe_variable(node.targets, node.value)
        self._inductor_setting(node.targets, node.value)
        names = [(_dotted(t) or "").split(".")[-1].lower() for t in node.targets]
        if _is_cuda_device(node.value) and any("device" in n for n in names):
            self.hit("hardcoded-cuda-device", node.value)
            self.consumed.add(id(node.value))
        if (_str(node.value) or "").lower() == "nccl" and any("backend" in n for n in names):
            self.hit("nccl-backend", node.value)
            self.consumed.add(id(node.value))
        self.generic_visit(node)


def scan_python(source: str | bytes, filename: str = "<file>") -> list[Hit]:
    """Hits in one Python source, sorted by position. Raises SyntaxError (with a line) if it does not parse."""
    from neuronprobe.audit import xla_idioms  # issue 36: the XLA-stack idioms (reported for --stack native)

    triggers = trigger_lines(source) if isinstance(source, bytes) else None
    idioms = xla_idioms.mentions(source)
    if triggers == [] and not idioms:
        return []
    # Parsing allocates a node per token and the cyclic GC would keep re-scanning them; a tree
    # has no cycles to collect, so the collector is paused for the parse and the walk (~25% faster).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        tree = ast.parse(source, filename=filename)
        scanner = _Scanner(triggers)
        if triggers != []:
            scanner.visit(tree)
        hits = [*scanner.hits, *(xla_idioms.scan(tree) if idioms else [])]
    finally:
        if was_enabled:
            gc.enable()
    return sorted(hits, key=lambda h: (h[1], h[2], h[0]))
