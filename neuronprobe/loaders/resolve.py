"""Model input: a model file, or ``hf:<model_type>`` built from its config.

A model file defines ``get_model()`` and ``get_example_inputs()`` (a tuple of
positional arguments or a dict of keyword arguments), and optionally
``make_inputs(batch_size, seq_len)`` and ``sample_inputs()``. Every way a model
file can be broken becomes one :class:`ModelLoadError` naming the file and line.

``hf:`` models are built on the meta device: the architecture is analysed
without allocating its weights, so a 7B config costs no more memory than a toy.
Building one keeps the Hugging Face hub offline and transformers quiet only
while it runs (:func:`hf_build_scope`): the user's ``HF_HUB_OFFLINE`` and
transformers' log level are as they were afterwards.
"""

from __future__ import annotations

import ast
import importlib.util
import linecache
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.files import not_regular, read_input
from neuronprobe.loaders.model import LoadedModel

HF_PREFIX = "hf:"
VISION_PREFIXES = ("tv:", "timm:")
HF_DEFAULT_SEQ_LEN = 32
HF_DEFAULT_BATCH = 1
HF_OFFLINE_ENV = "HF_HUB_OFFLINE"
_HUB_CONSTANTS = "huggingface_hub.constants"
_TRUE_WORDS = frozenset({"1", "ON", "YES", "TRUE"})  # huggingface_hub's own reading of a true variable


def inputs_form(inputs: Any) -> str | None:
    """The container of a get_example_inputs() value, as :func:`train_batch` rebuilds it."""
    for form, kind in (("dict", dict), ("tuple", tuple), ("list", list)):
        if isinstance(inputs, kind):
            return form
    return "tensor" if type(inputs).__name__ == "Tensor" or hasattr(inputs, "__torch_function__") else None


def train_batch(loaded: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The batch ``train_step(model, optimizer, batch)`` gets: what get_example_inputs() returned, in its own form.

    ``args``/``kwargs`` are the inputs as the step runs them (fake or on the device). A model
    not from a file (an ``hf:`` spec) gets its keyword inputs, or its one positional input.
    """
    form = getattr(loaded, "inputs_form", None)
    if form == "dict" or (form is None and kwargs):
        return dict(kwargs)
    if form == "tuple":
        return tuple(args)
    if form == "list":
        return list(args)
    if form == "tensor" or len(args) == 1:
        return args[0]
    return tuple(args)


def split_inputs(inputs: Any, where: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Normalise example inputs into (args, kwargs): a tuple/list is positional, a dict keyword."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    import torch

    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    raise InputError(f"{where} returned {type(inputs).__name__}; return a tuple of positional arguments or a dict of keyword arguments")


def check_entry(spec: str, entry: str | None) -> None:
    """``--entry`` names a method of a model file's model (or a module's); built models run their forward."""
    if entry is not None and entry != "forward" and spec.startswith((HF_PREFIX, *VISION_PREFIXES)):
        raise InputError(f"--entry applies to model files and modules; {spec} is analysed through its forward")


def load_model(spec: str, overrides: Iterable[str] = (), entry: str | None = None, paths: Sequence[str | os.PathLike[str]] = ()) -> LoadedModel:
    """Load ``spec`` (a path to a model file, or ``hf:<model_type>``); ``entry``: the method to analyse; ``paths``: ``--path`` package roots."""
    overrides = list(overrides)
    check_entry(spec, entry)
    if spec.startswith(HF_PREFIX):
        return load_hf(spec[len(HF_PREFIX) :], overrides)
    if spec.startswith(VISION_PREFIXES):
        from neuronprobe.loaders.vision import load_vision

        if overrides:
            raise InputError("--set applies to hf: models only; tv: and timm: models are built with their defaults")
        return load_vision(spec)
    if overrides:
        raise InputError("--set applies to hf: models only; edit the model file to change its configuration")
    return load_model_file(Path(spec), entry, paths)


# --- where a model file's imports resolve ---------------------------------------------
#
# ``python model.py`` puts the file's folder first on sys.path, so a model split across files
# (``from helper import WIDTH`` with helper.py beside it) imports. neuronprobe does the same, plus
# the ``--path`` DIRs (package roots elsewhere; PYTHONPATH is on sys.path already), for as long as
# the analysis runs, and then leaves the process as it found it: sys.path as it was, the modules
# imported from those folders gone from sys.modules, and any module of the user's that a file in
# those folders shadowed (a notebook's own ``helper``) back in place.

PYTHONPATH_ENV = "PYTHONPATH"
# The largest model or helper file parsed for its imports (a Python file a person wrote is far smaller).
MAX_SOURCE_BYTES = 64 * 2**20
_MODEL_MODULE_PREFIX = "neuronprobe_model_"  # import_model_file's own name for the model file (kept, as before)
_EXTENSION_SUFFIXES = (".so", ".pyd")


def check_import_paths(paths: Sequence[str | os.PathLike[str]], flag: str = "--path") -> list[Path]:
    """Each ``--path`` DIR resolved; one that is not a folder is bad input (exit 2), before any work."""
    out: list[Path] = []
    for raw in paths:
        folder = Path(raw).expanduser()
        if not folder.is_dir():
            raise InputError(f"{flag} {raw}: no such folder; give the folder a model's packages are imported from")
        resolved = folder.resolve()
        if resolved not in out:
            out.append(resolved)
    return out


def import_roots(model_file: str | os.PathLike[str] | None, paths: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """The folders put first on sys.path for a model, in order: the model file's own folder, then each ``--path`` DIR."""
    roots = [Path(model_file).resolve().parent] if model_file is not None else []
    for folder in check_import_paths(paths):
        if folder not in roots:
            roots.append(folder)
    return roots


