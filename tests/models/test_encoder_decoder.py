"""Encoder and decoder stacks: symmetry, masking and sharing properties, and that they train."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from selfattn.attention import adjacency_mask, padding_mask
from selfattn.blocks import EncoderBlock
from selfattn.models import Decoder, Encoder, StackConfig
from selfattn.positional import POSITIONAL, AbsolutePositional, RelativePositional

B, L, T, S, E, H, FFN = 2, 8, 6, 5, 16, 4, 32
ABSOLUTE = sorted(name for name, cls in POSITIONAL.items() if issubclass(cls, AbsolutePositional))
RELATIVE = sorted(set(POSITIONAL) - set(ABSOLUTE))


def _encoder(num_layers: int = 2, **options: object) -> Encoder:
    config = StackConfig(E, H, FFN, num_layers=num_layers, max_len=32, **options)  # type: ignore[arg-type]
    return Encoder(config).eval()


def _decoder(num_layers: int, **options: object) -> Decoder:
    return Decoder(StackConfig(E, H, FFN, num_layers=num_layers, **options))  # type: ignore[arg-type]


def _relative_encodings(encoder: Encoder) -> list[RelativePositional | None]:
    blocks = [layer for layer in encoder.layers if isinstance(layer, EncoderBlock)]
    assert len(blocks) == encoder.num_layers
    return [block.self_attn.positional for block in blocks]


def _parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _changed_at(x: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """A copy of ``x`` (B, L, E) with fresh random vectors at ``positions``."""
    changed = x.clone()
    changed[:, positions] = torch.randn(x.shape[0], len(positions), x.shape[-1])
    return changed


# --------------------------------------------------------------------------- symmetry


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_without_positions_is_permutation_equivariant(norm_first: bool) -> None:
    encoder = _encoder(norm_first=norm_first)
    x = torch.randn(B, L, E)
    padding = padding_mask(torch.tensor([L, L - 3]), L)
    permutation = torch.randperm(L)
    out = encoder(x, key_padding_mask=padding).last_hidden_state
    permuted = encoder(
        x[:, permutation], key_padding_mask=padding[:, permutation]
    ).last_hidden_state
    torch.testing.assert_close(permuted, out[:, permutation], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ABSOLUTE)
def test_absolute_positions_break_permutation_equivariance(name: str) -> None:
    encoder = _encoder(positional=name)
    assert encoder.absolute is not None
    x = torch.randn(B, L, E)
    permutation = torch.arange(L).roll(1)
    out = encoder(x).last_hidden_state
    permuted = encoder(x[:, permutation]).last_hidden_state
    assert not torch.allclose(permuted, out[:, permutation], atol=1e-5)


@pytest.mark.parametrize("name", RELATIVE)
def test_relative_positions_run_inside_the_encoder(name: str) -> None:
    encoder = _encoder(positional=name).train()
    assert encoder.absolute is None
    encodings = _relative_encodings(encoder)
    assert all(encoding is not None for encoding in encodings)
    assert encodings[0] is not encodings[1]  # one instance per block
    x = torch.randn(B, L, E, requires_grad=True)
    output = encoder(x, need_weights=True)
    assert output.last_hidden_state.shape == (B, L, E)
    assert output.attentions is not None
    assert [a.shape for a in output.attentions] == [(B, H, L, L)] * 2
    output.last_hidden_state.square().sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for parameter_name, parameter in encoder.named_parameters():
        assert parameter.grad is not None, parameter_name
        assert torch.isfinite(parameter.grad).all(), parameter_name
        assert parameter.grad.abs().sum() > 0, parameter_name


# --------------------------------------------------------------------------- masking


def test_causal_encoder_does_not_look_ahead_through_layers() -> None:
    encoder = _encoder(num_layers=3)
    x = torch.randn(B, L, E)
    for t in range(L - 1):
        before = encoder(x, causal=True).last_hidden_state
        after = encoder(_changed_at(x, list(range(t + 1, L))), causal=True).last_hidden_state
        torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], atol=1e-5, rtol=1e-5)
        assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :], atol=1e-3)


def test_window_reach_grows_by_window_per_layer() -> None:
    window, i, length = 1, 6, 12
    encoder = _encoder(num_layers=2)
    x = torch.randn(B, length, E)
    reference = encoder(x, window=window).last_hidden_state[:, i]
    for j in range(length):
        out = encoder(_changed_at(x, [j]), window=window).last_hidden_state[:, i]
        if abs(i - j) > 2 * window:
            torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5)
        elif abs(i - j) <= window:
            assert not torch.allclose(out, reference, atol=1e-3), j


def test_graph_mask_limits_attention_to_neighbours() -> None:
    num_nodes = 6
    edges = torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]])  # a path 0 – 1 – … – 5
    adjacency = adjacency_mask(edges, num_nodes, undirected=True)
    encoder = _encoder(num_layers=1)
    x = torch.randn(B, num_nodes, E)
    node = 2
    reference = encoder(x, mask=adjacency).last_hidden_state[:, node]
    for other in range(num_nodes):
        out = encoder(_changed_at(x, [other]), mask=adjacency).last_hidden_state[:, node]
        if adjacency[node, other]:
            assert not torch.allclose(out, reference, atol=1e-3), other
        else:
            torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- outputs


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_output_fields(norm_first: bool) -> None:
    encoder = _encoder(num_layers=3, norm_first=norm_first)
    assert (encoder.norm is not None) == norm_first  # final norm only where blocks lack one
    x = torch.randn(B, L, E)
    output = encoder(x)
    assert output.attentions is None
    assert len(output.hidden_states) == 4
    torch.testing.assert_close(output.hidden_states[0], x)  # no positional, no dropout
    assert output.hidden_states[-1] is output.last_hidden_state
    with_weights = encoder(x, need_weights=True)
    assert with_weights.attentions is not None
    assert [a.shape for a in with_weights.attentions] == [(B, H, L, L)] * 3


def test_absolute_encoding_is_added_once_before_the_blocks() -> None:
    encoder = _encoder(positional="sinusoidal")
    assert encoder.absolute is not None
    assert _relative_encodings(encoder) == [None, None]
    x = torch.randn(B, L, E)
    torch.testing.assert_close(encoder(x).hidden_states[0], encoder.absolute(x))


# --------------------------------------------------------------------------- universal


def test_universal_transformer_shares_one_block() -> None:
    universal = _encoder(num_layers=4, share_weights=True, positional="relative")
    assert _parameter_count(universal) == _parameter_count(
        _encoder(num_layers=1, positional="relative")
    )
    assert all(layer is universal.layers[0] for layer in universal.layers)
    shared_encodings = _relative_encodings(universal)
    assert shared_encodings[0] is not None
    assert all(encoding is shared_encodings[0] for encoding in shared_encodings)
    output = universal(torch.randn(B, L, E))
    assert len(output.hidden_states) == 5
    # the same block applied again gives a different state: depth still counts
    assert not torch.allclose(output.hidden_states[1], output.hidden_states[2], atol=1e-3)


def test_universal_decoder_shares_one_block() -> None:
    universal = _decoder(3, share_weights=True)
    assert _parameter_count(universal) == _parameter_count(_decoder(1))
    output = universal(torch.randn(B, T, E), torch.randn(B, S, E))
    assert len(output.hidden_states) == 4


# --------------------------------------------------------------------------- decoder


@pytest.mark.parametrize("positional", [None, "learned", "rotary"])
def test_decoder_does_not_leak_the_future(positional: str | None) -> None:
    decoder = _decoder(3, positional=positional, max_len=32).eval()
    x, memory = torch.randn(B, T, E), torch.randn(B, S, E)
    before = decoder(x, memory).last_hidden_state
    for t in range(T - 1):
        after = decoder(_changed_at(x, list(range(t + 1, T))), memory).last_hidden_state
        torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], atol=1e-5, rtol=1e-5)
    # every target position reads the whole memory
    other_memory = decoder(x, _changed_at(memory, [S - 1])).last_hidden_state
    assert not torch.allclose(other_memory[:, 0], before[:, 0], atol=1e-3)


def test_decoder_outputs_and_weights() -> None:
    decoder = Decoder(StackConfig(E, H, FFN, num_layers=2, norm_first=True), memory_dim=12)
    assert decoder.norm is not None
    memory_padding = padding_mask(torch.tensor([S, 2]), S)
    output = decoder(
        torch.randn(B, T, E),
        torch.randn(B, S, 12),
        memory_key_padding_mask=memory_padding,
        need_weights=True,
    )
    assert output.last_hidden_state.shape == (B, T, E)
    assert len(output.hidden_states) == 3
    assert output.self_attentions is not None and output.cross_attentions is not None
    assert [w.shape for w in output.self_attentions] == [(B, H, T, T)] * 2
    assert [w.shape for w in output.cross_attentions] == [(B, H, T, S)] * 2
    assert torch.all(output.cross_attentions[0][1, :, :, 2:] == 0)  # padding gets no weight
    no_weights = decoder(torch.randn(B, T, E), torch.randn(B, S, 12))
    assert no_weights.self_attentions is None and no_weights.cross_attentions is None


def test_decoder_memory_per_layer() -> None:
    decoder = _decoder(2).eval()
    x = torch.randn(B, T, E)
    memories = [torch.randn(B, S, E), torch.randn(B, S, E)]
    output = decoder(x, memories).last_hidden_state
    # by hand: block l reads memory l
    expected = x
    for layer, memory in zip(decoder.layers, memories, strict=True):
        expected, _ = layer(expected, memory)
    torch.testing.assert_close(output, expected)
    # a single tensor means the same memory for every block
    torch.testing.assert_close(
        decoder(x, memories[0]).last_hidden_state,
        decoder(x, [memories[0], memories[0]]).last_hidden_state,
    )
    assert not torch.allclose(output, decoder(x, memories[0]).last_hidden_state, atol=1e-3)


def test_decoder_memory_list_of_wrong_length_is_refused() -> None:
    decoder = _decoder(2)
    with pytest.raises(ValueError, match="list of 3 tensors but the decoder has 2 layers"):
        decoder(torch.randn(B, T, E), [torch.randn(B, S, E)] * 3)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("stack", [Encoder, Decoder])
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"embed_dim": 10}, r"embed_dim \(10\) must be divisible by num_heads \(4\)"),
        ({"num_layers": 0}, "num_layers must be >= 1"),
        ({"activation": "tanh"}, "unknown activation 'tanh'; choose one of"),
        ({"positional": "wavelet"}, "unknown positional encoding 'wavelet'; .*'sinusoidal'"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
    ],
)
def test_bad_configuration_is_refused(
    stack: type[nn.Module], options: dict[str, object], message: str
) -> None:
    config: dict[str, object] = {"embed_dim": E, "num_heads": H, "num_layers": 2, "ffn_dim": FFN}
    config.update(options)
    with pytest.raises(ValueError, match=message):
        stack(StackConfig(**config))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- training


def test_tiny_encoder_learns_to_mark_the_maximum() -> None:
    """Label each token by whether it is the largest in its sequence: needs attention."""
    values = torch.randn(32, L, 1)
    labels = (values == values.max(dim=1, keepdim=True).values).squeeze(-1).long()
    embed, head = nn.Linear(1, 32), nn.Linear(32, 2)
    encoder = Encoder(StackConfig(32, 4, 64, num_layers=2))
    parameters = [*embed.parameters(), *encoder.parameters(), *head.parameters()]
    optimiser = torch.optim.Adam(parameters, lr=3e-3)
    accuracy = 0.0
    for _ in range(300):
        optimiser.zero_grad()
        logits = head(encoder(embed(values)).last_hidden_state)  # (N, L, 2)
        F.cross_entropy(logits.flatten(0, 1), labels.flatten()).backward()
        optimiser.step()
        accuracy = (logits.argmax(-1) == labels).float().mean().item()
        if accuracy == 1.0:
            break
    assert accuracy == 1.0
