"""Feed-forward network and encoder/decoder blocks, against torch's Transformer layers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from selfattn.attention import padding_mask
from selfattn.blocks import ACTIVATIONS, BlockConfig, DecoderBlock, EncoderBlock, FeedForward

B, T, S, E, H, FFN = 3, 6, 7, 16, 4, 32
MASKINGS = ["padding", "bool_mask", "float_mask", "padding_and_mask"]


def _randomise_norms(layer: nn.Module) -> None:
    """LayerNorms start at (1, 0); random ones prove they are copied."""
    with torch.no_grad():
        for module in layer.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.normal_(1.0, 0.3)
                if module.bias is not None:
                    module.bias.normal_(0.0, 0.3)


def _torch_and_our_masks(
    masking: str, length: int
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Equivalent masks in torch's convention (True = blocked) and ours (True = allowed)."""
    torch_masks: dict[str, torch.Tensor] = {}
    our_masks: dict[str, torch.Tensor] = {}
    if "padding" in masking:
        padding = padding_mask(torch.tensor([length, length - 2, 3]), length)
        torch_masks["src_key_padding_mask"] = our_masks["key_padding_mask"] = padding
    if masking in ("bool_mask", "padding_and_mask"):
        # Keep the diagonal so no query is left with nothing to attend to (torch gives NaN).
        allowed = (torch.rand(length, length) > 0.4) | torch.eye(length, dtype=torch.bool)
        torch_masks["src_mask"], our_masks["mask"] = ~allowed, allowed
    if masking == "float_mask":
        additive = torch.randn(length, length)
        torch_masks["src_mask"] = our_masks["mask"] = additive
    return torch_masks, our_masks


# --------------------------------------------------------------------------- feed-forward


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_feedforward_keeps_shape(activation: str) -> None:
    ffn = FeedForward(E, FFN, activation)  # type: ignore[arg-type]
    assert ffn(torch.randn(B, T, E)).shape == (B, T, E)


def test_swiglu_has_a_gate() -> None:
    plain = sum(p.numel() for p in FeedForward(E, FFN, "relu").parameters())
    gated = FeedForward(E, FFN, "swiglu")
    assert gated.gate_proj is not None
    assert plain == 2 * E * FFN + FFN + E
    assert sum(p.numel() for p in gated.parameters()) == plain + E * FFN + FFN


def test_swiglu_is_swish_times_linear_gate() -> None:
    ffn = FeedForward(E, FFN, "swiglu", bias=False)
    x = torch.randn(B, T, E)
    assert ffn.gate_proj is not None
    expected = ffn.out_proj(F.silu(ffn.in_proj(x)) * ffn.gate_proj(x))
    torch.testing.assert_close(ffn(x), expected)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_each_activation_fits_a_nonlinear_function(activation: str) -> None:
    ffn = FeedForward(2, 32, activation)  # type: ignore[arg-type]
    x = torch.randn(128, 2)
    target = (x[:, :1] * x[:, 1:]).expand(-1, 2)  # a product: no linear map fits it
    optimiser = torch.optim.Adam(ffn.parameters(), lr=3e-2)
    initial = F.mse_loss(ffn(x), target).item()
    for _ in range(100):
        optimiser.zero_grad()
        loss = F.mse_loss(ffn(x), target)
        loss.backward()
        optimiser.step()
    assert loss.item() < 0.05 * initial


def test_activations_differ() -> None:
    x = torch.randn(B, T, E)
    outputs = []
    for name in sorted(ACTIVATIONS):
        torch.manual_seed(0)  # identical in_proj/out_proj weights for every activation
        outputs.append(FeedForward(E, FFN, name)(x))  # type: ignore[arg-type]
    for i in range(len(outputs)):
        for j in range(i + 1, len(outputs)):
            assert not torch.allclose(outputs[i], outputs[j], atol=1e-3)


def test_unknown_activation_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown activation 'tanh'.*relu"):
        FeedForward(E, FFN, "tanh")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- encoder block


