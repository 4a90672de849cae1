"""Whose code a file is (neuronprobe.usercode): the one answer capture, training, the backends and the xla worker share."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
from helpers import ROOT
from hypothesis import given
from hypothesis import strategies as st

from neuronprobe import usercode
from neuronprobe.usercode import Owner, is_library, owner, user_frame

TORCH_DIR = Path(torch.__file__).resolve().parent
PACKAGE = ROOT / "neuronprobe"
SITE = os.sep.join(["", "venv", "lib", "python3.11", "site-packages", ""])
# Any folder name that none of the rules names (not torch, transformers, torchvision, neuronprobe, site-packages).
plain_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=12).filter(
    lambda s: s not in {"torch", "torch_xla", "torch_neuronx", "neuronxcc", "libneuronxla", "transformers", "torchvision", "contextlib"}
)


def test_each_owner_of_a_frame():
    assert owner(str(TORCH_DIR / "nn" / "modules" / "linear.py")) is Owner.STACK
    assert owner(str(PACKAGE / "capture.py")) is Owner.NEURONPROBE
    assert owner(str(PACKAGE / "backends" / "xla_observe.py")) is Owner.NEURONPROBE
    assert owner(f"{SITE}transformers{os.sep}masking_utils.py") is Owner.HELPER
    assert owner(f"{SITE}transformers{os.sep}utils{os.sep}generic.py") is Owner.HELPER
    assert owner(f"{SITE}torchvision{os.sep}ops{os.sep}boxes.py") is Owner.HELPER
    assert owner("<frozen importlib._bootstrap>") is Owner.PYTHON and owner("<string>") is Owner.PYTHON
    assert owner(f"{os.sep}usr{os.sep}lib{os.sep}python3.11{os.sep}contextlib.py") is Owner.PYTHON
    # The model's own code, wherever it lives: a model file, a transformers model's modeling file,
    # a torchvision model, a notebook cell.
    assert owner(str(ROOT / "tests" / "models" / "mlp.py")) is Owner.USER
    assert owner(f"{SITE}transformers{os.sep}models{os.sep}gpt2{os.sep}modeling_gpt2.py") is Owner.USER
    assert owner(f"{SITE}torchvision{os.sep}models{os.sep}resnet.py") is Owner.USER
    assert owner("<ipython-input-3-0123456789ab>") is Owner.USER


def test_the_stack_of_another_interpreter_is_the_stack():
    # The xla-cpu worker's torch 2.9 and a Neuron host's SDK, as their tracebacks print them.
    assert owner("/root/.cache/neuronprobe/xla-cpu/lib/python3.10/site-packages/torch/nn/functional.py") is Owner.STACK
    assert owner("/opt/aws_neuronx_venv/lib/python3.10/site-packages/torch_neuronx/xla_impl/trace.py") is Owner.STACK
    assert owner("/opt/venv/lib/python3.10/dist-packages/libneuronxla/neuron_cc_wrapper.py") is Owner.STACK


@given(st.lists(plain_names, min_size=1, max_size=5), plain_names)
def test_a_file_outside_every_library_is_the_users(folders, name):
    path = os.path.join(os.sep, *folders, f"{name}.py")
    assert owner(path) is Owner.USER and not is_library(path)


@given(st.text(max_size=200))
def test_every_text_has_an_owner_and_library_means_not_the_user(text):
    assert is_library(text) == (owner(text) is not Owner.USER)


@given(st.lists(plain_names, max_size=3), plain_names)
def test_everything_under_torch_and_neuronprobe_is_library(folders, name):
    for root in (TORCH_DIR, PACKAGE):
        assert is_library(os.path.join(root, *folders, f"{name}.py"))


def _stack(*files_and_lines: tuple[str, int]) -> SimpleNamespace:
    """A chain of frames, innermost first (what user_frame reads of a live frame: file, line, caller)."""
    frame = None
    for file, line in reversed(files_and_lines):
        frame = SimpleNamespace(f_code=SimpleNamespace(co_filename=file), f_lineno=line, f_back=frame)
    assert frame is not None
    return frame


def test_user_frame_is_the_innermost_user_line_else_the_innermost_helper():
    helper = f"{SITE}transformers{os.sep}masking_utils.py"
    user = str(ROOT / "tests" / "models" / "mlp.py")
    torch_file = str(TORCH_DIR / "nn" / "functional.py")
    ours = str(PACKAGE / "backends" / "xla_observe.py")
    assert user_frame(_stack((ours, 1), (torch_file, 2), (helper, 3), (user, 4), (user, 9))) == (user, 4)
    # Only torch, neuronprobe and a helper: a host read inside masking_utils is still worth a line.
    assert user_frame(_stack((torch_file, 2), (helper, 3), (helper, 7), (ours, 5))) == (helper, 3)
    assert user_frame(_stack((ours, 1), (torch_file, 2), ("<string>", 1))) == (None, None)


def test_usercode_imports_only_the_standard_library():
    """The xla-cpu worker imports it inside torch-xla's interpreter: nothing beyond the standard
    library and neuronprobe's own stdlib-only bottom modules."""
    tree = ast.parse(Path(usercode.__file__).read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
        if not isinstance(node, ast.ImportFrom) or node.module
    }
    assert imported - {"neuronprobe"} <= set(sys.stdlib_module_names), imported
    code = "import sys, neuronprobe.usercode; print(sorted(m for m in ('torch', 'transformers', 'numpy', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
