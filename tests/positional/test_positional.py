"""Contract tests for every registered positional encoding, then per-encoding properties."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from selfattn.attention import MultiHeadAttention
from selfattn.positional import (
    POSITIONAL,
    AbsolutePositional,
    ALiBiPositional,
    FloaterPositional,
    LearnedPositional,
    RelativePositional,
    RNNPositional,
    RotaryPositional,
    ShawRelativePositional,
    alibi_slopes,
    build_positional,
    positional_options,
)

E, H, MAX_LEN = 32, 4, 64
D = E // H
ABSOLUTE = [name for name, cls in POSITIONAL.items() if issubclass(cls, AbsolutePositional)]
RELATIVE = [name for name, cls in POSITIONAL.items() if issubclass(cls, RelativePositional)]


def build(name: str, **options: object) -> AbsolutePositional | RelativePositional:
    return build_positional(name, embed_dim=E, num_heads=H, max_len=MAX_LEN, **options)


def scores(pos: RelativePositional, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """Attention scores ``(B, H, T, S)`` as MultiHeadAttention forms them with the hooks."""
    scale = q.shape[-1] ** -0.5
    q, k = pos.rotate(q, k, q_pos, k_pos)
    total = scale * q @ k.transpose(-1, -2)
    bias = pos.score_bias(q, q_pos, k_pos, scale)
    return total if bias is None else total + bias


def assert_toeplitz(matrix: Tensor) -> None:
    """Constant along every diagonal: entry (i, j) depends only on j − i."""
    torch.testing.assert_close(matrix[..., 1:, 1:], matrix[..., :-1, :-1])


# ---------------------------------------------------------------- registry


def test_registry_partitions_into_absolute_and_relative() -> None:
    assert set(ABSOLUTE) | set(RELATIVE) == set(POSITIONAL)
    assert not set(ABSOLUTE) & set(RELATIVE)
    assert {"sinusoidal", "learned", "floater", "rnn", "relative", "rotary", "alibi"} <= set(
        POSITIONAL
    )


@pytest.mark.parametrize("name", list(POSITIONAL))
def test_builds_from_common_arguments(name: str) -> None:
    assert isinstance(build(name), POSITIONAL[name])


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="sinusoidal") as info:
        build("nope")
    assert all(name in str(info.value) for name in POSITIONAL)


@pytest.mark.parametrize("name", list(POSITIONAL))
def test_unknown_option_is_refused(name: str) -> None:
    with pytest.raises(TypeError, match="no_such_option"):
        build(name, no_such_option=1)


def test_options_are_listed_and_used() -> None:
    assert positional_options("relative") == {"max_distance": 16, "values": True}
    relative = build("relative", max_distance=3, values=False)
    assert isinstance(relative, ShawRelativePositional)
    assert relative.key_table.shape == (7, D) and not relative.needs_weights


def test_every_encoding_is_built_from_the_arguments_its_constructor_names() -> None:
    """The registry passes embed_dim, num_heads, head_dim (E // H) and max_len to the
    constructors that name them; the other parameters are the encoding's options."""

    class Scaled(RelativePositional):
        def __init__(self, head_dim: int, num_heads: int, scale: float = 2.0) -> None:
            super().__init__()
            self.head_dim, self.num_heads, self.scale = head_dim, num_heads, scale

    assert Scaled.options() == {"scale": 2.0}
    built = Scaled.build(embed_dim=E, num_heads=H, max_len=MAX_LEN, scale=0.5)
    assert (built.head_dim, built.num_heads, built.scale) == (D, H, 0.5)
    assert positional_options("floater") == {"hidden_dim": 64, "delta": None, "substeps": 1}
    learned = build("learned")
    assert isinstance(learned, LearnedPositional)
    assert learned.table.weight.shape == (MAX_LEN, E)
    with pytest.raises(ValueError, match="divisible"):
        Scaled.build(embed_dim=E, num_heads=5)


# ---------------------------------------------------------------- absolute contract


@pytest.mark.parametrize("name", ABSOLUTE)
def test_absolute_adds_position_dependent_vectors(name: str) -> None:
    pos = build(name)
    assert isinstance(pos, AbsolutePositional)
    x = torch.randn(2, 10, E)
    y = pos(x)
    assert y.shape == x.shape
    assert not torch.allclose(y, x)
    added = pos.encoding(10)
    torch.testing.assert_close(y, x + added)  # the same encoding for every batch element
    assert torch.cdist(added, added).add(torch.eye(10)).min() > 1e-6  # all rows differ


@pytest.mark.parametrize("name", ABSOLUTE)
def test_absolute_offset_matches_slice_of_longer_encoding(name: str) -> None:
    pos = build(name)
    full = pos.encoding(20)
    for offset in (0, 1, 7, 13):
        torch.testing.assert_close(pos.encoding(7, offset), full[offset : offset + 7])
    x = torch.randn(1, 3, E)
    torch.testing.assert_close(pos(x, offset=5), x + full[5:8])


@pytest.mark.parametrize("name", ABSOLUTE)
def test_absolute_offset_consistency_in_inference(name: str) -> None:
    pos = build(name).eval()
    with torch.no_grad():  # one position at a time, as in decoding (extends any cache)
        steps = torch.cat([pos.encoding(1, offset) for offset in range(12)])
        torch.testing.assert_close(pos.encoding(4, 8), steps[8:])
    full = pos.train().encoding(12).detach()  # recomputed from scratch
    torch.testing.assert_close(steps, full)


@pytest.mark.parametrize("name", ABSOLUTE)
def test_absolute_rejects_bad_input(name: str) -> None:
    pos = build(name)
    with pytest.raises(ValueError, match=r"\(B, L, E\)"):
        pos(torch.randn(10, E))
    with pytest.raises(ValueError):
        pos.encoding(3, offset=-1)


# ---------------------------------------------------------------- relative contract


@pytest.mark.parametrize("name", RELATIVE)
@pytest.mark.parametrize("query_len", [9, 4])
def test_relative_scores_depend_only_on_offset(name: str, query_len: int) -> None:
    pos = build(name)
    assert isinstance(pos, RelativePositional)
    key_len = 9
    q = torch.randn(2, H, 1, D).expand(2, H, query_len, D)  # same content at every position
    k = torch.randn(2, H, 1, D).expand(2, H, key_len, D)
    q_pos = torch.arange(key_len - query_len, key_len)  # decoding: queries are the last ones
    k_pos = torch.arange(key_len)
    matrix = scores(pos, q, k, q_pos, k_pos)
    assert matrix.shape == (2, H, query_len, key_len)
    assert_toeplitz(matrix)
    assert not torch.allclose(matrix[..., -1, 0], matrix[..., -1, -1])  # positions matter


@pytest.mark.parametrize("name", RELATIVE)
def test_relative_value_term_shape(name: str) -> None:
    pos = build(name)
    assert isinstance(pos, RelativePositional)
    weights = torch.softmax(torch.randn(2, H, 5, 7), dim=-1)
    term = pos.value_term(weights, torch.arange(2, 7), torch.arange(7))
    if pos.needs_weights:
        assert term is not None and term.shape == (2, H, 5, D)
    else:
        assert term is None


@pytest.mark.parametrize("name", RELATIVE)
def test_relative_plugs_into_multihead_attention(name: str) -> None:
    pos = build(name)
    assert isinstance(pos, RelativePositional)
    attention = MultiHeadAttention(E, H, positional=pos)
    x = torch.randn(2, 6, E)
    out, _ = attention(x)
    assert out.shape == (2, 6, E)
    # Without positions attention is permutation-equivariant; with them it is not.
    order = torch.tensor([5, 3, 0, 1, 4, 2])
    permuted, _ = attention(x[:, order])
    assert not torch.allclose(permuted, out[:, order], atol=1e-5)


# ---------------------------------------------------------------- sinusoidal


def test_sinusoidal_matches_closed_form() -> None:
    pos = build("sinusoidal")
    assert isinstance(pos, AbsolutePositional)
    for length, offset in [(MAX_LEN, 0), (40, 50)]:  # cached rows, then rows past max_len
        expected = torch.empty(length, E, dtype=torch.float64)
        for p in range(offset, offset + length):
            for i in range(E // 2):
                angle = p / 10000 ** (2 * i / E)
                expected[p - offset, 2 * i] = math.sin(angle)
                expected[p - offset, 2 * i + 1] = math.cos(angle)
        actual = pos.encoding(length, offset).double()
        torch.testing.assert_close(actual, expected, atol=1e-6, rtol=0)


def test_sinusoidal_needs_even_dimension() -> None:
    with pytest.raises(ValueError, match="even"):
        build_positional("sinusoidal", embed_dim=33, num_heads=3)


def test_sinusoidal_has_no_parameters() -> None:
    assert not list(build("sinusoidal").parameters())
    assert not build("sinusoidal").state_dict()


# ---------------------------------------------------------------- learned


def test_learned_refuses_positions_past_the_table() -> None:
    pos = build("learned")
    assert pos.encoding(MAX_LEN).shape == (MAX_LEN, E)
    with pytest.raises(ValueError, match="65") as info:
        pos(torch.randn(1, MAX_LEN + 1, E))
    assert "64" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="65"):
        pos.encoding(5, offset=60)


def test_learned_clamp_reuses_last_row() -> None:
    pos = build("learned", extrapolation="clamp")
    assert isinstance(pos, LearnedPositional)
    table = pos.table.weight
    encoding = pos.encoding(MAX_LEN + 5)
    torch.testing.assert_close(encoding[:MAX_LEN], table)
    torch.testing.assert_close(encoding[MAX_LEN:], table[-1].expand(5, E))


def test_learned_validates_extrapolation() -> None:
    with pytest.raises(ValueError, match="extrapolation"):
        build("learned", extrapolation="wrap")


# ---------------------------------------------------------------- floater and rnn


@pytest.mark.parametrize("name", ["floater", "rnn"])
def test_generated_encodings_train_and_extrapolate(name: str) -> None:
    pos = build(name)
    encoding = pos.encoding(MAX_LEN + 16)  # longer than max_len
    assert encoding.shape == (MAX_LEN + 16, E) and torch.isfinite(encoding).all()
    encoding.square().sum().backward()
    for param_name, param in pos.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, param_name


@pytest.mark.parametrize("name", ["floater", "rnn"])
def test_generated_cache_follows_parameter_updates(name: str) -> None:
    pos = build(name).eval()
    with torch.no_grad():
        before = pos.encoding(6)
        for param in pos.parameters():
            param.add_(0.1)
        after = pos.encoding(6)
    pos.train()
    torch.testing.assert_close(after, pos.encoding(6).detach())
    assert not torch.allclose(before, after)


def _floater_with_time_only_field(weight: float, amplitude: Tensor) -> FloaterPositional:
    """h(t, p) = amplitude · tanh(weight · t), so p(t) = p(0) + amplitude/weight · log cosh."""
    pos = FloaterPositional(E, max_len=16, hidden_dim=4).double()
    first, second = pos.field[0], pos.field[2]
    with torch.no_grad():
        for param in pos.field.parameters():
            param.zero_()
        first.weight[0, E] = weight  # hidden unit 0 reads only t
        second.weight[:, 0] = amplitude
    return pos


def test_floater_rk4_matches_analytic_solution() -> None:
    weight, amplitude = 3.0, torch.randn(E, dtype=torch.float64)
    pos = _floater_with_time_only_field(weight, amplitude)
    t = torch.arange(40, dtype=torch.float64) / 16  # Δ = 1/max_len, running past t = 1
    expected = pos.start + (amplitude / weight) * torch.log(torch.cosh(weight * t))[:, None]
    coarse_error = (pos.encoding(40) - expected).abs().max()
    pos.substeps = 8
    fine_error = (pos.encoding(40) - expected).abs().max()
    assert coarse_error < 1e-5
    assert fine_error < coarse_error / 1000  # fourth order: 8 substeps → about 8⁴ smaller


def test_floater_one_substep_close_to_fine_integration() -> None:
    coarse = FloaterPositional(E, max_len=32, substeps=1).double()
    fine = FloaterPositional(E, max_len=32, substeps=64).double()
    fine.load_state_dict(coarse.state_dict())
    torch.testing.assert_close(coarse.encoding(40), fine.encoding(40), atol=1e-8, rtol=0)


def test_floater_and_rnn_validate_options() -> None:
    with pytest.raises(ValueError, match="substeps"):
        build("floater", substeps=0)
    with pytest.raises(ValueError, match="delta"):
        build("floater", delta=-1.0)
    with pytest.raises(ValueError, match="input_dim"):
        build("rnn", input_dim=0)
    assert isinstance(build("rnn"), RNNPositional)


# ---------------------------------------------------------------- Shaw et al. relative


def _naive_score_bias(
    pos: ShawRelativePositional, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float
) -> Tensor:
    table, max_distance = pos.key_table.double(), pos.max_distance
    batch, heads, queries, _ = q.shape
    out = torch.zeros(batch, heads, queries, len(k_pos), dtype=torch.float64)
    for i in range(queries):
        for j in range(len(k_pos)):
            row = min(max(int(k_pos[j] - q_pos[i]), -max_distance), max_distance) + max_distance
            out[:, :, i, j] = scale * (q[:, :, i].double() @ table[row])
    return out


def _naive_value_term(
    pos: ShawRelativePositional, weights: Tensor, q_pos: Tensor, k_pos: Tensor
) -> Tensor:
    assert pos.value_table is not None
    table, max_distance = pos.value_table.double(), pos.max_distance
    batch, heads, queries, keys = weights.shape
    out = torch.zeros(batch, heads, queries, table.shape[1], dtype=torch.float64)
    for i in range(queries):
        for j in range(keys):
            row = min(max(int(k_pos[j] - q_pos[i]), -max_distance), max_distance) + max_distance
            out[:, :, i] += weights[:, :, i, j, None].double() * table[row]
    return out


def test_shaw_relative_matches_naive_loops() -> None:
    pos = ShawRelativePositional(D, max_distance=3)
    q = torch.randn(2, H, 5, D)
    weights = torch.softmax(torch.randn(2, H, 5, 12), dim=-1)
    q_pos, k_pos = torch.arange(7, 12), torch.arange(12)
    bias = pos.score_bias(q, q_pos, k_pos, scale=0.5)
    torch.testing.assert_close(bias.double(), _naive_score_bias(pos, q, q_pos, k_pos, 0.5))
    term = pos.value_term(weights, q_pos, k_pos)
    assert term is not None
    torch.testing.assert_close(term.double(), _naive_value_term(pos, weights, q_pos, k_pos))


def test_shaw_relative_clips_far_offsets() -> None:
    max_distance = 4
    pos = ShawRelativePositional(D, max_distance=max_distance)
    q = torch.randn(1, H, 1, D)
    offsets = torch.arange(-max_distance - 3, max_distance + 4)
    bias = pos.score_bias(q, torch.zeros(1, dtype=torch.long), offsets, scale=1.0)[0, :, 0]
    torch.testing.assert_close(bias[:, -1], bias[:, offsets == max_distance].squeeze(-1))
    torch.testing.assert_close(bias[:, 0], bias[:, offsets == -max_distance].squeeze(-1))
    assert not torch.allclose(bias[:, offsets == 0], bias[:, offsets == 1])


def test_shaw_relative_gradients_reach_both_tables() -> None:
    pos = ShawRelativePositional(D, max_distance=2)
    q, weights = torch.randn(1, H, 6, D), torch.softmax(torch.randn(1, H, 6, 6), dim=-1)
    positions = torch.arange(6)
    term = pos.value_term(weights, positions, positions)
    assert term is not None
    (pos.score_bias(q, positions, positions, 1.0).sum() + term.sum()).backward()
    assert pos.key_table.grad is not None and pos.value_table is not None
    assert pos.value_table.grad is not None


# ---------------------------------------------------------------- rotary


def test_rotary_preserves_norms_and_supports_grouped_keys() -> None:
    pos = build("rotary")
    q, k = torch.randn(2, H, 6, D), torch.randn(2, 1, 6, D)  # one key head (multi-query)
    q_rot, k_rot = pos.rotate(q, k, torch.arange(6), torch.arange(6))
    assert q_rot.shape == q.shape and k_rot.shape == k.shape
    torch.testing.assert_close(q_rot.norm(dim=-1), q.norm(dim=-1))
    torch.testing.assert_close(k_rot.norm(dim=-1), k.norm(dim=-1))
    torch.testing.assert_close(q_rot[..., 0, :], q[..., 0, :])  # position 0: no rotation


def test_rotary_query_offset_equals_rotating_at_that_position() -> None:
    pos = build("rotary")
    vectors = torch.randn(1, H, 10, D)
    full, _ = pos.rotate(vectors, vectors, torch.arange(10), torch.arange(10))
    last, _ = pos.rotate(vectors[:, :, 7:8], vectors, torch.tensor([7]), torch.arange(10))
    torch.testing.assert_close(last, full[:, :, 7:8])


def test_rotary_rotates_half_pairs_by_position_angle() -> None:
    pos = RotaryPositional(4, base=100.0)  # θ = (1, 1/10); pairs (0, 2) and (1, 3)
    x = torch.tensor([[[[1.0, 0.0, 0.0, 0.0]]]])
    rotated, _ = pos.rotate(x, x, torch.tensor([3]), torch.tensor([3]))
    expected = torch.tensor([math.cos(3.0), 0.0, math.sin(3.0), 0.0])
    torch.testing.assert_close(rotated[0, 0, 0], expected)


def test_rotary_needs_even_head_dim() -> None:
    with pytest.raises(ValueError, match="even"):
        build_positional("rotary", embed_dim=12, num_heads=4)
    assert not list(build("rotary").parameters())


# ---------------------------------------------------------------- ALiBi


def test_alibi_slopes() -> None:
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0**-h for h in range(1, 9)]))
    torch.testing.assert_close(
        alibi_slopes(4), torch.tensor([2.0 ** (-2 * h) for h in range(1, 5)])
    )
    # Not a power of two: the 4-head slopes, then every other one of the 8-head slopes.
    six = alibi_slopes(6)
    torch.testing.assert_close(six[:4], alibi_slopes(4))
    torch.testing.assert_close(six[4:], alibi_slopes(8)[0::2][:2])
    assert len(set(six.tolist())) == 6


def test_alibi_bias_is_linear_in_distance() -> None:
    pos = build("alibi")
    assert isinstance(pos, ALiBiPositional)
    q = torch.randn(2, H, 5, D)
    bias = pos.score_bias(q, torch.arange(5), torch.arange(5), scale=1.0)
    assert bias.shape == (1, H, 5, 5)
    distance = (torch.arange(5)[None, :] - torch.arange(5)[:, None]).abs().float()
    torch.testing.assert_close(bias, -alibi_slopes(H)[None, :, None, None] * distance)
    torch.testing.assert_close(bias, bias.transpose(-1, -2))


def test_alibi_causal_only_penalises_the_past() -> None:
    pos = build("alibi", causal_only=True)
    bias = pos.score_bias(torch.randn(1, H, 4, D), torch.arange(4), torch.arange(4), 1.0)
    slopes = alibi_slopes(H)
    torch.testing.assert_close(bias[0, :, 3, 0], -3 * slopes)
    assert torch.all(bias[0].triu(diagonal=1) == 0)