@pytest.mark.parametrize("masking", MASKINGS)
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_matches_torch(norm_first: bool, activation: str, masking: str) -> None:
    layer = nn.TransformerEncoderLayer(
        E, H, FFN, dropout=0.1, activation=activation, batch_first=True, norm_first=norm_first
    ).eval()
    _randomise_norms(layer)
    block = EncoderBlock.from_torch(layer).eval()
    x = torch.randn(B, S, E)
    torch_masks, our_masks = _torch_and_our_masks(masking, S)
    # Gradients stay enabled: torch's inference fast path zeroes padded outputs.
    expected = layer(x, **torch_masks)
    actual, weights = block(x, **our_masks)
    assert weights is None
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_encoder_block_from_torch_copies_bias_eps_and_module_activation() -> None:
    layer = nn.TransformerEncoderLayer(
        E, H, FFN, activation=nn.GELU(), batch_first=True, bias=False, layer_norm_eps=1e-2
    ).eval()
    _randomise_norms(layer)
    block = EncoderBlock.from_torch(layer).eval()
    assert block.feedforward.activation_name == "gelu"
    assert block.norm1.eps == 1e-2 and block.norm1.bias is None
    assert all(p.dtype == torch.float32 for p in block.parameters())
    x = torch.randn(B, S, E)
    torch.testing.assert_close(block(x)[0], layer(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_from_torch_keeps_dtype_and_mode(kind: str) -> None:
    block: EncoderBlock | DecoderBlock
    layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
    if kind == "encoder":
        encoder_layer = nn.TransformerEncoderLayer(E, H, FFN, dtype=torch.float64).eval()
        _randomise_norms(encoder_layer)
        block, layer = EncoderBlock.from_torch(encoder_layer), encoder_layer
    else:
        decoder_layer = nn.TransformerDecoderLayer(E, H, FFN, dtype=torch.float64).eval()
        _randomise_norms(decoder_layer)
        block, layer = DecoderBlock.from_torch(decoder_layer), decoder_layer
    assert not block.training
    assert all(p.dtype == torch.float64 for p in block.parameters())
    assert torch.equal(block.feedforward.in_proj.weight, layer.linear1.weight)
    assert torch.equal(block.norm2.weight, layer.norm2.weight)


@pytest.mark.parametrize(
    "activation", [nn.GELU(approximate="tanh"), torch.tanh, lambda t: F.relu(t) * 2]
)
def test_encoder_block_from_torch_refuses_other_activations(
    activation: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    layer = nn.TransformerEncoderLayer(E, H, FFN, activation=activation, batch_first=True)
    with pytest.raises(ValueError, match=r"activation .* is not supported"):
        EncoderBlock.from_torch(layer)


def test_encoder_block_returns_weights_per_head() -> None:
    block = EncoderBlock(BlockConfig(E, H, FFN))
    out, weights = block(torch.randn(B, S, E), need_weights=True)
    assert out.shape == (B, S, E)
    assert weights is not None and weights.shape == (B, H, S, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, S))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_gradients_reach_every_parameter(norm_first: bool) -> None:
    block = EncoderBlock(
        BlockConfig(E, H, FFN, activation="swiglu", norm_first=norm_first, dropout=0.1)
    )
    block(torch.randn(B, S, E))[0].square().sum().backward()
    for name, parameter in block.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


# --------------------------------------------------------------------------- decoder block


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_torch(norm_first: bool, activation: str) -> None:
    layer = nn.TransformerDecoderLayer(
        E, H, FFN, dropout=0.1, activation=activation, batch_first=True, norm_first=norm_first
    ).eval()
    _randomise_norms(layer)
    block = DecoderBlock.from_torch(layer).eval()
    x, memory = torch.randn(B, T, E), torch.randn(B, S, E)
    # Padding at the end only: with a causal mask, padding at position 0 would leave the
    # first query nothing to attend to (torch returns NaN there, we return zeros).
    target_padding = padding_mask(torch.tensor([T, T - 1, T - 3]), T)
    memory_padding = padding_mask(torch.tensor([S, 2, S - 1]), S)
    expected = layer(
        x,
        memory,
        tgt_mask=torch.ones(T, T, dtype=torch.bool).triu(diagonal=1),  # True = blocked
        tgt_is_causal=True,
        tgt_key_padding_mask=target_padding,
        memory_key_padding_mask=memory_padding,
    )
    actual, weights = block(
        x,
        memory,
        self_key_padding_mask=target_padding,
        memory_key_padding_mask=memory_padding,
    )
    assert weights is None
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_decoder_block_matches_torch_with_memory_mask() -> None:
    layer = nn.TransformerDecoderLayer(E, H, FFN, batch_first=True).eval()
    _randomise_norms(layer)
    block = DecoderBlock.from_torch(layer).eval()
    x, memory = torch.randn(B, T, E), torch.randn(B, S, E)
    allowed = torch.rand(T, S) > 0.5
    allowed[:, 0] = True  # every query keeps a key
    expected = layer(x, memory, memory_mask=~allowed)
    actual, _ = block(x, memory, memory_mask=allowed, causal=False)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_decoder_block_memory_dim_and_weights() -> None:
    block = DecoderBlock(BlockConfig(E, H, FFN), memory_dim=10)
    out, weights = block(torch.randn(B, T, E), torch.randn(B, S, 10), need_weights=True)
    assert out.shape == (B, T, E)
    assert weights is not None
    self_weights, cross_weights = weights
    assert self_weights.shape == (B, H, T, T)
    assert cross_weights.shape == (B, H, T, S)
    # causal by default: nothing above the diagonal
    assert torch.all(self_weights.triu(diagonal=1) == 0)


def test_decoder_block_from_torch_refuses_other_activations() -> None:
    layer = nn.TransformerDecoderLayer(E, H, FFN, activation=F.silu, batch_first=True)
    with pytest.raises(ValueError, match=r"activation .* is not supported"):
        DecoderBlock.from_torch(layer)
