"""A detection-style training step: boxes asserted valid in train_step and in the forward, one target
uploaded per image, the loss read twice. Fake tensors cannot know the boxes: each assert is a host read
at its line, not the user's error (issue 33)."""
import torch
import torch.nn.functional as F


class BoxHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 4)

    def forward(self, feats, boxes):
        assert (boxes[:, 2:] > boxes[:, :2]).all()  # FORWARD-READ
        return self.net(feats)


def get_model():
    return BoxHead()


def get_example_inputs():
    return (torch.randn(6, 16), torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 6))


def train_step(model, optimizer, batch):
    feats, boxes = batch
    assert (boxes[:, 2:] > boxes[:, :2]).all()  # EXPECT control_flow
    targets = [torch.tensor([0.0, 0.0, 1.0, 1.0], device=feats.device) for _ in range(6)]  # UPLOAD
    loss = F.l1_loss(model(feats, boxes), torch.stack(targets))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if loss.item() > 100:  # EXPECT control_flow aten::_local_scalar_dense
        print("diverged")
    return loss.item()  # EXPECT cpu_fallback aten::_local_scalar_dense
