"""A segmentation-style head whose forward is decorated @torch.no_grad(): torch.export wraps the whole body
in a wrap_with_set_grad_enabled region, which the capture must enter (issue 33)."""
import torch


class NoGradSegmenter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.classifier = torch.nn.Conv2d(8, 4, 1)

    @torch.no_grad()
    def forward(self, x):
        logits = self.classifier(torch.relu(self.encoder(x)))
        labels = logits.argmax(dim=1)
        present = torch.unique(labels)  # EXPECT dynamic_shape aten::_unique2
        return logits, present


def get_model():
    return NoGradSegmenter()


def get_example_inputs():
    return (torch.randn(1, 3, 8, 8),)
