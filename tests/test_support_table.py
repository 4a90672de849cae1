"""The bundled support table: versioned, with provenance, and regenerable from upstream facts."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import ROOT

from neuronprobe.errors import InputError
from neuronprobe.support import TARGETS, check_target, load_table
from neuronprobe.vocabulary import Verdict


def test_table_is_versioned_with_provenance():
    table = load_table()
    assert table.version and table.torch_xla == "v2.9.0"
    assert any("xla_native_functions.yaml" in p for p in table.provenance)
    assert any("NCC_" in p for p in table.provenance)
    # torch-xla 2.9.0 lists 389 distinct lowered op entries in its yaml, and registers one Python
    # kernel on the XLA key (torch_xla/_internal/decomp_registration.py: upsample_trilinear3d).
    assert len(table.lowered) == 390
    assert "upsample_trilinear3d" in table.lowered
    assert {"addmm", "index.Tensor", "index_put_", "nonzero", "native_layer_norm"} <= table.lowered
    assert not {"_unique2", "_to_sparse", "scaled_dot_product_attention"} & table.lowered


def test_every_rule_has_a_verdict_message_and_fix():
    for rule in load_table().rules:
        assert rule.verdict in Verdict.values() and rule.verdict not in ("lowered", "decomposed")
        assert rule.message and rule.fix
        assert rule.targets <= set(TARGETS)
        assert rule.ncc_code is None or rule.ncc_code.startswith("NCC_")


def test_targets_are_checked():
    for target in ("trn1", "trn2", "inf2"):
        assert check_target(target) == target
    with pytest.raises(InputError, match="unknown Neuron target"):
        check_target("trn9")


def test_generator_reads_the_upstream_yaml_format():
    spec = importlib.util.spec_from_file_location("build_support_table", ROOT / "scripts" / "build_support_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (
        "backend: XLA\ncpp_namespace: torch_xla\nfull_codegen:\n  - abs\n  - add.Tensor  # comment\n"
        "supported:\n  - addmm\n  - abs\nautograd:\n  - einsum\nsymint:\n  - empty.memory_format\n"
    )
    sections = module.names_from_yaml(text)
    assert sections["full_codegen"] == ["abs", "add.Tensor"]
    assert sections["supported"] == ["addmm", "abs"]
    assert sections["autograd"] == ["einsum"]
    assert "backend" not in sections or sections["backend"] == []
