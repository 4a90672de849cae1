"""The text scanners: Dockerfiles, requirement and constraint files, conda
environment files, lockfiles, pyproject.toml, CI workflow YAML and shell
scripts, each with its own rules, line by line.

These files are read as text on purpose: the facts are in single lines (a FROM,
an index URL, a pinned wheel, an env variable), and a YAML or TOML parser would
lose the line numbers a reviewer needs. Whole-line comments are never flagged.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from neuronprobe.audit.python_scan import Hit
from neuronprobe.audit.reading import split_lines

KIND_PYTHON = "python"
KIND_DOCKERFILE = "dockerfile"
KIND_REQUIREMENTS = "requirements"
KIND_LOCKFILE = "lockfile"
KIND_PYPROJECT = "pyproject"
KIND_CI = "ci"
KIND_SHELL = "shell"
KIND_CONDA = "conda"
KIND_COMPOSE = "compose"
KIND_NOTEBOOK = "notebook"  # a Jupyter notebook: its code cells are Python (audit/notebooks.py)

# Every pattern here runs on lines of files the user did not write, with Python's backtracking
# ``re``: each is written so that the attempts starting at different positions scan disjoint
# stretches of the line, or so that one anchored attempt scans it once, so matching is linear in
# the line's length (tests/test_audit_hostile.py feeds each one its worst case). The +cuXXX pin's
# run stops at the next '=' or '@' (with ``[^\s;#]*`` a line of '=' was quadratic).
CUDA_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/|test/)?cu\d+|/whl/cu\d{2,3}\b|[=@][^\s;#=@]*\+cu\d{2,3}\b")
CUDA_IMAGE = re.compile(r"(?:^|/)(?:nvidia/cuda|cuda)(?::|$)|nvcr\.io/nvidia/|[-_:.]cuda\d*(?:[-_.]|$)|cudnn", re.I)
# Packages that exist for NVIDIA GPUs only (CUDA wheels and libraries, CUDA kernel packages, NVML,
# conda's CUDA runtime), matched at the start of a requirement: one shared set that pins them puts them
# on the Neuron image too (a triton install is reported to break `import torch_xla`; bitsandbytes,
# xformers, mamba-ssm, causal-conv1d ship CUDA kernels).
CUDA_ONLY_WHEEL = re.compile(
    r"""^[ \t]*(?:name[ \t]*=[ \t]*)?["']?"""
    r"(nvidia-[a-z0-9-]+-cu\d+|triton|cupy-cuda\w*|flash[-_]attn|bitsandbytes|xformers|mamba[-_]ssm|causal[-_]conv1d"
    r"|pynvml|nvidia-ml-py|liger[-_]kernel|pytorch-cuda|cudatoolkit|cuda-toolkit)\b",
    re.I,
)
BACKEND_NAMED = re.compile(r"cuda|gpu|nvidia|cu\d{2,3}", re.I)
FROM_LINE = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(?P<image>\S+)(?:\s+AS\s+(?P<stage>\S+))?", re.I)
# (``^\s*-?\s*`` was quadratic on a line of spaces: two adjacent runs of the same characters)
IMAGE_KEY = re.compile(r"^[ \t]*(?:-[ \t]*)?(?:image|container)[ \t]*:[ \t]*['\"]?(?P<image>[^\s'\"#{}]+)", re.I)
# a [table] or [[array]] header; the name cannot hold a bracket (``\[+\s*([^\]]+?)\s*\]+`` was cubic)
TOML_TABLE = re.compile(r"^[ \t]*\[\[?([^\[\]]*)\]")
_COMMENT = re.compile(r"\s#")
# ARG NAME=value in a Dockerfile; ${NAME}, ${NAME:-default} or $NAME in a FROM
DOCKER_ARG = re.compile(r"^[ \t]*ARG[ \t]+([A-Za-z_]\w*)(?:=(\S*))?", re.I)
DOCKER_VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?::?-([^}$]*))?\}|\$([A-Za-z_]\w*)")
SETTING_PREFIXES = ("--build-arg=", "--env=", "-e=")
CUDA_ARG = re.compile(r"cuda(?::\d+)?$", re.I)  # a script argument naming the device: --device cuda:0
GPU_FLAGS = ("--gpus", "--runtime=nvidia", "--runtime nvidia")
# docker compose: a device reservation for NVIDIA GPUs (driver: nvidia, capabilities: [gpu]) or runtime: nvidia
COMPOSE_NVIDIA = re.compile(r"^[ \t]*(?:-[ \t]*)?(?:driver|runtime)[ \t]*:[ \t]*['\"]?nvidia\b", re.I)
PROJECT_DEPENDENCIES = re.compile(r"^[ \t]*dependencies[ \t]*=")
TOML_KEY = re.compile(r"^[ \t]*\w[\w-]*[ \t]*=")
CI_FILES = (".gitlab-ci.yml", "azure-pipelines.yml", "buildspec.yml", "buildspec.yaml", ".travis.yml", "bitbucket-pipelines.yml")


