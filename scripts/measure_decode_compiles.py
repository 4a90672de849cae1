"""How many graphs torch-xla 2.9 compiles for a decoding loop whose ids grow by torch.cat (issue 33.3).

Run in the xla-cpu environment (torch 2.9 + torch-xla 2.9, PJRT_DEVICE=CPU), from the repository root:

    PJRT_DEVICE=CPU ~/.cache/neuronprobe/xla-cpu/venv/bin/python scripts/measure_decode_compiles.py

It runs tests/models/gpt_generate.py's loop on the XLA device and prints torch-xla's CompileTime count
per run: with a sync per step (what a loop that reads each token does) and without one. Measured on
2026-12-03: 4 compiles for 4 tokens with a per-step sync, 0 for the same prompt length again, 1 for a
prompt one token longer; without a sync, 1 per (prompt length, token count). The numbers back the
``decode-growing-sequence`` rule (neuronprobe/support/data/builtin_rules.json).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch_xla
import torch_xla.debug.metrics as met

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "models"))
import gpt_generate as gpt

DEVICE = torch_xla.device()
MODEL = gpt.get_model().eval().to(DEVICE)


def compiles() -> int:
    data = met.metric_data("CompileTime")
    return int(data[0]) if data else 0


def run(prompt_len: int, new_tokens: int, sync_each: bool) -> int:
    """Graphs compiled by one generation of ``new_tokens`` tokens after a prompt of ``prompt_len``."""
    ids = torch.randint(0, gpt.VOCAB, (1, prompt_len)).to(DEVICE)
    before = compiles()
    with torch.no_grad():
        for _ in range(new_tokens):
            window = ids if ids.size(1) <= gpt.CONTEXT else ids[:, -gpt.CONTEXT :]
            logits = MODEL(window)[:, -1, :]
            kth = torch.topk(logits, 8).values[:, [-1]]
            logits = logits.masked_fill(logits < kth, float("-inf"))
            ids = torch.cat((ids, torch.multinomial(torch.softmax(logits, -1), 1)), 1)
            if sync_each:
                torch_xla.sync()
    torch_xla.sync()
    ids.cpu()
    return compiles() - before


def main() -> None:
    print(f"torch {torch.__version__}, torch_xla {torch_xla.__version__}")
    print("sync per step, prompt 6, 4 tokens:", run(6, 4, True))
    print("sync per step, the same prompt length again:", run(6, 4, True))
    print("sync per step, prompt 7, 4 tokens:", run(7, 4, True))
    print("no sync, prompt 6, 4 tokens:", run(6, 4, False))
    print("no sync, the same again:", run(6, 4, False))
    print("no sync, prompt 8, 4 tokens:", run(8, 4, False))


if __name__ == "__main__":
    main()
