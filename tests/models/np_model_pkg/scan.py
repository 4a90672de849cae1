"""A complex-valued selective scan: the complex multiply runs in a helper, called once per step."""

import torch


def _scan_step(state: torch.Tensor, decay: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return state * decay + x  # EXPECT compile_error aten::mul.Tensor


def selective_scan(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    state = torch.zeros_like(x[:, 0])
    outs = []
    for t in range(x.shape[1]):
        state = _scan_step(state, decay, x[:, t])
        outs.append(state)
    return torch.stack(outs, dim=1)


class SelectiveScan(torch.nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.log_decay = torch.nn.Parameter(torch.randn(width, 2) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        decay = torch.view_as_complex(self.log_decay).exp()
        return torch.view_as_real(selective_scan(torch.view_as_complex(x), decay))