def classify(relpath: str) -> str | None:
    """Which scanner reads this file (a path relative to the audited root), or None to skip it."""
    p = PurePosixPath(relpath)
    name = p.name
    lower = name.lower()
    parents = [part.lower() for part in p.parts[:-1]]
    if lower.endswith(".py"):
        return KIND_PYTHON
    if lower.endswith(".ipynb"):
        return KIND_NOTEBOOK
    if lower in ("dockerfile", "containerfile") or lower.startswith("dockerfile.") or lower.endswith(".dockerfile"):
        return KIND_DOCKERFILE
    if lower in ("uv.lock", "poetry.lock", "pdm.lock", "pipfile.lock"):
        return KIND_LOCKFILE
    if lower == "pyproject.toml":
        return KIND_PYPROJECT
    if lower.endswith((".sh", ".bash")):
        return KIND_SHELL
    if lower.endswith((".yml", ".yaml")) and (lower.startswith(("docker-compose", "compose.", "compose-"))):
        return KIND_COMPOSE
    if lower in ("environment.yml", "environment.yaml", "conda.yml", "conda.yaml") or (lower.startswith("environment") and lower.endswith((".yml", ".yaml"))):
        return KIND_CONDA
    if lower.endswith((".txt", ".in")) and (lower.startswith(("requirements", "constraints", "requires")) or "requirements" in parents):
        return KIND_REQUIREMENTS
    if lower.endswith((".yml", ".yaml")):
        joined = "/".join(parents)
        if ".github/workflows" in joined or ".circleci" in parents or ".buildkite" in parents or lower in CI_FILES:
            return KIND_CI
    return None


def _code(line: str) -> str:
    """The line without a comment: '' for a whole-line comment, and ' #...' cut off."""
    if line.lstrip().startswith("#"):
        return ""
    return _COMMENT.split(line, maxsplit=1)[0]


def _col(line: str, match: re.Match[str]) -> int:
    return match.start() + 1


def _unpinned(image: str) -> bool:
    if "@sha256:" in image:
        return False
    last = image.rsplit("/", 1)[-1]
    return ":" not in last or last.endswith(":latest")


def _resolve(image: str, args: dict[str, str | None]) -> str | None:
    """The image with its ${VAR} references replaced by the ARG defaults; None when one has no value here."""
    missing = False

    def value(m: re.Match[str]) -> str:
        nonlocal missing
        name = m.group(1) or m.group(3)
        found = args.get(name)
        if found:
            return found
        if m.group(2):  # ${NAME:-default}
            return m.group(2)
        missing = True
        return ""

    resolved = DOCKER_VAR.sub(value, image)
    return None if missing else resolved


