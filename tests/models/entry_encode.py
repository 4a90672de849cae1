"""An encoder-decoder whose encode() is analysed with --entry encode (the file names no ENTRY): its spectral
front end (an FFT) is found at its own line in encode, which forward never runs (issue 33)."""
import torch
from torch import nn


class SpeechCodec(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(9, 16)
        self.decoder = nn.Linear(16, 4)

    def encode(self, audio):
        spectrum = torch.fft.rfft(audio).abs()  # EXPECT cpu_fallback aten::fft_rfft
        return self.encoder(spectrum)

    def forward(self, latents):
        return self.decoder(latents)


def get_model():
    return SpeechCodec()


def get_example_inputs():
    return (torch.randn(2, 16),)
