"""Word dropout: training-only, padding-safe, characters untouched, validated."""

from __future__ import annotations

import pytest
import torch

from selfattn.datatypes import Batch
from selfattn.models.embedding import InputEmbedding
from selfattn.models.registry import model_options
from selfattn.specials import PAD_ID, UNK_ID

from ..helpers_models import build

VOCAB, CHARS, EMBED = 50, 10, 16


def _batch() -> Batch:
    """Two sentences of real words (ids >= 2), the second right-padded."""
    token_ids = torch.tensor([[5, 6, 7, 8, 9], [10, 11, PAD_ID, PAD_ID, PAD_ID]])
    mask = token_ids == PAD_ID
    char_ids = torch.randint(1, CHARS, (2, 5, 4)).masked_fill(mask[..., None], 0)
    return Batch(token_ids, char_ids, None, mask, torch.zeros(2, 5, dtype=torch.long))


def _embedding(word_dropout: float, *, chars: bool = False) -> InputEmbedding:
    torch.manual_seed(0)
    return InputEmbedding(
        EMBED,
        vocab_size=VOCAB,
        char_vocab_size=CHARS if chars else None,
        char_dim=8,
        word_dropout=word_dropout,
    )


@pytest.mark.parametrize("chars", [False, True])
def test_eval_mode_is_unaffected(chars: bool) -> None:
    batch = _batch()
    plain, dropped = _embedding(0.0, chars=chars).eval(), _embedding(0.9, chars=chars).eval()
    torch.testing.assert_close(dropped(batch), plain(batch), rtol=0, atol=0)
    torch.testing.assert_close(dropped(batch), dropped(batch), rtol=0, atol=0)


def test_training_with_p_near_one_sees_the_unknown_word() -> None:
    embedding = _embedding(0.999999).train()
    batch = _batch()
    out = embedding(batch)
    real = ~batch.key_padding_mask
    unk = embedding.words.weight[UNK_ID]  # type: ignore[union-attr]
    torch.testing.assert_close(out[real], unk.expand(int(real.sum()), EMBED))


def test_padding_ids_are_never_replaced() -> None:
    embedding = _embedding(0.999999).train()
    token_ids = _batch().token_ids
    assert token_ids is not None
    dropped = embedding.drop_words(token_ids)
    is_pad = token_ids == PAD_ID
    assert torch.equal(dropped[is_pad], token_ids[is_pad])
    assert bool((dropped[~is_pad] == UNK_ID).all())


def test_replacement_rate_is_about_p() -> None:
    embedding = _embedding(0.25).train()
    torch.manual_seed(1)
    token_ids = torch.randint(2, VOCAB, (200, 100))
    rate = (embedding.drop_words(token_ids) == UNK_ID).float().mean().item()
    assert abs(rate - 0.25) < 0.01


def test_character_features_are_untouched() -> None:
    """With every word dropped, the characters still tell the tokens apart."""
    embedding = _embedding(0.999999, chars=True).train()
    batch = _batch()
    out = embedding(batch)
    assert batch.token_ids is not None and embedding.words is not None
    assert embedding.chars is not None and embedding.merge is not None
    words = embedding.words(batch.token_ids.masked_fill(~batch.key_padding_mask, UNK_ID))
    expected = embedding.merge(torch.cat([words, embedding.chars(batch.char_ids)], dim=-1))
    torch.testing.assert_close(out, expected)


def test_off_draws_no_random_numbers() -> None:
    embedding, batch = _embedding(0.0).train(), _batch()
    torch.manual_seed(3)
    embedding(batch)
    after = torch.rand(1)
    torch.manual_seed(3)
    assert torch.equal(torch.rand(1), after)


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5])
def test_out_of_range_is_a_one_line_error(value: float) -> None:
    with pytest.raises(ValueError, match=r"^model\.word_dropout must be in \[0, 1\)") as info:
        model_options(word_dropout=value)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="word_dropout"):
        InputEmbedding(EMBED, vocab_size=VOCAB, word_dropout=value)


def test_the_config_value_reaches_the_embedding() -> None:
    config = model_options(embed_dim=16, num_heads=2, num_layers=1, ffn_dim=16, word_dropout=0.2)
    model = build(config, "token", num_labels=3, vocab_size=VOCAB, max_len=8)
    assert model.embedding.word_dropout == 0.2
