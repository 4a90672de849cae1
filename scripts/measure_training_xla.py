"""Measure on torch-xla 2.9 CPU what a training step does: backward fallbacks, optimizers, host reads.

Run with the torch-xla 2.9 stack (PJRT_DEVICE=CPU); its output is the provenance of
neuronprobe/support/data/training_rules.json. Not part of the package or the tests.
"""

import os

os.environ.setdefault("PJRT_DEVICE", "CPU")
import torch
import torch.nn.functional as F
import torch_xla
import torch_xla.debug.metrics as met

dev = torch_xla.device()


def run(name, fn, *shapes):
    xs = [torch.randn(*s).to(dev).requires_grad_() for s in shapes]
    met.clear_all()
    torch_xla.sync()
    try:
        y = fn(*xs)
        torch_xla.sync()
        fwd = met.executed_fallback_ops()
        met.clear_all()
        y.float().sum().backward()
        torch_xla.sync()
        bwd = met.executed_fallback_ops()
        print(f"{name}: forward fallbacks {fwd}; backward fallbacks {bwd}", flush=True)
    except Exception as e:
        print(f"{name}: raised {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)


run("layer_norm", lambda x: F.layer_norm(x, (8,)), (4, 8))
run("group_norm", lambda x: F.group_norm(x, 2), (2, 4, 3))
run("glu", lambda x: F.glu(x), (4, 8))
run("mish", lambda x: F.mish(x), (4, 8))
run("logit", lambda x: torch.logit(x.sigmoid()), (4, 8))
run("cdist", lambda x, y: torch.cdist(x, y), (4, 8), (5, 8))
run("grid_sample", lambda x, g: F.grid_sample(x, g.tanh(), align_corners=False), (1, 2, 4, 4), (1, 3, 3, 2))
run("cumprod", lambda x: torch.cumprod(x, 1), (4, 8))
run("kthvalue", lambda x: torch.kthvalue(x, 2, 1).values, (4, 8))
run("cross_entropy", lambda x: F.cross_entropy(x, torch.zeros(4, dtype=torch.long, device=dev)), (4, 8))
run("embedding", lambda w: F.embedding(torch.tensor([[0, 1, 2]], device=dev), w), (5, 8))
run("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8))
run("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), (4, 8))
run("dropout", lambda x: F.dropout(x, 0.1, training=True), (4, 8))
run("upsample_nearest1d", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), (1, 2, 4))
run("huber", lambda x: F.huber_loss(x, torch.zeros(4, 8, device=dev)), (4, 8))
run("logcumsumexp", lambda x: torch.logcumsumexp(x, 1), (4, 8))
run("adaptive_avg_pool2d_uneven", lambda x: F.adaptive_avg_pool2d(x, (3, 3)), (1, 2, 5, 5))
run("max_pool2d_dilation2", lambda x: F.max_pool2d(x, 2, dilation=2), (1, 2, 6, 6))


# optimizers
def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2)).to(dev)


def step(opt_factory, clip=False, name=""):
    m = model()
    try:
        opt = opt_factory(m.parameters())
    except Exception as e:
        print(f"optimizer {name}: construction raised {type(e).__name__}: {str(e).splitlines()[0][:160]}", flush=True)
        return
    x = torch.randn(4, 8).to(dev)
    met.clear_all()
    torch_xla.sync()
    try:
        loss = m(x).sum()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        [o for o in torch_xla._XLAC._xla_counter_names() if o.startswith("aten::")]
        print(f"optimizer {name}: ran; fallbacks {met.executed_fallback_ops()}", flush=True)
    except Exception as e:
        print(f"optimizer {name}: step raised {type(e).__name__}: {str(e).splitlines()[0][:160]}", flush=True)


step(lambda p: torch.optim.AdamW(p, foreach=False), name="AdamW for-loop")
step(lambda p: torch.optim.AdamW(p, foreach=True), name="AdamW foreach")
step(lambda p: torch.optim.AdamW(p, fused=True), name="AdamW fused")
step(lambda p: torch.optim.Adam(p, fused=True), name="Adam fused")
step(lambda p: torch.optim.SGD(p, lr=0.1, fused=True), name="SGD fused")
step(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True), name="SGD foreach")
step(lambda p: torch.optim.AdamW(p, foreach=True), clip=True, name="AdamW foreach + clip_grad_norm_")
step(lambda p: torch.optim.AdamW(p, foreach=False), clip=True, name="AdamW for-loop + clip_grad_norm_")
import torch_xla.amp.syncfree as sf