def local_imports(model_file: Path, roots: Sequence[Path] = ()) -> list[Path]:
    """The model file and every file it imports from its own folder tree, recursively (sorted).

    ``roots``: the package roots elsewhere its imports also resolve against (``path = [...]``, ``PYTHONPATH``),
    searched after the model's folder, as sys.path has them during the analysis.
    """
    search = [model_file.resolve().parent, *(Path(r).resolve() for r in roots)]
    seen: set[Path] = set()
    todo = [model_file.resolve()]
    while todo:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        try:
            tree = ast.parse(read_input(file, "model", cap=MAX_SOURCE_BYTES))  # bounded: a FIFO or /dev/zero is skipped, never read
        except (InputError, SyntaxError, ValueError, RecursionError):
            continue  # the analysis will say what is wrong with it; its bytes are still hashed
        for node in ast.walk(tree):
            names: list[tuple[str, int]] = []
            if isinstance(node, ast.Import):
                names = [(a.name, 0) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                names = [(base, node.level)] + [(f"{base}.{a.name}" if base else a.name, node.level) for a in node.names]
            for name, level in names:
                if level:
                    start = file.parent
                    for _ in range(level - 1):
                        start = start.parent
                    todo += [p.resolve() for p in _module_files(start, name)]
                    continue
                found = next((hit for root in search if (hit := _module_files(root, name))), [])  # the first root that has it, as import does
                todo += [p.resolve() for p in found]
    return sorted(seen)


def _module_files(start: Path, dotted: str) -> list[Path]:
    if not dotted:
        return []
    parts = dotted.split(".")
    found = []
    for i in range(1, len(parts) + 1):
        base = start.joinpath(*parts[:i])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                found.append(candidate)
    return found


def model_file_imports(spec: str | None, paths: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """The files a model file reads as code: itself and what it imports from its folder, ``--path`` and ``PYTHONPATH``.

    For the output guard: ``analyze m.py --json helper.py`` would destroy the helper the model imports.
    Empty for a named spec (``hf:``, ``tv:``, ``timm:``) or no model; installed packages are the stack's, not inputs.
    """
    if not spec or spec.startswith((HF_PREFIX, *VISION_PREFIXES)) or not spec.endswith(".py"):
        return []
    roots = [Path(p) for p in (*paths, *pythonpath_entries()) if Path(p).name not in ("site-packages", "dist-packages")]
    return local_imports(Path(spec), roots)


def pythonpath_entries(environ: dict[str, str] | None = None) -> list[str]:
    """The folders of ``PYTHONPATH`` (as this interpreter read them at start), for a worker that starts without it."""
    value = (os.environ if environ is None else environ).get(PYTHONPATH_ENV, "")
    return [str(Path(p).resolve()) for p in value.split(os.pathsep) if p.strip()]


def worker_import_paths(loaded: LoadedModel) -> dict[str, list[str]]:
    """What a worker in another interpreter (the xla-cpu worker) needs to import the model as here.

    ``paths``: the ``--path`` DIRs, put first after the model's folder. ``path_tail``: this process's
    ``PYTHONPATH``, put *after* the worker's own site-packages: the worker starts without the user's
    PYTHONPATH (a torch in it would shadow the worker's torch 2.9), yet a package root named there is found.
    """
    return {"paths": list(loaded.import_paths), "path_tail": pythonpath_entries()}


def worker_sys_path(spec: str, request: dict[str, Any]) -> None:
    """In the worker's own interpreter (which ends after one model): sys.path as :func:`model_imports` would set it, for good."""
    model_file = None if spec.startswith((HF_PREFIX, *VISION_PREFIXES)) else spec
    front = [str(r) for r in import_roots(model_file, [str(p) for p in request.get("paths", [])])]
    sys.path[:0] = [p for p in front if p not in sys.path[: len(front)]]
    sys.path.extend(str(p) for p in request.get("path_tail", []) if str(p) not in sys.path)


def _provided_names(roots: Sequence[Path]) -> dict[str, Path]:
    """Top-level module names a file in ``roots`` provides (``x.py``, ``x/__init__.py``, an extension), first root wins."""
    names: dict[str, Path] = {}
    for root in roots:
        try:
            entries = list(root.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.suffix == ".py" and entry.is_file():
                name = entry.stem
            elif entry.suffix in _EXTENSION_SUFFIXES and entry.is_file():
                name = entry.name.split(".", 1)[0]
            elif (entry / "__init__.py").is_file():
                name = entry.name
            else:
                continue
            if name.isidentifier():
                names.setdefault(name, root)
    return names


def _module_file(module: Any) -> Path | None:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return None
    try:
        return Path(file).resolve()
    except (OSError, RuntimeError):
        return None


def _under(file: Path | None, roots: Sequence[Path]) -> bool:
    return file is not None and any(file.is_relative_to(root) for root in roots)


def _never_shadowed(top: str) -> bool:
    """Modules a model folder's file must not hide: the standard library, builtins, neuronprobe."""
    return top in sys.stdlib_module_names or top in sys.builtin_module_names or top == "neuronprobe"


@contextmanager
def model_imports(model_file: str | os.PathLike[str] | None, paths: Sequence[str | os.PathLike[str]] = ()) -> Iterator[list[Path]]:
    """sys.path as ``python model.py`` has it (the model's folder first, then ``paths``) while the body runs.

    Re-entrant: inside a scope that already put the same folders first, it changes nothing (the
    analysis holds one scope from loading to its last forward; loading the file holds its own too).
    """
    roots = import_roots(model_file, paths)
    wanted = [str(r) for r in roots]
    if not roots or sys.path[: len(wanted)] == wanted:
        yield roots
        return
    saved_path = list(sys.path)
    provided = _provided_names(roots)
    hidden: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        if top in provided and not _never_shadowed(top) and not _under(_module_file(module), [provided[top]]):
            hidden[name] = sys.modules.pop(name)
    before = set(sys.modules)
    sys.path[:0] = wanted
    try:
        yield roots
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - before:
            if not name.startswith(_MODEL_MODULE_PREFIX) and _under(_module_file(sys.modules.get(name)), roots):
                del sys.modules[name]
        sys.modules.update(hidden)


# --- model files -------------------------------------------------------------


def _user_frame(exc: BaseException, path: Path) -> int | None:
    """The deepest traceback line inside the model file, if any."""
    line = None
    resolved = str(path.resolve())
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == resolved or frame.filename == str(path):
            line = frame.lineno
    return line


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line else str(path)


def _call_user(path: Path, fn: Callable[..., Any], name: str, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        raise ModelLoadError(f"{_where(path, _user_frame(exc, path))}: {name}() raised {type(exc).__name__}: {exc}") from exc


def import_model_file(path: Path, paths: Sequence[str | os.PathLike[str]] = ()) -> Any:
    """Import a model file as a module, turning every failure into ModelLoadError.

    Its folder (and ``paths``) come first on sys.path while it is imported (:func:`model_imports`).
    """
    if not path.exists():
        raise ModelLoadError(f"{path}: no such model file")
    if path.is_dir():
        raise ModelLoadError(f"{path}: is a folder; give a Python model file")
    kind = not_regular(path)
    if kind is not None:  # a FIFO would block the import until --timeout, /dev/zero would fill the memory
        raise ModelLoadError(f"{path}: is {kind}, not a Python model file")
    module_name = f"neuronprobe_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # The file may have changed since an earlier analysis in this process:
    # stale cached lines would misplace every finding's source line.
    linecache.checkcache(str(path.resolve()))
    try:
        with model_imports(path, paths):
            spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise ModelLoadError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from exc
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ModelLoadError(f"{_where(path, _user_frame(exc, path))}: importing the model file raised {type(exc).__name__}: {exc}") from exc
    return module


def load_model_file(path: Path, entry: str | None = None, paths: Sequence[str | os.PathLike[str]] = ()) -> LoadedModel:
    """A model file, analysed through ``entry`` (else the file's ``ENTRY``, else ``forward``); ``paths``: ``--path``
    package roots its imports (and get_model's) resolve against."""
    from neuronprobe.loaders import torchvision_ops

    with torchvision_ops.hooked(), model_imports(path, paths):  # the file (or its get_model) may import torchvision
        return _with_entry(_load_model_file(path, tuple(str(p) for p in check_import_paths(paths))), path, entry)


def _with_entry(loaded: LoadedModel, path: Path, entry: str | None) -> LoadedModel:
    """The model wrapped to run its entry method (loaders/entry.py): ``--entry`` first, then the file's ``ENTRY``."""
    import dataclasses

    from neuronprobe.loaders.entry import ENTRY_NAME, EntryError, entry_module

    named = loaded.entry if entry is None else entry  # the file's ENTRY, read by _load_model_file
    if named is None or named == "forward":
        return dataclasses.replace(loaded, entry=None)
    try:
        wrapped = entry_module(loaded.module, named)
    except EntryError as exc:
        if entry is not None:
            raise InputError(f"--entry {named}: {exc}") from exc
        raise ModelLoadError(f"{path}: {ENTRY_NAME} = {named!r}: {exc}") from exc
    return dataclasses.replace(loaded, module=wrapped, entry=named)


def _load_model_file(path: Path, import_paths: tuple[str, ...] = ()) -> LoadedModel:
    module = import_model_file(path, import_paths)
    missing = [n for n in ("get_model", "get_example_inputs") if not callable(getattr(module, n, None))]
    if missing:
        raise ModelLoadError(f"{path}: defines no {' or '.join(m + '()' for m in missing)}; a model file must define get_model() and get_example_inputs()")
    model = _call_user(path, module.get_model, "get_model")
    import torch

    if not isinstance(model, torch.nn.Module):
        raise ModelLoadError(f"{path}: get_model() returned {type(model).__name__}, not a torch.nn.Module")
    from neuronprobe.loaders.entry import ENTRY_NAME

    entry = getattr(module, ENTRY_NAME, None)
    if entry is not None and not isinstance(entry, str):
        raise ModelLoadError(f'{path}: {ENTRY_NAME} must name a method of the model (a string such as "generate"), not a {type(entry).__name__}')
    inputs = _call_user(path, module.get_example_inputs, "get_example_inputs")
    args, kwargs = split_inputs(inputs, f"{path}: get_example_inputs()")
    form = inputs_form(inputs)
    model.eval()
    return LoadedModel(
        name=path.stem,
        source=str(path),
        module=model,
        args=args,
        kwargs=kwargs,
        inputs_form=form,
        make_inputs=getattr(module, "make_inputs", None) if callable(getattr(module, "make_inputs", None)) else None,
        sample_inputs=getattr(module, "sample_inputs", None) if callable(getattr(module, "sample_inputs", None)) else None,
        path=path,
        train_step=_optional(module, "train_step"),
        get_optimizer=_optional(module, "get_optimizer"),
        entry=entry,
        import_paths=import_paths,
    )


def _optional(module: Any, name: str) -> Callable[..., Any] | None:
    value = getattr(module, name, None)
    return value if callable(value) else None


# --- hf: architectures ---------------------------------------------------------------


def build_hf_config(model_type: str, overrides: Iterable[str]) -> Any:
    """The config of ``model_type`` with ``overrides``, built as the loader builds it: offline, under the
    torchvision import hook (importing transformers' config classes may import torchvision)."""
    from neuronprobe.loaders.hf import build_config

    with hf_build_scope():
        return build_config(model_type, overrides)


def _env_true(value: str | None) -> bool:
    return value is not None and value.upper() in _TRUE_WORDS


@contextmanager
def hf_build_scope() -> Iterator[None]:
    """The hub offline, transformers' advice silenced and the torchvision import hook in place while
    neuronprobe builds (and analyses) an ``hf:`` model; the user's settings, and no hook, after.

    Nothing may be downloaded at run time, so ``HF_HUB_OFFLINE`` defaults to 1
    inside (a value the user set is kept). huggingface_hub reads the variable
    once, at import, into ``huggingface_hub.constants.HF_HUB_OFFLINE``: that
    constant is put back too, to its earlier value or, when the hub was first
    imported inside, to what the user's environment says.
    """
    saved_env = os.environ.get(HF_OFFLINE_ENV)
    constants: Any = sys.modules.get(_HUB_CONSTANTS)  # huggingface_hub.constants, when imported
    saved_constant = getattr(constants, "HF_HUB_OFFLINE", None) if constants is not None else None
    os.environ.setdefault(HF_OFFLINE_ENV, "1")
    if constants is not None and saved_env is None:
        constants.HF_HUB_OFFLINE = True
    verbosity = _transformers_verbosity()
    from neuronprobe.loaders import torchvision_ops

    try:
        with torchvision_ops.hooked():  # transformers' vision models import torchvision (loaders/torchvision_ops.py)
            yield
    finally:
        if saved_env is None:
            os.environ.pop(HF_OFFLINE_ENV, None)
        else:
            os.environ[HF_OFFLINE_ENV] = saved_env
        now: Any = sys.modules.get(_HUB_CONSTANTS)
        if now is not None:
            user = saved_constant if constants is not None else _env_true(saved_env or os.environ.get("TRANSFORMERS_OFFLINE"))
            now.HF_HUB_OFFLINE = user
        if verbosity is not None:
            import transformers

            transformers.logging.set_verbosity(verbosity)


def _transformers_verbosity() -> int | None:
    """transformers' log level now, or None when it is not installed."""
    try:
        import transformers
    except ImportError:
        return None
    level: int = transformers.logging.get_verbosity()
    return level


def load_hf(
    model_type: str,
    overrides: Iterable[str],
    seq_len: int = HF_DEFAULT_SEQ_LEN,
    device: str = "meta",
    shrink: bool = False,
    input_plan: dict[str, Any] | None = None,
) -> LoadedModel:
    """Build ``model_type`` from its default config on the meta device (no weights allocated).

    ``device="cpu"`` builds it with real, initialised weights (the xla-cpu worker
    runs it; ``shrink`` makes its config small enough for that). A constructor
    that raises is the config's fault: one line naming the fields to give.
    """
    with hf_build_scope():
        return _load_hf(model_type, overrides, seq_len, device, shrink, input_plan)


def _load_hf(model_type: str, overrides: Iterable[str], seq_len: int, device: str, shrink: bool, input_plan: dict[str, Any] | None) -> LoadedModel:
    from neuronprobe.loaders.hf import BuildError, InputPlan, load

    plan = InputPlan.from_json(input_plan) if input_plan else None
    try:
        return load(model_type, overrides, seq_len, HF_DEFAULT_BATCH, device=device, shrink=shrink, plan=plan)
    except BuildError as exc:
        raise InputError(
            f"hf:{model_type}: transformers cannot build the model from this config ({exc}); give the fields it needs with --set KEY=VALUE"
        ) from exc
