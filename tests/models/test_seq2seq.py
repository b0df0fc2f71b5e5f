"""The encoder–decoder: KV cache equals recomputation, output layers are distributions,
the pointer output points, the copy output reaches out-of-vocabulary source words."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

from selfattn.attention.cache import DecoderCache, KVCache
from selfattn.data.batching import seq2seq_collate
from selfattn.models import Decoder, StackConfig
from selfattn.models.rnn_seq2seq import RNNSeq2Seq
from selfattn.models.seq2seq import (
    BOS_ID,
    EOS_ID,
    NUM_SPECIALS,
    PAD_ID,
    UNK_ID,
    Seq2SeqTransformer,
    decoder_like,
)

POSITIONALS = [None, "sinusoidal", "learned", "floater", "rnn", "relative", "rotary", "alibi"]


@pytest.mark.parametrize("positional", POSITIONALS)
@pytest.mark.parametrize("share_weights", [False, True])
def test_decoder_cache_equals_full_recomputation(
    positional: str | None, share_weights: bool
) -> None:
    config = StackConfig(
        16, 2, 32, num_layers=2, positional=positional, max_len=32, share_weights=share_weights
    )
    decoder = Decoder(config).double()
    decoder.eval()
    x, memory = torch.randn(2, 7, 16).double(), torch.randn(2, 5, 16).double()
    memory_padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad():
        full = decoder(x, memory, memory_key_padding_mask=memory_padding).last_hidden_state
        cache = DecoderCache()
        steps = [
            decoder(
                x[:, t : t + 1], memory, memory_key_padding_mask=memory_padding, cache=cache
            ).last_hidden_state
            for t in range(7)
        ]
    assert cache.offset == 7 and cache.layers[0][0].length == 7
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-10)


def test_cache_chunks_and_reorder() -> None:
    config = StackConfig(16, 2, 32, num_layers=2, positional="rotary", max_len=32)
    decoder = Decoder(config).double().eval()
    x, memory = torch.randn(3, 6, 16).double(), torch.randn(3, 4, 16).double()
    with torch.no_grad():
        full = decoder(x, memory).last_hidden_state
        cache = DecoderCache()
        first = decoder(x[:, :4], memory, cache=cache).last_hidden_state  # a 4-token prompt
        cache.reorder(torch.tensor([2, 0]))  # keep rows 2 and 0, as beam search does
        rest = decoder(x[[2, 0], 4:], memory[[2, 0]], cache=cache).last_hidden_state
    torch.testing.assert_close(first, full[:, :4], rtol=0, atol=1e-10)
    torch.testing.assert_close(rest, full[[2, 0], 4:], rtol=0, atol=1e-10)


def test_static_cache_refuses_growth() -> None:
    cache = KVCache(static=True)
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(RuntimeError, match="static"):
        cache.append(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))


#: The encoder of the tests' models (E=32, H=4, 2 layers, pre-LN, sinusoidal positions).
STACK = StackConfig(32, 4, 64, num_layers=2, positional="sinusoidal", max_len=256, norm_first=True)


def _model(
    output: str,
    *,
    num_decoder_layers: int = 2,
    max_len: int = 256,
    source_positional: bool = True,
    **options: object,
) -> Seq2SeqTransformer:
    source: dict[str, Any] = (
        {"source_feature_dim": 2} if output == "pointer" else {"source_vocab_size": 30}
    )
    stack = replace(STACK, max_len=max_len)
    encoder = stack if source_positional else replace(stack, positional=None)
    return Seq2SeqTransformer(
        encoder,
        decoder_like(stack, num_layers=num_decoder_layers),
        target_vocab_size=20,
        output=output,  # type: ignore[arg-type]
        **source,
        **options,  # type: ignore[arg-type]
    ).eval()


@pytest.mark.parametrize("output", ["vocab", "pointer", "copy"])
@pytest.mark.parametrize("cross_layers", ["last", "matching"])
def test_outputs_are_distributions_and_cache_agrees(output: str, cross_layers: str) -> None:
    model = _model(output, cross_layers=cross_layers).double()
    source = torch.randn(2, 6, 2).double() if output == "pointer" else torch.randint(4, 30, (2, 6))
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[1, 4:] = True
    copy_ids = torch.randint(4, 22, (2, 6)) if output == "copy" else None
    target = torch.randint(NUM_SPECIALS, 8 if output == "pointer" else 20, (2, 5))
    target[:, 0] = BOS_ID
    with torch.no_grad():
        encoded = model.encode(source, padding, copy_ids=copy_ids)
        full = model.decode(target, encoded, num_extended=2).log_probs
        cache = DecoderCache()
        steps = [
            model.decode(target[:, t : t + 1], encoded, cache=cache, num_extended=2).log_probs
            for t in range(5)
        ]
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(2, 5, dtype=full.dtype))
    torch.testing.assert_close(torch.cat(steps, 1).exp(), full.exp(), rtol=0, atol=1e-9)
    if output == "pointer":
        probs = full.exp()
        assert probs.shape[-1] == NUM_SPECIALS + 6
        assert probs[..., [PAD_ID, UNK_ID, BOS_ID]].max() == 0  # only EOS among the specials
        assert probs[1, :, NUM_SPECIALS + 4 :].max() == 0  # never a padded source position
        assert probs[..., EOS_ID].min() > 0


def test_pointer_decoder_reads_the_pointed_source_vector() -> None:
    model = _model("pointer")
    source = torch.randn(1, 4, 2)
    encoded = model.encode(source, torch.zeros(1, 4, dtype=torch.bool))
    vectors = model.embed_target(torch.tensor([[BOS_ID, NUM_SPECIALS + 2]]), encoded)
    torch.testing.assert_close(vectors[0, 1], encoded.source_vectors[0, 2])


def test_copy_output_puts_mass_on_out_of_vocabulary_source_words() -> None:
    model = _model("copy")
    source = torch.randint(4, 30, (1, 3))
    copy_ids = torch.tensor([[20, 21, 5]])  # two words outside the 20-word target vocabulary
    encoded = model.encode(source, torch.zeros(1, 3, dtype=torch.bool), copy_ids=copy_ids)
    probs = model.decode(torch.tensor([[BOS_ID]]), encoded, num_extended=2).log_probs.exp()
    assert probs.shape[-1] == 22 and probs[0, 0, 20] > 0 and probs[0, 0, 21] > 0
    # An extended id read back as decoder input is <unk>.
    unk = model.embed_target(torch.tensor([[UNK_ID]]), encoded)
    torch.testing.assert_close(model.embed_target(torch.tensor([[21]]), encoded), unk)


def test_ids_agree_with_the_collator() -> None:
    assert (seq2seq_collate.BOS_ID, seq2seq_collate.EOS_ID) == (BOS_ID, EOS_ID)
    assert seq2seq_collate.NUM_SPECIALS == NUM_SPECIALS
    assert seq2seq_collate.PAD_ID == PAD_ID and seq2seq_collate.UNK_ID == UNK_ID


def test_source_positional_off_makes_the_encoder_a_set_encoder() -> None:
    model = _model("pointer", source_positional=False)
    source = torch.randn(1, 5, 2)
    order = torch.tensor([3, 0, 4, 1, 2])
    padding = torch.zeros(1, 5, dtype=torch.bool)
    with torch.no_grad():
        memory = model.encode(source, padding).memory
        permuted = model.encode(source[:, order], padding).memory
    torch.testing.assert_close(permuted, memory[:, order], rtol=0, atol=1e-5)


def test_bad_inputs_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Seq2SeqTransformer(STACK, decoder_like(STACK), target_vocab_size=10)
    with pytest.raises(ValueError, match="needs text input"):
        Seq2SeqTransformer(
            STACK, decoder_like(STACK), target_vocab_size=10, source_feature_dim=2, output="copy"
        )
    with pytest.raises(ValueError, match="matching"):
        _model("vocab", cross_layers="matching", num_decoder_layers=1)
    model = _model("vocab", max_len=8)
    with pytest.raises(ValueError, match="longer than the model's max_len"):
        model.encode(torch.randint(4, 30, (1, 9)), torch.zeros(1, 9, dtype=torch.bool))
    with pytest.raises(ValueError, match="copy_ids"):
        _model("copy").encode(torch.randint(4, 30, (1, 3)), torch.zeros(1, 3, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="no length predictor"):
        encoded = model.encode(torch.randint(4, 30, (1, 3)), torch.zeros(1, 3, dtype=torch.bool))
        model.predict_length(encoded)


@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_both_families_refuse_bad_vocabularies_and_sources_in_one_line(family: str) -> None:
    """The checks the two families share: a target vocabulary of specials only, shared
    embeddings over two vocabulary sizes (or over a pointer's source positions), and a
    source whose (B, S) is not its padding's."""

    def build(**options: Any) -> Any:
        if family == "transformer":
            return Seq2SeqTransformer(STACK, decoder_like(STACK), **options)
        return RNNSeq2Seq(embed_dim=16, hidden_dim=16, **options)

    with pytest.raises(ValueError, match=rf"target_vocab_size \({NUM_SPECIALS}\) must exceed"):
        build(target_vocab_size=NUM_SPECIALS, source_vocab_size=30)
    with pytest.raises(ValueError, match="one vocabulary size, got source 20 and target 30"):
        build(target_vocab_size=30, source_vocab_size=20, share_embeddings=True)
    if family == "transformer":
        with pytest.raises(ValueError, match="share_embeddings needs text on both sides"):
            build(
                target_vocab_size=30, source_vocab_size=30, share_embeddings=True, output="pointer"
            )
    model = build(target_vocab_size=30, source_vocab_size=30, share_embeddings=True)
    assert model.target_embed is model.source_embed
    with pytest.raises(
        ValueError, match=r"source \(1, 4\) and padding \(1, 5\) disagree on \(B, S\)"
    ):
        model.encode(torch.randint(NUM_SPECIALS, 30, (1, 4)), torch.zeros(1, 5, dtype=torch.bool))


@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_decode_refuses_bad_target_in_in_one_line(family: str) -> None:
    """Both families refuse decoder inputs of the wrong shape or batch, and inputs (with
    what the cache holds) longer than max_len + 1, naming the shapes and lengths."""
    model: Any = (
        _model("vocab", max_len=8)
        if family == "transformer"
        else RNNSeq2Seq(target_vocab_size=20, source_vocab_size=30, embed_dim=16, max_len=8)
    ).eval()
    source = torch.randint(NUM_SPECIALS, 30, (2, 5))
    encoded = model.encode(source, torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"target_in must be \(B, T\) with B = 2, got \(3, 4\)"):
        model.decode(torch.full((3, 4), BOS_ID), encoded)
    with pytest.raises(ValueError, match=r"got \(2,\)"):
        model.decode(torch.full((2,), BOS_ID), encoded)
    with pytest.raises(
        ValueError, match=r"target of length 10 exceeds the model's max_len \+ 1 \(9\)"
    ):
        model.decode(torch.full((2, 10), BOS_ID), encoded)
    model.decode(torch.full((2, 9), BOS_ID), encoded)  # BOS + max_len: the longest allowed
    cache = model.new_cache(9)
    model.decode(torch.full((2, 6), BOS_ID), encoded, cache=cache)
    with pytest.raises(ValueError, match="target of length 10 exceeds"):
        model.decode(torch.full((2, 4), BOS_ID), encoded, cache=cache)  # 6 cached + 4