def _dockerfile(lines: list[str]) -> list[Hit]:
    hits: list[Hit] = []
    stages: set[str] = set()
    args: dict[str, str | None] = {}
    for i, raw in enumerate(lines, 1):
        line = _code(raw)
        a = DOCKER_ARG.match(line)
        if a:
            args[a.group(1)] = a.group(2).strip("\"'") if a.group(2) else None
        m = FROM_LINE.match(line)
        if m:
            image = m.group("image")
            if m.group("stage"):
                stages.add(m.group("stage").lower())
            col = m.start("image") + 1
            if "$" in image:
                # FROM ${BASE}: the image is the ARG's default, or whatever the build passes when it has none
                resolved = _resolve(image, args)
                if resolved is None:
                    hits.append(("unpinned-base-image", i, col))
                    image = ""
                else:
                    image = resolved
            if image and image.lower() != "scratch" and image.lower() not in stages:
                if CUDA_IMAGE.search(image):
                    hits.append(("cuda-base-image", i, col))
                if _unpinned(image):
                    hits.append(("unpinned-base-image", i, col))
        hits.extend(_common(i, line))
    return hits


def _cuda_setting(token: str) -> bool:
    """NAME=value where NAME names CUDA: CUDA_VISIBLE_DEVICES=0,1, --build-arg CUDA_VERSION=12.1, TORCH_CUDA_ARCH_LIST=8.0."""
    for prefix in SETTING_PREFIXES:
        if token.startswith(prefix):
            token = token[len(prefix) :]
    name, sep, _ = token.partition("=")
    return bool(sep) and name.replace("_", "").isalnum() and "CUDA" in name.upper()


def _shell(lines: list[str]) -> list[Hit]:
    """Scripts that build or run containers and launch jobs: CUDA images, CUDA settings, GPU flags, CUDA wheel indexes."""
    hits: list[Hit] = []
    for i, raw in enumerate(lines, 1):
        line = _code(raw)
        hits.extend(_common(i, line))
        pos = 0
        image_hit = setting_hit = False
        for token in line.split():  # tokens are disjoint: the checks below stay linear in the line
            col = line.find(token, pos) + 1
            pos = col - 1 + len(token)
            value = token.split("=", 1)[1] if "=" in token else token
            value = value.strip("\"'")
            if not image_hit and ":" in value and "/" in value and "://" not in value and CUDA_IMAGE.search(value):
                hits.append(("cuda-base-image", i, col))  # docker build --build-arg BASE=nvidia/cuda:12.1.0-devel, docker run nvcr.io/...
                image_hit = True
            elif not setting_hit and (_cuda_setting(token) or token.startswith(GPU_FLAGS) or CUDA_ARG.match(value)):
                hits.append(("cuda-script-setting", i, col))
                setting_hit = True
        if not setting_hit and "--runtime nvidia" in line:
            hits.append(("cuda-script-setting", i, line.find("--runtime nvidia") + 1))
    return hits


def _common(i: int, line: str) -> list[Hit]:
    hits: list[Hit] = []
    m = CUDA_INDEX.search(line)
    if m:
        hits.append(("cuda-wheel-index", i, _col(line, m)))
    k = line.find("CUBLAS_WORKSPACE_CONFIG")
    if k >= 0:
        hits.append(("cuda-determinism", i, k + 1))
    return hits


def _requirements(lines: list[str], backend_named: bool, list_items: bool = False) -> list[Hit]:
    """A requirement set; with ``list_items`` a conda environment file, whose requirements are YAML list items."""
    hits: list[Hit] = []
    wheel_seen = False
    for i, raw in enumerate(lines, 1):
        line = _code(raw)
        hits.extend(h for h in _common(i, line) if h[0] == "cuda-wheel-index")
        item = line
        if list_items:
            stripped = line.lstrip(" \t")
            item = " " * (len(line) - len(stripped) + 1) + stripped[1:] if stripped.startswith("-") else ""
        m = CUDA_ONLY_WHEEL.match(item)
        if m and not backend_named and not wheel_seen:
            hits.append(("single-lockfile", i, m.start(1) + 1))
            wheel_seen = True
    return hits


