"""FFT: no Neuron lowering, runs on the host."""
import torch


class Spectrum(torch.nn.Module):
    def forward(self, x):
        spec = torch.fft.rfft(x)  # EXPECT cpu_fallback aten::fft_rfft
        return spec.abs()


def get_model():
    return Spectrum()


def get_example_inputs():
    return (torch.randn(4, 16),)
