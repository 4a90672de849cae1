"""Measure what torch-xla 2.9 itself counts for one training step: graph executions, device-to-host and
host-to-device transfers. Its output is the provenance of the training counts in docs/concepts/training.md and
of neuronprobe/training/reporting.py's train_info(); tests/test_train_values.py asserts neuronprobe's counts agree.

Run with the xla-cpu stack: PJRT_DEVICE=CPU ~/.cache/neuronprobe/xla-cpu/venv/bin/python scripts/measure_train_counts.py
Each step's batch is on the device before the counters are cleared (as neuronprobe's xla-cpu worker does), and
the counters are read after the device is idle (executions finish asynchronously). Not part of the package.
"""

import os

os.environ.setdefault("PJRT_DEVICE", "CPU")
import torch
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

dev = torch_xla.device()


def count(name: str) -> int:
    data = met.metric_data(name)
    return int(data[0]) if data else 0


class BoxHead(torch.nn.Module):  # tests/models/train_box_assert.py
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(16, 4)

    def forward(self, feats: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        assert (boxes[:, 2:] > boxes[:, :2]).all()
        return self.net(feats)


def box_assert_step(model, optimizer, batch):
    feats, boxes = batch
    assert (boxes[:, 2:] > boxes[:, :2]).all()
    targets = [torch.tensor([0.0, 0.0, 1.0, 1.0], device=feats.device) for _ in range(6)]
    loss = F.l1_loss(model(feats, boxes), torch.stack(targets))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if loss.item() > 100:
        print("diverged")
    return loss.item()


def uploads_step(model, optimizer, batch):  # tests/models/train_uploads.py
    (x,) = batch
    targets = [torch.tensor([0.0, 0.0, 1.0, 1.0]).to(x.device) for _ in range(18)]
    loss = F.l1_loss(model(x), torch.stack(targets))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def plain_step(model, optimizer, batch):
    (x,) = batch
    model(x).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()


def same_value_thrice_step(model, optimizer, batch):
    (x,) = batch
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return [loss.item() for _ in range(3)]


CASES = {
    "plain step (no reads, no uploads)": (lambda: torch.nn.Linear(16, 4), plain_step, lambda: (torch.randn(6, 16),)),
    "train_uploads.py: 18 .to(x.device) uploads, 1 .item()": (lambda: torch.nn.Linear(16, 4), uploads_step, lambda: (torch.randn(18, 16),)),
    "train_box_assert.py: 2 asserts, 6 torch.tensor(device=), 2 .item()": (
        BoxHead,
        box_assert_step,
        lambda: (torch.randn(6, 16), torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 6)),
    ),
    "the same value read 3 times with .item()": (lambda: torch.nn.Linear(16, 4), same_value_thrice_step, lambda: (torch.randn(6, 16),)),
}

for label, (make_model, step, make_batch) in CASES.items():
    torch.manual_seed(0)
    model = make_model().to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), foreach=False)  # neuronprobe's default: for-loop AdamW
    for which in ("first", "second"):
        batch = tuple(t.to(dev) for t in make_batch())
        torch_xla.sync(wait=True)
        xm.wait_device_ops()
        met.clear_all()
        step(model, optimizer, batch)
        torch_xla.sync(wait=True)
        xm.wait_device_ops()
        print(
            f"{label}, {which} step: ExecuteTime {count('ExecuteTime')}, TransferFromDeviceTime {count('TransferFromDeviceTime')}, "
            f"TransferToDeviceTime {count('TransferToDeviceTime')}, aten::_local_scalar_dense {met.counter_value('aten::_local_scalar_dense') or 0}",
            flush=True,
        )


# Which constructors transfer from the host: one call each, after a warm-up call (compiles and constants cached).
x = torch.randn(4, 4).to(dev)
CONSTRUCTORS = {
    "torch.tensor(list, device=dev)": lambda: torch.tensor([1.0, 2.0, 3.0, 4.0], device=dev),
    "torch.tensor(list).to(dev)": lambda: torch.tensor([1.0, 2.0, 3.0, 4.0]).to(dev),
    "torch.zeros(4, device=dev)": lambda: torch.zeros(4, device=dev),
    "torch.full((4,), 2.0, device=dev)": lambda: torch.full((4,), 2.0, device=dev),
    "torch.arange(4, device=dev)": lambda: torch.arange(4, device=dev),
    "x * 2.5 (a Python scalar operand)": lambda: x * 2.5,
    "x.to(x.device) (already on the device)": lambda: x.to(x.device),
}
for label, make in CONSTRUCTORS.items():
    for _ in range(2):
        torch_xla.sync(wait=True)
        xm.wait_device_ops()
        met.clear_all()
        out = make().sum()
        torch_xla.sync(wait=True)
        xm.wait_device_ops()
    print(f"{label}: TransferToDeviceTime {count('TransferToDeviceTime')}, ExecuteTime {count('ExecuteTime')}", flush=True)
