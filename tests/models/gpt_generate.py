"""A small GPT with a nanoGPT-style generate(): the model file names the entry point (ENTRY), the loop is
decorated @torch.no_grad(), samples with top-k and multinomial over the vocabulary, and grows the ids by
one token per step with torch.cat: a new shape, so a new Neuron graph, per generated token (issue 33)."""
import torch
from torch import nn
from torch.nn import functional as F

ENTRY = "generate"
VOCAB, WIDTH, CONTEXT, HEADS = 64, 32, 16, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.ln2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x):
        t = x.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tok(ids) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def generate(self, ids, max_new_tokens=4, temperature=1.0, top_k=8):
        for _ in range(max_new_tokens):
            window = ids if ids.size(1) <= CONTEXT else ids[:, -CONTEXT:]
            logits = self(window)[:, -1, :] / temperature
            kth = torch.topk(logits, top_k).values[:, [-1]]  # SAMPLING aten::topk
            logits = logits.masked_fill(logits < kth, float("-inf"))
            next_id = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)  # SAMPLING aten::multinomial
            ids = torch.cat((ids, next_id), dim=1)  # EXPECT dynamic_shape aten::cat
        return ids


def get_model():
    torch.manual_seed(0)
    return GPT()


def get_example_inputs():
    return (torch.randint(0, VOCAB, (1, 6)),)