print("syncfree:", [n for n in dir(sf) if not n.startswith("_")])
step(lambda p: sf.AdamW(p), name="syncfree.AdamW")
import torch_xla.core.xla_model as xm

print("add_step_closure:", hasattr(xm, "add_step_closure"))
from torch.optim.optimizer import _default_to_fused_or_foreach

print("default (fused, foreach) for XLA params:", _default_to_fused_or_foreach([torch.zeros(3, device=dev)], differentiable=False, use_fused=False))
# host reads in a loop
m = model()
opt = torch.optim.AdamW(m.parameters(), foreach=False)
for kind in ["item", "print", "cpu", "tolist", "branch", "none", "closure"]:
    met.clear_all()
    for _ in range(3):
        x = torch.randn(4, 8).to(dev)
        loss = m(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if kind == "item":
            v = loss.item()
        elif kind == "print":
            with open(os.devnull, "w") as sink:
                print(loss, file=sink)
        elif kind == "cpu":
            v = loss.cpu()
        elif kind == "tolist":
            v = loss.detach().tolist()
        elif kind == "branch":
            if loss > 1e9:
                pass
        elif kind == "closure":
            xm.add_step_closure(lambda value=loss: value.item())
        torch_xla.sync()
    print(
        f"loop {kind}: fallbacks {met.executed_fallback_ops()} local_scalar_dense={met.counter_value('aten::_local_scalar_dense')} "
        f"executions={met.metric_data('ExecuteTime')[0] if met.metric_data('ExecuteTime') else 0} "
        f"uncached={met.counter_value('UncachedCompile')} cached={met.counter_value('CachedCompile')}",
        flush=True,
    )

# one training step of small transformers configs: is anything in the backward or the optimizer a fallback?
from transformers import AutoConfig, AutoModelForCausalLM

SMALL = {
    "gpt2": {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 256},
    "llama": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256},
}
for arch, overrides in SMALL.items():
    m = AutoModelForCausalLM.from_config(AutoConfig.for_model(arch, **overrides)).to(dev)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), foreach=False)
    ids = torch.randint(0, 256, (1, 32)).to(dev)
    met.clear_all()
    loss = m(input_ids=ids, labels=ids, use_cache=False).loss
    torch_xla.sync()
    fwd = met.executed_fallback_ops()
    met.clear_all()
    loss.backward()
    torch_xla.sync()
    bwd = met.executed_fallback_ops()
    met.clear_all()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    print(f"{arch} training step: forward fallbacks {fwd}; backward fallbacks {bwd}; optimizer fallbacks {met.executed_fallback_ops()}", flush=True)

# mixed precision: torch.amp.GradScaler("xla") with bf16 autocast, 3 steps: does the scaler sync the host?
from torch_xla.amp import syncfree

for name, make in [("AdamW", lambda p: torch.optim.AdamW(p)), ("syncfree.AdamW", lambda p: syncfree.AdamW(p))]:
    m = torch.nn.Linear(8, 8).to(dev)
    opt = make(m.parameters())
    scaler = torch.amp.GradScaler("xla")
    met.clear_all()
    for _ in range(3):
        with torch.autocast("xla", dtype=torch.bfloat16):
            loss = m(torch.randn(4, 8, device=dev)).float().sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        torch_xla.sync()
    print(
        f"GradScaler + {name}, 3 steps: aten::_local_scalar_dense {met.counter_value('aten::_local_scalar_dense')}, "
        f"fallbacks {met.executed_fallback_ops()}, executions {met.metric_data('ExecuteTime')[0]}",
        flush=True,
    )

# a read after torch_xla.sync(): the step's graph has run; does the read still cost?
m = model()
opt = torch.optim.AdamW(m.parameters(), foreach=False)
for kind in ["none", "item after sync"]:
    met.clear_all()
    for _ in range(3):
        loss = m(torch.randn(4, 8).to(dev)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        if kind != "none":
            v = loss.item()
    print(
        f"loop {kind}: executions {met.metric_data('ExecuteTime')[0] if met.metric_data('ExecuteTime') else 0}, "
        f"local_scalar_dense {met.counter_value('aten::_local_scalar_dense')}",
        flush=True,
    )
