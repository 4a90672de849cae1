"""torch.stft with return_complex=True: the FFT runs on the CPU and the graph hands complex64 data back."""
import torch


class Spectrum(torch.nn.Module):
    def forward(self, x):
        window = torch.hann_window(16, device=x.device)
        return torch.stft(x, n_fft=16, hop_length=4, window=window, return_complex=True)  # EXPECT cpu_fallback aten::_fft_r2c


def get_model():
    return Spectrum()


def get_example_inputs():
    return (torch.randn(2, 64),)
