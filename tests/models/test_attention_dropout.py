"""model.attention_dropout: dropout on the attention weights alone, for every stack."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from selfattn.attention import MultiHeadAttention
from selfattn.models import Conformer, Decoder, Encoder, StackConfig
from selfattn.models.registry import model_options
from selfattn.models.seq2seq import Seq2SeqTransformer, decoder_like
from selfattn.models.task_model import build_model


def _attention_and_other_dropouts(model: torch.nn.Module) -> tuple[set[float], set[float]]:
    weights = {m.dropout for m in model.modules() if isinstance(m, MultiHeadAttention)}
    others = {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    return weights, others


def _config(**options: object) -> StackConfig:
    return StackConfig(16, 2, 32, num_layers=2, conv_kernel_size=3, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: Encoder(_config(**kw)),
        lambda **kw: Decoder(_config(**kw)),
        lambda **kw: Conformer(_config(**kw)),
        lambda **kw: Seq2SeqTransformer(
            _config(**kw),
            decoder_like(_config(**kw)),
            target_vocab_size=20,
            source_vocab_size=20,
        ),
    ],
)
def test_every_stack_separates_weight_dropout_from_the_rest(make: object) -> None:
    weights, others = _attention_and_other_dropouts(make(dropout=0.2, attention_dropout=0.0))  # type: ignore[operator]
    assert weights == {0.0} and others == {0.2}
    weights, _ = _attention_and_other_dropouts(make(dropout=0.2))  # type: ignore[operator]
    assert weights == {0.2}  # default: the same dropout everywhere


def test_no_attention_dropout_keeps_the_fused_kernel_in_training(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[float] = []
    real = F.scaled_dot_product_attention

    def spy(*args: object, **kwargs: object) -> torch.Tensor:
        seen.append(float(kwargs.get("dropout_p", 0.0)))  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    encoder = Encoder(_config(dropout=0.3, attention_dropout=0.0)).train()
    encoder(torch.randn(2, 5, 16))
    assert seen == [0.0, 0.0]  # one fused call per block, no dropout inside it


def test_model_config_threads_it_through_and_checks_it() -> None:
    config = model_options(
        embed_dim=16,
        num_heads=2,
        dropout=0.1,
        attention_dropout=0.0,
        ffn_dropout=None,  # every other layer at model.dropout
        head_dropout=None,
    )
    model = build_model(
        config,
        task="sequence",
        vocab_size=10,
        char_vocab_size=None,
        feature_dim=None,
        num_labels=3,
    )
    weights, others = _attention_and_other_dropouts(model)
    assert weights == {0.0} and others == {0.1}
    with pytest.raises(ValueError, match=r"model\.attention_dropout must be in \[0, 1\)"):
        model_options(attention_dropout=1.0)
