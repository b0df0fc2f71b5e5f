"""Dropout masks from uniform noise (selfattn.attention.dropout) and model.dropout_masks:
the same distribution and scaling as F.dropout, the identity in evaluation, and through
attention the lecture's formula with those masks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from selfattn.attention import attention
from selfattn.attention.dropout import UniformDropout, draws_uniform, uniform_dropout
from selfattn.datatypes import Batch
from selfattn.kernels.dense import DenseKernel
from selfattn.models.registry import model_options
from selfattn.models.seq2seq_builder import build_seq2seq_model
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import TaskSpec, build_model_from_spec

TOKEN = TaskSpec(task="token", num_labels=3, vocab_size=20, max_len=16)


def test_keeps_each_value_with_probability_one_minus_p_and_scales_it() -> None:
    torch.manual_seed(0)
    x = torch.rand(1 << 20) + 0.5
    for p in (0.1, 0.5):
        y = uniform_dropout(x, p)
        kept = y != 0
        assert abs(kept.float().mean().item() - (1 - p)) < 0.003
        assert torch.equal(y[kept], x[kept] * (1.0 / (1.0 - p)))


def test_identity_in_evaluation_or_at_zero() -> None:
    x = torch.randn(4, 5)
    assert uniform_dropout(x, 0.3, training=False) is x
    assert uniform_dropout(x, 0.0) is x
    layer = UniformDropout(0.3).eval()
    assert layer(x) is x


def test_gradient_is_the_mask_times_the_scale() -> None:
    torch.manual_seed(1)
    x = torch.randn(64, 32, requires_grad=True)
    y = uniform_dropout(x, 0.25)
    y.sum().backward()
    assert x.grad is not None
    expected = (y != 0).float() / 0.75
    assert torch.allclose(x.grad, expected)


def test_attention_with_uniform_masks_is_the_formula_with_those_masks() -> None:
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 3, 6, 4, dtype=torch.float64) for _ in range(3))
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    torch.manual_seed(7)
    out, _ = attention(q, k, v, key_padding_mask=padding, dropout=0.2, dropout_masks="uniform")
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(padding[:, None, None, :], -torch.inf)
    torch.manual_seed(7)
    expected = uniform_dropout(scores.softmax(-1), 0.2) @ v
    assert torch.allclose(out, expected, atol=1e-12)
    # Without dropout the two kinds are the same computation.
    plain, _ = attention(q, k, v, key_padding_mask=padding)
    same, _ = attention(q, k, v, key_padding_mask=padding, dropout_masks="uniform")
    assert torch.equal(plain, same)


def test_auto_masks_are_uniform_on_the_cpu_and_pytorchs_elsewhere() -> None:
    assert draws_uniform("auto", torch.device("cpu"))
    assert not draws_uniform("auto", torch.device("cuda"))  # fused kernels draw their own
    assert draws_uniform("uniform", torch.device("cuda"))
    assert not draws_uniform("bernoulli", torch.device("cpu"))
    q, k, v = (torch.randn(2, 3, 6, 4, dtype=torch.float64) for _ in range(3))

    def dropped(masks: str) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(7)
        out, _ = attention(q, k, v, dropout=0.2, dropout_masks=masks)  # type: ignore[arg-type]
        return out, UniformDropout(0.2, masks=masks)(v)  # type: ignore[arg-type]

    (auto_out, auto_layer), (out, layer) = dropped("auto"), dropped("uniform")
    assert torch.equal(auto_out, out) and torch.equal(auto_layer, layer)  # on the CPU
    assert not torch.equal(dropped("bernoulli")[0], out)


def test_dense_kernel_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="dropout_masks must be one of auto, bernoulli, uniform"):
        DenseKernel(0.1, dropout_masks="binary")  # type: ignore[arg-type]


def test_model_config_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match=r"^model.dropout_masks: unknown kind 'binary'"):
        model_options(dropout_masks="binary")  # type: ignore[arg-type]


@pytest.mark.parametrize("architecture", ["transformer", "conformer", "bigru"])
def test_every_dropout_layer_draws_uniform_masks(architecture: str) -> None:
    config = model_options(architecture=architecture, embed_dim=16, ffn_dim=16, dropout=0.1)
    torch.manual_seed(0)
    ours = build_model_from_spec(config, TOKEN)
    torch.manual_seed(0)
    uniform = build_model_from_spec(
        model_options(**{**vars(config), "dropout_masks": "uniform"}), TOKEN
    )
    dropouts = [m for m in uniform.modules() if isinstance(m, nn.Dropout)]
    assert dropouts and all(type(m) is UniformDropout for m in dropouts)
    assert all(
        m.dropout_masks == "uniform" for m in uniform.modules() if isinstance(m, DenseKernel)
    )
    # Same weights; the same function in evaluation.
    state = ours.state_dict()
    assert all(torch.equal(state[k], v) for k, v in uniform.state_dict().items())
    tokens = torch.randint(1, 20, (2, 5))
    batch = Batch(tokens, None, None, torch.zeros(2, 5, dtype=torch.bool), None)
    ours.eval(), uniform.eval()
    with torch.no_grad():
        assert torch.equal(ours(batch), uniform(batch))


def test_seq2seq_reads_dropout_masks() -> None:
    spec = TaskSpec(task="seq2seq", num_labels=20, vocab_size=20, max_len=16)
    model = build_seq2seq_model(
        model_options(embed_dim=16, ffn_dim=16, dropout_masks="uniform"), Seq2SeqConfig(), spec
    )
    assert not [m for m in model.modules() if type(m) is nn.Dropout]
    kernels = [m for m in model.modules() if isinstance(m, DenseKernel)]
    assert kernels and all(m.dropout_masks == "uniform" for m in kernels)


def test_bernoulli_masks_are_pytorchs() -> None:
    """``"bernoulli"`` (the former default) builds exactly what was built before the option
    existed; the default is now ``"auto"``."""
    assert model_options().dropout_masks == "auto"
    model = build_model_from_spec(
        model_options(embed_dim=16, ffn_dim=16, dropout_masks="bernoulli"), TOKEN
    )
    assert all(type(m) is nn.Dropout for m in model.modules() if isinstance(m, nn.Dropout))
    assert all(
        m.dropout_masks == "bernoulli" for m in model.modules() if isinstance(m, DenseKernel)
    )