def _lockfile(lines: list[str], backend_named: bool) -> list[Hit]:
    """A lockfile is long and generated: each rule once per file, at its first line."""
    hits: list[Hit] = []
    seen: set[str] = set()
    for i, line in enumerate(lines, 1):
        found: list[Hit] = []
        m = CUDA_INDEX.search(line)
        if m:
            found.append(("cuda-wheel-index", i, _col(line, m)))
        w = CUDA_ONLY_WHEEL.match(line)
        if w and not backend_named:
            found.append(("single-lockfile", i, w.start(1) + 1))
        for hit in found:
            if hit[0] not in seen:
                seen.add(hit[0])
                hits.append(hit)
    return hits


def _pyproject(lines: list[str]) -> list[Hit]:
    """Index URLs anywhere; CUDA-only wheels only among the dependencies every install gets."""
    hits: list[Hit] = []
    table = ""
    in_dependencies = False
    wheel_seen = False
    for i, raw in enumerate(lines, 1):
        line = _code(raw)
        t = TOML_TABLE.match(line)
        if t and not line.strip().startswith(('["', "['")):
            table = t.group(1).strip().strip('"')
            in_dependencies = table == "tool.poetry.dependencies"
            continue
        if table == "project" and PROJECT_DEPENDENCIES.match(line):
            in_dependencies = True
        elif table == "project" and TOML_KEY.match(line):
            in_dependencies = False
        hits.extend(h for h in _common(i, line) if h[0] == "cuda-wheel-index")
        if in_dependencies and not wheel_seen:
            item = line.strip()
            if PROJECT_DEPENDENCIES.match(item):
                item = item.split("=", 1)[1].strip().lstrip("[").strip()
            m = CUDA_ONLY_WHEEL.match(item.lstrip("\"'"))
            if m:
                hits.append(("single-lockfile", i, line.find(m.group(1)) + 1))
                wheel_seen = True
    return hits


def _ci(lines: list[str]) -> list[Hit]:
    hits: list[Hit] = []
    for i, raw in enumerate(lines, 1):
        line = _code(raw)
        m = IMAGE_KEY.match(line)
        if m and CUDA_IMAGE.search(m.group("image")):
            hits.append(("cuda-base-image", i, m.start("image") + 1))
        hits.extend(_common(i, line))
    return hits


def _compose(lines: list[str]) -> list[Hit]:
    """docker compose files: CUDA images, and services that reserve NVIDIA GPUs."""
    hits = _ci(lines)
    for i, raw in enumerate(lines, 1):
        line = _code(raw)
        m = COMPOSE_NVIDIA.match(line)
        if m:
            hits.append(("cuda-script-setting", i, line.lower().find("nvidia") + 1))
    return hits


def scan_text(kind: str, relpath: str, text: str) -> list[Hit]:
    """Hits in one non-Python file of the given kind."""
    lines = split_lines(text)
    backend_named = bool(BACKEND_NAMED.search(PurePosixPath(relpath).name))
    if kind == KIND_DOCKERFILE:
        hits = _dockerfile(lines)
    elif kind == KIND_REQUIREMENTS:
        hits = _requirements(lines, backend_named)
    elif kind == KIND_LOCKFILE:
        hits = _lockfile(lines, backend_named)
    elif kind == KIND_PYPROJECT:
        hits = _pyproject(lines)
    elif kind == KIND_CI:
        hits = _ci(lines)
    elif kind == KIND_SHELL:
        hits = _shell(lines)
    elif kind == KIND_COMPOSE:
        hits = _compose(lines)
    elif kind == KIND_CONDA:
        hits = _requirements(lines, backend_named, list_items=True)
    else:
        hits = []
    return sorted(set(hits), key=lambda h: (h[1], h[2], h[0]))
