"""A decoding loop with static shapes (issue 33): the ids live in a buffer of the final length and each new
token is written at its position with index_copy, so every step has the same shapes and no growing-sequence
finding is made; the argmax over the vocabulary still samples."""
import torch
from torch import nn

ENTRY = "generate"
VOCAB, WIDTH, MAX_LEN = 32, 16, 10


class StaticDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ids):
        return self.head(self.tok(ids))

    @torch.inference_mode()
    def generate(self, prompt, new_tokens=3):
        ids = torch.zeros(prompt.shape[0], MAX_LEN, dtype=torch.long)
        ids[:, : prompt.shape[1]] = prompt
        for step in range(new_tokens):
            position = prompt.shape[1] + step
            logits = self(ids)[:, position - 1, :]
            next_id = logits.argmax(dim=-1, keepdim=True)
            ids = ids.index_copy(1, torch.tensor([position]), next_id)
        return ids


def get_model():
    torch.manual_seed(0)
    return StaticDecoder()


def get_example_inputs():
    return (torch.randint(0, VOCAB, (1, 4)),)
