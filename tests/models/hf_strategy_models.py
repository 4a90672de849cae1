"""Tiny transformers architectures, registered under their own model types, that each defeat one capture strategy.

Importing this module registers them with transformers' Auto classes, so
``hf:np-moe`` etc. load like any architecture. Tests assert lines in this file.
"""

import torch
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel


class _Config(PretrainedConfig):
    vocab_size: int = 64
    hidden_size: int = 16
    num_hidden_layers: int = 3
    num_experts: int = 4


class _Base(PreTrainedModel):
    base_model_prefix = "np"

    def __init__(self, config):
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.router = torch.nn.Linear(config.hidden_size, config.num_experts)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(config.hidden_size, config.hidden_size) for _ in range(config.num_experts))
        self.post_init()

    def _init_weights(self, module):
        pass


class MoeConfig(_Config):
    model_type = "np-moe"


class MoeModel(_Base):
    """Routing with nonzero (no meta kernel) and a CPU tensor made in the forward: fails on meta, works on fake."""

    config_class = MoeConfig

    def forward(self, input_ids):
        h = self.embed(input_ids)
        choice = self.router(h).argmax(-1)
        out = torch.zeros_like(h)
        for i, expert in enumerate(self.experts):
            rows = (choice == i).nonzero()  # NP-NONZERO
            out = out + expert(h)[rows[:, 0], rows[:, 1]].sum() * torch.ones(1)
        return out


class ReadConfig(_Config):
    model_type = "np-read"


class ReadModel(_Base):
    """Reads tensor values into numpy: neither meta nor fake tensors have values, real CPU tensors do."""

    config_class = ReadConfig

    def forward(self, input_ids):
        h = self.embed(input_ids)
        scale = float(h.detach().abs().max().numpy()) + 1.0
        return h / scale


class BrokenConfig(_Config):
    model_type = "np-broken"


class BrokenModel(_Base):
    """A forward that raises however it is run: no strategy can analyse it."""

    config_class = BrokenConfig

    def forward(self, input_ids):
        raise RuntimeError("this architecture needs a kernel neuronprobe cannot run")


class HeadlessConfig(_Config):
    model_type = "np-headless"


class HeadlessModel(_Base):
    config_class = HeadlessConfig

    def forward(self, input_ids):
        return self.router(self.embed(input_ids))


class HeadlessForCausalLM(_Base):
    """A causal-LM head that refuses the config, as some heads assert on theirs."""

    config_class = HeadlessConfig

    def __init__(self, config):
        raise ValueError("this head needs tie_word_embeddings=False and a decoder")


class UnbuildableConfig(_Config):
    model_type = "np-unbuildable"


class UnbuildableModel(_Base):
    config_class = UnbuildableConfig

    def __init__(self, config):
        raise ValueError("num_experts must equal 3 for this architecture")


for _config, _model in [(MoeConfig, MoeModel), (ReadConfig, ReadModel), (BrokenConfig, BrokenModel), (HeadlessConfig, HeadlessModel), (UnbuildableConfig, UnbuildableModel)]:
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModel.register(_config, _model, exist_ok=True)
AutoModelForCausalLM.register(HeadlessConfig, HeadlessForCausalLM, exist_ok=True)
