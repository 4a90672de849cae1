"""One problem op in each kind of higher-order region torch.export wraps code in (issue 33): a no_grad
block, an inference_mode block, an autocast block, activation checkpointing, both branches of torch.cond,
a while_loop body and a map body. Each op must be found at its own line, every region entered."""
import torch
from torch._higher_order_ops.map import map as map_rows
from torch._higher_order_ops.while_loop import while_loop
from torch.utils.checkpoint import checkpoint


class Regions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            present = torch.unique(x.round())  # EXPECT dynamic_shape aten::_unique2
        with torch.inference_mode():
            y = torch.fft.rfft(x).real[..., :1] + x  # EXPECT cpu_fallback aten::fft_rfft
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.proj(y).float()
            hits = torch.nonzero(y > 0)  # EXPECT dynamic_shape aten::nonzero
        y = checkpoint(lambda t: torch.cummin(t, dim=1)[0], y, use_reentrant=False)  # EXPECT cpu_fallback aten::cummin
        y = torch.cond(y.sum() > 0, lambda t: torch.quantile(t, 0.5, dim=-1, keepdim=True) + t, lambda t: t.cos(), (y,))  # EXPECT compile_error aten::quantile.scalar
        y = map_rows(lambda row: torch.cummin(row, dim=0)[0], y)  # EXPECT cpu_fallback aten::cummin
        _, y = while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, torch.copysign(t, -1.0)), (torch.tensor(0), y))  # EXPECT cpu_fallback aten::copysign.Scalar
        return y, present.numel() + hits.shape[0]


def get_model():
    return Regions()


def get_example_inputs():
    return (torch.randn(4, 8),)
