"""A training loop written for torch-neuronx's XLA stack (trn1): what does not carry over to TorchNeuron."""
import torch
import torch_xla.core.xla_model as xm  # AUDIT xla-import
from torch_neuronx import parallel_model_trace  # AUDIT parallel-model-trace
from transformers_neuronx import LlamaForSampling  # AUDIT transformers-neuronx
from neuronx_distributed_inference.models.config import NeuronConfig  # AUDIT nxdi-entry-point


def train(model, batches, optimizer):
    device = torch.device("xla")  # AUDIT xla-device-string
    model.to(device)
    for x, y in batches:
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        xm.optimizer_step(optimizer)  # AUDIT xla-mark-step
        xm.mark_step()  # AUDIT xla-mark-step
    return LlamaForSampling, NeuronConfig, parallel_model_trace
