"""Kernel imports: Triton with no fallback, flash-attention behind a generic one."""

import triton  # EXPECT cuda-kernel-import

try:  # NEAR-MISS: a CUDA-only kernel behind a generic fallback
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


def attention(q, k, v):
    import torch.nn.functional as F

    if flash_attn_func is not None:
        return flash_attn_func(q, k, v)
    return F.scaled_dot_product_attention(q, k, v)
