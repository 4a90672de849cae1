"""A transformers-style attention shape, kept in the package elsewhere (buckets --decode --model --path)."""
from types import SimpleNamespace

CONFIG = SimpleNamespace(num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, hidden_size=512, head_dim=64)
