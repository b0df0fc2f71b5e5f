"""One block configuration: checked once with one-line errors naming the field, and passed
whole so every block of every stack gets every option."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch
from torch import nn

from selfattn.attention import MultiHeadAttention
from selfattn.attention.scores import AdditiveScore
from selfattn.blocks import BlockConfig, ConformerBlock, DecoderBlock, EncoderBlock
from selfattn.kernels import WindowKernel, build_kernel
from selfattn.models import Conformer, Decoder, Encoder, StackConfig

E, H, FFN = 16, 4, 32


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"embed_dim": 0}, "embed_dim, num_heads and ffn_dim must be positive"),
        ({"num_heads": 3}, r"embed_dim \(16\) must be divisible by num_heads \(3\)"),
        ({"num_kv_heads": 3}, r"num_kv_heads \(3\) must divide num_heads \(4\)"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
        ({"attention_dropout": -0.1}, r"attention_dropout must be in \[0, 1\) or None"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps must be > 0"),
        ({"activation": "tanh"}, "unknown activation 'tanh'"),
        ({"score": "cosine"}, "unknown score 'cosine'; choose one of"),
        ({"normalizer": "tanh"}, "unknown normalizer 'tanh'; choose one of"),
        ({"attention": "fast"}, "unknown attention kernel 'fast'"),
        ({"attention": "window", "score": "dot"}, "score='dot' needs attention='dense'"),
        ({"attention": "linear", "include_self": False}, "include_self=False needs attention"),
        ({"attention": "linear", "num_kv_heads": 2}, "num_kv_heads=2 needs attention='dense'"),
        ({"attention": "linear", "attention_dropout": 0.1}, "attention_dropout=0.1: kernel"),
        ({"conv_kernel_size": 0}, "conv_kernel_size must be >= 1"),
        ({"conv_norm": "group"}, "conv_norm must be 'batch' or 'layer'"),
    ],
)
def test_bad_options_are_one_line_errors_naming_the_field(
    options: dict[str, object], message: str
) -> None:
    settings: dict[str, object] = {"embed_dim": E, "num_heads": H, "ffn_dim": FFN, **options}
    with pytest.raises(ValueError, match=message) as error:
        BlockConfig(**settings)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_layers": 0}, "num_layers must be >= 1"),
        ({"positional": "wavelet"}, "unknown positional encoding 'wavelet'"),
        ({"max_len": 0}, "max_len must be >= 1"),
        ({"embed_dropout": 1.5}, r"embed_dropout must be in \[0, 1\) or None"),
    ],
)
def test_bad_stack_options_are_one_line_errors(options: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"num_layers": 2, **options}
    with pytest.raises(ValueError, match=message):
        StackConfig(E, H, FFN, **settings)  # type: ignore[arg-type]


def test_the_config_keeps_its_own_copy_of_the_options() -> None:
    options = {"window": 2}
    config = BlockConfig(E, H, FFN, attention="window", attention_options=options)
    options["window"] = 5
    assert config.attention_options == {"window": 2}
    assert hash(config) == hash(BlockConfig(E, H, FFN, attention="window"))


def _attentions(module: nn.Module) -> list[MultiHeadAttention]:
    return [m for m in module.modules() if isinstance(m, MultiHeadAttention)]


STACKS = {
    "encoder": Encoder,
    "decoder": Decoder,
    "conformer": Conformer,
}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_every_block_of_every_stack_gets_every_attention_option(stack: str) -> None:
    config = StackConfig(
        E,
        H,
        FFN,
        num_layers=2,
        score="additive",
        normalizer="relu",
        num_kv_heads=2,
        include_self=False,
        bias=False,
        layer_norm_eps=1e-3,
        attention_dropout=0.25,
        conv_kernel_size=3,
    )
    model = STACKS[stack](config)
    attentions = _attentions(model)
    assert len(attentions) == (4 if stack == "decoder" else 2)  # decoder: self + cross
    for attention in attentions:
        assert isinstance(attention.score, AdditiveScore)
        assert attention.normalizer == "relu"
        assert attention.num_kv_heads == 2
        assert attention.dropout == 0.25
        assert attention.q_proj.bias is None and attention.out_proj.bias is None
    self_attentions = [a for name, a in model.named_modules() if name.endswith("self_attn")]
    assert len(self_attentions) == 2 and not any(a.include_self for a in self_attentions)
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert norms and all(n.eps == 1e-3 and n.bias is None for n in norms)
    # The additive score's own tanh layer has the bias of Bahdanau et al.'s formula.
    linears = [
        m
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear | nn.Conv1d) and ".score." not in name
    ]
    assert linears and all(m.bias is None for m in linears)


def test_transformer_blocks_read_the_activation_and_pre_ln() -> None:
    config = StackConfig(E, H, FFN, num_layers=2, activation="swiglu", norm_first=True)
    for stack in (Encoder(config), Decoder(config)):
        assert stack.norm is not None  # pre-LN stacks end in a norm
        blocks: list[Any] = list(stack.layers)
        assert all(b.feedforward.activation_name == "swiglu" for b in blocks)
        assert all(b.config.norm_first for b in blocks)


def test_a_kernel_stack_passes_the_weight_dropout_to_a_kernel_that_drops() -> None:
    config = StackConfig(
        E, H, FFN, num_layers=2, dropout=0.1, attention="window", attention_options={"window": 2}
    )
    assert config.kernel_options() == {"window": 2, "dropout": 0.1}
    layers: list[Any] = list(Encoder(config).layers)
    kernels = [layer.self_attn.kernel for layer in layers]
    assert all(isinstance(k, WindowKernel) and k.dropout == 0.1 for k in kernels)
    assert kernels[0] is not kernels[1]  # one kernel per block
    explicit = StackConfig(E, H, FFN, num_layers=1, attention_dropout=0.0, attention="window")
    assert explicit.kernel_options() == {"dropout": 0.0}
    assert StackConfig(E, H, FFN, num_layers=1, attention="linear").kernel_options() == {}


def test_a_lone_block_needs_the_kernel_its_config_names() -> None:
    config = BlockConfig(E, H, FFN, attention="window", attention_options={"window": 1})
    for block in (EncoderBlock, ConformerBlock):
        with pytest.raises(ValueError, match="attention='window' but no kernel was given"):
            block(config)
        built = block(config, kernel=build_kernel("window", window=1))
        assert isinstance(built.self_attn.kernel, WindowKernel)
    with pytest.raises(ValueError, match="a decoder block needs attention='dense'"):
        DecoderBlock(config)


def test_a_conformer_stack_can_share_one_block() -> None:
    config = StackConfig(E, H, FFN, num_layers=3, conv_kernel_size=3)
    shared = Conformer(replace(config, share_weights=True))
    single = Conformer(replace(config, num_layers=1))
    count = sum(p.numel() for p in shared.parameters())
    assert count == sum(p.numel() for p in single.parameters())
    assert all(layer is shared.layers[0] for layer in shared.layers)
    output = shared.eval()(torch.randn(2, 6, E))
    assert len(output.hidden_states) == 4
    assert not torch.allclose(output.hidden_states[1], output.hidden_states[2], atol=1e-3)


def test_parameter_names_are_those_of_old_checkpoints() -> None:
    """State-dict names are what checkpoints of format version 1 hold."""
    config = StackConfig(E, H, FFN, num_layers=1, norm_first=True)
    names = set(Encoder(config).state_dict())
    block = {
        f"layers.0.{name}"
        for name in (
            "self_attn.q_proj.weight",
            "self_attn.q_proj.bias",
            "self_attn.k_proj.weight",
            "self_attn.k_proj.bias",
            "self_attn.v_proj.weight",
            "self_attn.v_proj.bias",
            "self_attn.out_proj.weight",
            "self_attn.out_proj.bias",
            "feedforward.in_proj.weight",
            "feedforward.in_proj.bias",
            "feedforward.out_proj.weight",
            "feedforward.out_proj.bias",
            "norm1.weight",
            "norm1.bias",
            "norm2.weight",
            "norm2.bias",
        )
    }
    assert names == block | {"norm.weight", "norm.bias"}
    decoder = set(Decoder(config).state_dict())
    assert {"layers.0.cross_attn.k_proj.weight", "layers.0.norm3.bias", "norm.weight"} <= decoder
