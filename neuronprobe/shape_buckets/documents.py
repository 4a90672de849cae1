"""The versioned JSON files ``neuronprobe buckets --json`` writes, and how they are read back.

Each is ``schema_version`` and then the fields of the dataclass the command computed (the same
dataclass the report holds in ``buckets``, ``decode`` or ``serving``); :mod:`neuronprobe.typed_json`
writes and reads them. Schema 1 of each is the shape written before the files carried a version,
so such a file reads as schema 1.
"""

from __future__ import annotations

from neuronprobe.report.model import BucketProposal, DecodeProposal
from neuronprobe.report.schema.serving import ServingPlan
from neuronprobe.typed_json import DocumentSchema

BUCKETS_SCHEMA_VERSION = 1  # buckets LENGTHS --json: the prefill/length buckets
DECODE_BUCKETS_SCHEMA_VERSION = 1  # buckets --decode --json: token-generation (and batch) buckets
SERVING_PLAN_SCHEMA_VERSION = 1  # buckets --runtime vllm-neuron --json: the vLLM Neuron serving plan

BUCKETS_DOCUMENT: DocumentSchema[BucketProposal] = DocumentSchema(
    "buckets JSON", BucketProposal, BUCKETS_SCHEMA_VERSION, marker="cost_model", hint="`neuronprobe buckets LENGTHS --json`", where="buckets"
)
DECODE_BUCKETS_DOCUMENT: DocumentSchema[DecodeProposal] = DocumentSchema(
    "decode buckets JSON",
    DecodeProposal,
    DECODE_BUCKETS_SCHEMA_VERSION,
    marker="kv_overhead",
    hint="`neuronprobe buckets --decode TRACE --json`",
    where="decode",
)
SERVING_PLAN_DOCUMENT: DocumentSchema[ServingPlan] = DocumentSchema(
    "serving plan JSON",
    ServingPlan,
    SERVING_PLAN_SCHEMA_VERSION,
    marker="compile_bill",
    hint="`neuronprobe buckets --runtime vllm-neuron ... --json`",
    where="serving",
)


def buckets_json(value: BucketProposal | DecodeProposal | ServingPlan) -> str:
    """The text of the file ``buckets --json`` writes for what the command computed, with its schema version."""
    if isinstance(value, BucketProposal):
        return BUCKETS_DOCUMENT.dumps(value)
    if isinstance(value, DecodeProposal):
        return DECODE_BUCKETS_DOCUMENT.dumps(value)
    return SERVING_PLAN_DOCUMENT.dumps(value)


__all__ = [
    "BUCKETS_DOCUMENT",
    "BUCKETS_SCHEMA_VERSION",
    "DECODE_BUCKETS_DOCUMENT",
    "DECODE_BUCKETS_SCHEMA_VERSION",
    "SERVING_PLAN_DOCUMENT",
    "SERVING_PLAN_SCHEMA_VERSION",
    "buckets_json",
]
