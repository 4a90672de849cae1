"""Every default neuronprobe applies when the user says nothing, in one place.

The CLI options, the library's option dataclasses and the nightly config all
read their defaults from here, so the three can no longer drift apart. Each
value says why it is what it is.
"""

from __future__ import annotations

# The Neuron target and backend when none is given: trn1 is the most common
# training instance; "auto" picks the real SDK, else xla-cpu, else static.
DEFAULT_TARGET = "trn1"
DEFAULT_BACKEND = "auto"

# Buckets proposed for traffic (each bucket is one compiled graph): 8 covers the
# usual 128..4096 doubling ladders; at least 1, since a proposal without a bucket serves nothing.
DEFAULT_MAX_BUCKETS = 8
MIN_MAX_BUCKETS = 1
# The most buckets a proposal solves for: 256 solve in about 2.5 s for 200,000 requests with
# 2,000 distinct lengths (benchmarks/README: one core); no Neuron deployment compiles more graphs.
MAX_BUCKETS = 256

# Distinct shapes compiled on CPU as recompile evidence: 16 catches a branch over a
# size threshold without compiling for minutes. 0 is allowed and meaningful: it
# predicts from the traffic alone, without CPU evidence (the fast CI setting).
DEFAULT_MAX_COMPILES = 16
MIN_MAX_COMPILES = 0

# The wall-clock limit of one analysis (its worker, and the live backend): long
# enough for a large hf: model with traffic evidence on a laptop, short enough for CI.
DEFAULT_TIMEOUT_S = 1800.0
# `buckets --decode --model model.py`: importing the file and building it on the meta device
# (no weights, no forward) in its worker; a minute is far more than any config needs.
DEFAULT_MODEL_SHAPE_TIMEOUT_S = 120.0
# One live-backend SDK step (an op probe, one compile): neuronx-cc rarely needs longer on one graph.
DEFAULT_OP_TIMEOUT_S = 600.0
# The most ops one capture may record (FX graph nodes, every graph of the capture together) before it is
# stopped as a runaway loop: a forward looping on fake tensors allocates nothing, so only this ends it
# before --timeout. A whole 80-layer decoder's forward is about 10^4 nodes, a training step a few times
# that. Measured on this project's 2-core CI-like host, a non-strict export records a runaway `x = x + 1`
# at about 3.5 ms of CPU per op (20,000 ops: 70 s of CPU), so 100,000 stops one in about 6 minutes of CPU,
# well inside the 30-minute --timeout. NEURONPROBE_OP_BUDGET overrides it (a larger model, or a test).
DEFAULT_OP_BUDGET = 100_000
OP_BUDGET_ENV = "NEURONPROBE_OP_BUDGET"

# The worker's resident-memory bound unless --max-memory says otherwise: this share of the machine.
DEFAULT_MEMORY_FRACTION = 0.75
# Below this the worker cannot even import torch (about 250 MB resident): such a bound is refused.
MIN_MEMORY_BYTES = 256 * 2**20

# How a length maps to a bucket edge: "inclusive" (first edge >= length) is what most
# padding code does; NxD Inference's runtime uses "strict".
DEFAULT_FIT = "inclusive"
# Cost units one compile-second is worth when --compile-seconds chooses k.
DEFAULT_COMPILE_WEIGHT = 1.0

# Decode buckets (issue 24). The serving stack whose fit rule is used when none is named:
# NxD Inference, which vllm-neuron also runs underneath.
DEFAULT_DECODE_RUNTIME = "nxdi"
# Decode steps per second per sequence when a continuous-batching replay has neither
# --tokens-per-second nor --step-times: an assumption stated in every report that uses it
# (a 7-8B model at bf16 on one NeuronCore-v2 reads ~15 GB per step at 820/2 GB/s: ~25 steps/s).
DEFAULT_DECODE_TOKENS_PER_SECOND = 25.0
# The most compiled decode graphs (batch buckets x sequence buckets) when --max-graphs is not given.
DEFAULT_DECODE_MAX_GRAPHS = 16
# Requests in a replay before the per-step timeline stored in the report is thinned to this many points.
DECODE_TIMELINE_POINTS = 1500

# Nights shown in the nightly trend plots and history tables: a month of nightlies.
DEFAULT_HISTORY_NIGHTS = 30

# The longest time limit an option takes (--timeout, --op-timeout, a nightly's timeouts):
# a week. Longer is not a limit, and values near 1e9 s overflow the timers that enforce it.
MAX_SECONDS = 7 * 24 * 3600.0
# --train's epoch: each batch is one entry of the epoch the recompile prediction walks, so
# the number of batches (dataset size / batch size) is bounded; ten million is past any
# real epoch (ImageNet at batch size 1 is 1.3 million) and costs about 80 MB.
MAX_EPOCH_BATCHES = 10_000_000
# The largest --dataset-size and --batch-size: past any real dataset, and small enough
# that no arithmetic on them overflows a float.
MAX_TRAIN_COUNT = 10**12

# Numerical parity (issue 25). A module's output passes when max|a - e| <= atol + rtol * max|e|:
# NxD Inference's embedding rule with its bf16 rtol (0.05, also its loosest logit rtol) and its logit atol.
DEFAULT_PARITY_RTOL = 0.05
DEFAULT_PARITY_ATOL = 1e-5
# The seed every parity run starts from (the random weights of hf:/tv:/timm: models, and each forward).
DEFAULT_PARITY_SEED = 0
# sample_inputs() batches a parity run uses at most (each one is a forward per precision).
PARITY_MAX_SAMPLES = 4
# hf: models whose fp32 weights would exceed this are built shrunken (fewer layers, narrower) to run
# with real weights on the CPU, as the cpu-shrunk capture strategy does; the report says so.
PARITY_MAX_WEIGHT_BYTES = 2 * 2**30
