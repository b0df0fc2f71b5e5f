"""The decode's packed linear layers (selfattn.attention.packed_linear): the same product
as ``nn.Linear`` to float32 rounding, each row's result independent of the other rows,
from a decode's first row on (batch-1 greedy included)."""

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


def test_a_one_row_decode_is_packed_from_its_first_row() -> None:
    """Batch-1 greedy multiplies by the packed weights from its first step (MKL's one-row
    products round apart from its several-row ones): one row alone gets, bit for bit, what
    it gets among others, the stacked query, key and value projections included."""
    layers = (_layer(256, 256), _layer(256, 64), _layer(256, 64, bias=False))
    x = torch.randn(5, 1, 256)
    with torch.no_grad():
        alone = PackedLinears()
        assert alone.applies(x[:1], layers[0].weight)
        first = alone.stacked(layers, x[:1])
        together = PackedLinears().stacked(layers, x)
    for one, many in zip(first, together, strict=True):
        assert torch.equal(one, many[:1])


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


@pytest.mark.parametrize(
    ("search", "batch"),
    [("greedy", 4), ("beam", 4), ("greedy", 1)],
    ids=["greedy", "beam", "one-row"],
)
def test_packed_decoding_decodes_what_the_plain_layers_decode(
    make_model, make_batch, monkeypatch: pytest.MonkeyPatch, search: str, batch: int
) -> None:
    """The tiny model's greedy and beam decodes with the packed weights (one row or several)
    and with oneDNN switched off: the same tokens, log-probabilities within float32
    rounding."""
    model = make_model("vocab", "sinusoidal")
    encoded, num_extended = make_batch(model, batch=batch)
    packs = _count_packs(monkeypatch)

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


def _count_packs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[nn.Linear, ...]]:
    """The layers of every weight packed from now on (``packed_linear._pack`` counted)."""
    packs: list[tuple[nn.Linear, ...]] = []
    real = packed_linear._pack

    def counted(layers: tuple[nn.Linear, ...]) -> object:
        packs.append(layers)
        return real(layers)

    monkeypatch.setattr(packed_linear, "_pack", counted)
    return packs


def _ids(layers: tuple[nn.Linear, ...]) -> tuple[int, ...]:
    return tuple(id(layer) for layer in layers)


def test_every_decode_packs_afresh_so_no_write_leaves_a_stale_weight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each decode has its own :class:`PackedLinears` and packs the layer's weight again,
    so every write is seen by the next decode: in place under ``no_grad`` (an optimiser
    step), replaced, and through ``param.data``, which a version counter does not see."""
    layer = _layer(32, 64)
    x = torch.randn(3, 32)
    packs = _count_packs(monkeypatch)

    def decode_product() -> torch.Tensor:
        with torch.no_grad():
            return PackedLinears()(layer, x)

    first, again = decode_product(), decode_product()
    assert len(packs) == 2 and torch.equal(first, again)
    for change in ("in place", "bias in place", "replaced", "through .data"):
        with torch.no_grad():
            if change == "in place":
                layer.weight.mul_(2.0)
            elif change == "bias in place":
                layer.bias.add_(1.0)
            elif change == "replaced":
                layer.weight = nn.Parameter(torch.randn(64, 32), requires_grad=False)
            else:
                layer.weight.data.mul_(-1.0)
        out = decode_product()
        reference = F.linear(x.double(), layer.weight.double(), _double(layer.bias))
        torch.testing.assert_close(out.double(), reference, atol=1e-5, rtol=1e-5)
    assert len(packs) == 6


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "mkldnn-off"])
def test_a_bound_product_with_relu_is_the_relu_of_the_product(
    monkeypatch: pytest.MonkeyPatch, packed: bool
) -> None:
    """The feed-forward layer's relu applied by oneDNN as it writes the product: bit for
    bit ``F.relu`` of the product (and ``F.relu(F.linear)`` where nothing is packed)."""
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", packed)
    layer = _layer(32, 64)
    x = torch.randn(5, 1, 32)
    with torch.no_grad():
        linears = PackedLinears()
        fused = linears.bind(layer, x, relu=True)(x)
        product = linears.bind(layer, x)(x)
    assert (fused >= 0).all() and bool((product < 0).any())
    assert torch.equal(fused, F.relu(product))
