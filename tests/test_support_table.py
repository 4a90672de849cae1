"""The bundled support table: versioned, with provenance, and regenerable from upstream facts."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import ROOT

from neuronprobe.errors import InputError
from neuronprobe.support import TARGETS, check_target, load_table
from neuronprobe.support.device_dtypes import device_dtypes, env_set, load_stacks
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


def test_the_device_dtype_mapping_is_data_with_its_torch_xla_source_lines():
    stacks = load_stacks()
    xla = stacks["torch-xla"]
    assert xla.targets == ("trn1", "inf2", "trn2") and xla.device_mapping is not None
    assert {(n.source, n.device, n.note) for n in xla.device_mapping} == {
        ("float64", "float32", True),
        ("int16", "int32", False),
        ("uint16", "uint32", False),
    }
    assert "v2.9.0 torch_xla/csrc/dtype.cpp:140-170 MaybeDowncastToXlaDeviceType" in xla.provenance
    assert "CheckNeuronDevice" in xla.provenance
    assert [v for v, _ in xla.environment] == ["XLA_DOWNCAST_BF16", "XLA_USE_BF16", "XLA_USE_32BIT_LONG"]
    # the native stack: what is known and what is not, and no mapping is made up for it
    native = stacks["torchneuron-native"]
    assert native.device_mapping is None and native.known and "not reachable" in native.unknown


@pytest.mark.parametrize(
    ("environ", "float64", "float32", "int64"),
    [
        ({}, "float32", "float32", "int64"),
        ({"XLA_DOWNCAST_BF16": "1"}, "float32", "bfloat16", "int64"),
        ({"XLA_USE_BF16": "true"}, "bfloat16", "bfloat16", "int64"),
        # XLA_USE_BF16 wins over XLA_DOWNCAST_BF16 for float64 (dtype.cpp checks UseBF16 first)
        ({"XLA_USE_BF16": "1", "XLA_DOWNCAST_BF16": "1"}, "bfloat16", "bfloat16", "int64"),
        ({"XLA_USE_32BIT_LONG": "2"}, "float32", "float32", "int32"),
        # GetEnvBool: "false", "0" and text that is no number are unset
        ({"XLA_USE_BF16": "0", "XLA_DOWNCAST_BF16": "false", "XLA_USE_32BIT_LONG": "yes"}, "float32", "float32", "int64"),
    ],
)
def test_environment_variables_follow_torch_xla(environ, float64, float32, int64):
    dtypes = device_dtypes("trn1", environ)
    assert (dtypes.device_dtype("float64"), dtypes.device_dtype("float32"), dtypes.device_dtype("int64")) == (float64, float32, int64)
    assert dtypes.device_dtype("int16") == "int32" and dtypes.device_dtype("bfloat16") == "bfloat16"


def test_env_set_reads_like_get_env_bool():
    assert [env_set(v) for v in (None, "", "false", "0", "true", "1", " 7", "-1", "01", "x1", "True")] == [
        False,
        False,
        False,
        False,
        True,
        True,
        True,
        True,
        True,
        False,
        False,
    ]
