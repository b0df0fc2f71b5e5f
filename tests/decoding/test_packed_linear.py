"""The decode's packed linear layers (selfattn.attention.packed_linear): the same product
as ``nn.Linear`` to float32 rounding, each row's result independent of the other rows,
and the one-row rule that keeps batch-1 greedy on ``F.linear``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from selfattn.attention import packed_linear
from selfattn.attention.packed_linear import PackedLinears, packable
from selfattn.decoding import beam_search, greedy

pytestmark = pytest.mark.skipif(
    not packable(torch.zeros(1), torch.zeros(1)), reason="this PyTorch build has no oneDNN"
)


def _layer(fan_in: int, fan_out: int, bias: bool = True) -> nn.Linear:
    return nn.Linear(fan_in, fan_out, bias=bias).requires_grad_(False)


@pytest.mark.parametrize(("fan_in", "fan_out"), [(32, 64), (64, 32), (256, 1024), (256, 3000)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_packed_product_is_the_linear_layer(fan_in: int, fan_out: int, bias: bool) -> None:
    layer = _layer(fan_in, fan_out, bias)
    x = torch.randn(5, 1, fan_in)
    with torch.no_grad():
        packed = PackedLinears()(layer, x)
        reference = F.linear(x.double(), layer.weight.double(), _double(layer.bias))
    assert packed.shape == (5, 1, fan_out) and packed.dtype == torch.float32
    torch.testing.assert_close(packed.double(), reference, atol=1e-5, rtol=1e-5)


def _double(bias: torch.Tensor | None) -> torch.Tensor | None:
    return None if bias is None else bias.double()


@pytest.mark.parametrize(("fan_in", "fan_out"), [(32, 64), (64, 32), (256, 256), (256, 1024)])
def test_a_rows_result_does_not_depend_on_the_other_rows(fan_in: int, fan_out: int) -> None:
    """The property the decoding tests need: rows that leave the batch change nothing for
    the rows that stay (MKL's products do not have it: 1, 2–3 and ≥ 4 rows round apart)."""
    layer = _layer(fan_in, fan_out)
    linears = PackedLinears()
    x = torch.randn(40, fan_in)
    with torch.no_grad():
        linears(layer, x[:2])  # the decode has had several rows: every product is packed
        alone = torch.cat([linears(layer, x[r : r + 1]) for r in range(40)])
        for rows in range(1, 41):
            assert torch.equal(linears(layer, x[:rows]), alone[:rows]), rows


def test_stacked_projections_are_the_separate_ones() -> None:
    """Query, key and value stacked as one product (grouped-query sizes: 64, 16, 16)."""
    layers = (_layer(64, 64), _layer(64, 16), _layer(64, 16, bias=False))
    x = torch.randn(6, 1, 64)
    with torch.no_grad():
        q, k, v = PackedLinears().stacked(layers, x)
        for out, layer in zip((q, k, v), layers, strict=True):
            assert out.shape == (6, 1, layer.out_features)
            reference = F.linear(x.double(), layer.weight.double(), _double(layer.bias))
            torch.testing.assert_close(out.double(), reference, atol=1e-5, rtol=1e-5)


def test_a_one_row_decode_keeps_the_plain_product() -> None:
    """Batch-1 greedy multiplies by MKL's one-row products until the decode has a second
    row: ``F.linear`` bit for bit, except a widening layer (out > in), which reads an
    ``(in, out)`` copy of its weight; from then on every product is packed."""
    narrowing, widening = _layer(1024, 256), _layer(256, 1024)
    linears = PackedLinears()
    one = torch.randn(1, 1, 256)
    with torch.no_grad():
        wide = linears(widening, one)
        laid_out = widening.weight.t().contiguous()
        assert torch.equal(wide[0], torch.addmm(widening.bias, one[0], laid_out))
        torch.testing.assert_close(wide, F.linear(one, widening.weight, widening.bias))
        hidden = torch.randn(1, 1, 1024)
        assert torch.equal(
            linears(narrowing, hidden), F.linear(hidden, narrowing.weight, narrowing.bias)
        )
        assert not linears.applies(one, widening.weight)
        linears(widening, torch.randn(3, 256))
        assert linears.applies(one, widening.weight)


@pytest.mark.parametrize(
    "case", ["float64", "gradient", "mkldnn off"], ids=["float64", "gradient", "mkldnn-off"]
)
def test_what_cannot_be_packed_runs_the_linear_layer(
    monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    layer = nn.Linear(32, 64).requires_grad_(case == "gradient")
    x = torch.randn(4, 32)
    if case == "float64":
        layer, x = layer.double(), x.double()
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", case != "mkldnn off")
    out = PackedLinears()(layer, x)
    assert torch.equal(out, F.linear(x, layer.weight, layer.bias))
    assert out.requires_grad == (case == "gradient")


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_packed_decoding_decodes_what_the_plain_layers_decode(
    make_model, make_batch, monkeypatch: pytest.MonkeyPatch, search: str
) -> None:
    """The tiny model's greedy and beam decodes with the packed weights (several rows) and
    with oneDNN switched off: the same tokens, log-probabilities within float32 rounding."""
    model = make_model("vocab", "sinusoidal")
    encoded, num_extended = make_batch(model, batch=4)
    packs = []
    real = packed_linear._pack

    def counted(layers: tuple[nn.Linear, ...]) -> object:
        packs.append(layers)
        return real(layers)

    monkeypatch.setattr(packed_linear, "_pack", counted)

    def decode() -> object:
        if search == "greedy":
            return greedy(model, encoded, max_len=12, num_extended=num_extended)
        return beam_search(model, encoded, beam_size=3, max_len=12, num_extended=num_extended)

    packed = decode()
    # Packed once each: per block the stacked query/key/value, the self-attention's output,
    # the cross-attention's query and output and the two feed-forward layers; and the
    # vocabulary projection.
    blocks = model.decoder.layers
    expected = [
        (block.self_attn.q_proj, block.self_attn.k_proj, block.self_attn.v_proj) for block in blocks
    ]
    for block in blocks:
        expected += [(block.self_attn.out_proj,), (block.cross_attn.q_proj,)]
        expected += [(block.cross_attn.out_proj,), (block.feedforward.in_proj,)]
        expected += [(block.feedforward.out_proj,)]
    expected.append((model.out_proj,))
    assert sorted(map(_ids, packs)) == sorted(map(_ids, expected))
    packs.clear()
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
    plain = decode()
    assert not packs
    assert packed.tokens == plain.tokens  # type: ignore[attr-defined]
    torch.testing.assert_close(packed.log_prob, plain.log_prob, atol=1e-5, rtol=1e-5)  # type: ignore[attr-defined]


def _ids(layers: tuple[nn.Linear, ...]) -> tuple[int, ...]:
    return tuple(id(layer) for layer in layers)
