"""An encoder-decoder whose token embedding is one tensor under three names (BART's ``shared``,
``encoder.embed_tokens``, ``decoder.embed_tokens``): the capture reads it through one of them and must
count it once, not flag a complete capture as incomplete (the zoo's bart read "35%" before)."""

import torch


class TiedEmbeddings(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shared = torch.nn.Embedding(1000, 16)
        self.encoder_embed = torch.nn.Embedding(1000, 16)
        self.decoder_embed = torch.nn.Embedding(1000, 16)
        self.encoder_embed.weight = self.shared.weight
        self.decoder_embed.weight = self.shared.weight
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.encoder_embed(ids))


def get_model() -> torch.nn.Module:
    return TiedEmbeddings()


def get_example_inputs() -> tuple[torch.Tensor]:
    return (torch.randint(0, 1000, (2, 8)),)
