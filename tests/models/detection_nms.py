"""torchvision's custom ops in a forward: nms and roi_align have no Neuron lowering, so they run on the CPU."""

import torch
import torchvision


class DetectionHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.score = torch.nn.Linear(4, 1)

    def forward(self, features, boxes):
        scores = self.score(boxes).squeeze(-1)
        keep = torchvision.ops.nms(boxes, scores, 0.5)  # EXPECT cpu_fallback torchvision::nms
        rois = torch.cat([torch.zeros(boxes.shape[0], 1), boxes], dim=1)
        pooled = torchvision.ops.roi_align(features, rois, output_size=(2, 2))  # EXPECT cpu_fallback torchvision::roi_align
        return pooled.flatten(1).sum(1), keep


def get_model():
    return DetectionHead()


def get_example_inputs():
    corner = torch.rand(8, 2) * 8
    return (torch.randn(1, 4, 16, 16), torch.cat([corner, corner + 4], dim=1))
