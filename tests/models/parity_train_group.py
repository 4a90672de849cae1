"""A training step whose fc2 gradient is lost under bf16 matmul auto-cast, and no other group's first.

fc1's rows differ by one part in ~1000 (1024 - 1023): exact in fp32, equal once rounded to bf16
(8 significant bits), so fc1's output is 1 in fp32 and 0 under auto-cast. fc2's weight gradient is
that output times the incoming gradient: lost. The head sees fc2's output, dominated by its bias
of 100 (exact in bf16): its gradient moves by well under 1%. Backward order: head, fc2, fc1.
"""
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(2, 3, bias=False)
        self.fc2 = torch.nn.Linear(3, 4)
        self.head = torch.nn.Linear(4, 2)
        with torch.no_grad():
            self.fc1.weight.copy_(torch.tensor([[1024.0, -1023.0], [512.0, -511.0], [2048.0, -2047.0]]))
            self.fc2.weight.copy_(torch.full((4, 3), 0.01))
            self.fc2.bias.fill_(100.0)
            self.head.weight.copy_(torch.tensor([[0.5, -0.25, 0.5, 0.25], [0.25, 0.5, -0.5, 0.5]]))
            self.head.bias.zero_()

    def forward(self, x):
        return self.head(self.fc2(self.fc1(x)))


def get_model():
    return Net()


def get_example_inputs():
    return (torch.ones(2, 2),)
