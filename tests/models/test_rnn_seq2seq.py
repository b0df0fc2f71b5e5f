"""The RNN encoder–decoder with attention: the match functions against their formulas, the
softmax over the real source positions only, padding that changes nothing, and the
one-line refusals of what it does not have."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from selfattn.attention.match import RNN_SCORES, MatchAttention
from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch
from selfattn.models.registry import model_options
from selfattn.models.rnn_seq2seq import RecurrentState, RNNSeq2Seq
from selfattn.models.seq2seq import BOS_ID, NUM_SPECIALS
from selfattn.models.seq2seq_builder import build_seq2seq_model
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import TaskSpec, build_model_from_spec
from selfattn.tasks.seq2seq.objective import Seq2SeqObjective

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 12
CELLS = ("gru", "lstm")


def tiny_rnn(**options: Any) -> RNNSeq2Seq:
    """A random float64 model in eval mode (E=16, H=20, 2 layers)."""
    settings: dict[str, Any] = {
        "target_vocab_size": VOCAB,
        "source_vocab_size": VOCAB,
        "embed_dim": 16,
        "hidden_dim": 20,
        "max_len": 16,
        "num_layers": 2,
    }
    settings.update(options)
    return RNNSeq2Seq(**settings).double().eval()


def sources(batch: int = 3, length: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids, row 0 padded after half its length, row 1 after one position."""
    source = torch.randint(NUM_SPECIALS, VOCAB, (batch, length))
    padding = torch.zeros(batch, length, dtype=torch.bool)
    padding[0, length // 2 :] = True
    padding[1, 1:] = True
    return source.masked_fill(padding, 0), padding


def targets(batch: int = 3, length: int = 5) -> torch.Tensor:
    target = torch.randint(NUM_SPECIALS, VOCAB, (batch, length))
    target[:, 0] = BOS_ID
    return target


@pytest.mark.parametrize("score", RNN_SCORES)
def test_each_match_function_is_its_formula(score: str) -> None:
    torch.manual_seed(0)
    dim = 6
    attention = MatchAttention(score, dim).double()
    z, h = torch.randn(2, 3, dim, dtype=torch.float64), torch.randn(2, 5, dim, dtype=torch.float64)
    got = attention.scores(z, attention.keys(h))
    expected = torch.empty(2, 3, 5, dtype=torch.float64)
    for b in range(2):
        for t in range(3):
            for s in range(5):
                zt, hs = z[b, t], h[b, s]
                if score == "dot":
                    value = zt @ hs
                elif score == "scaled_dot":
                    value = zt @ hs / math.sqrt(dim)
                elif score == "general":
                    assert attention.general is not None
                    value = zt @ attention.general.weight @ hs
                else:
                    additive = attention.additive
                    assert additive is not None
                    pre = additive.q_proj.weight @ zt + additive.k_proj.weight @ hs
                    value = additive.w.weight[0] @ torch.tanh(pre + additive.k_proj.bias)
                expected[b, t, s] = value
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("score", RNN_SCORES)
def test_attention_is_a_distribution_over_the_real_source(score: str, cell: str) -> None:
    model = tiny_rnn(score=score, cell=cell)
    source, padding = sources()
    maps = model.attention_maps(source, padding, targets())
    assert maps.encoder == [] and maps.decoder == [] and len(maps.cross) == 1
    weights = maps.cross[0][:, 0]  # (B, T, S), one head
    assert torch.equal(
        weights.masked_select(padding[:, None, :].expand_as(weights)).abs().sum(),
        torch.tensor(0.0, dtype=torch.float64),
    )
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:2], dtype=torch.float64))
    assert (weights[1, :, 0] == 1).all()  # one real position: all the attention


@pytest.mark.parametrize("feeding", [True, False])
@pytest.mark.parametrize("cell", CELLS)
def test_padded_source_positions_change_nothing(cell: str, feeding: bool) -> None:
    model = tiny_rnn(cell=cell, input_feeding=feeding)
    source, padding = sources()
    target = targets()
    other = source.clone()
    other[padding] = torch.randint(NUM_SPECIALS, VOCAB, (int(padding.sum()),))
    first = model(source, padding, target, need_weights=True)
    second = model(other, padding, target, need_weights=True)
    assert torch.equal(first.log_probs, second.log_probs)
    assert first.cross_attentions is not None and second.cross_attentions is not None
    assert torch.equal(first.cross_attentions[0], second.cross_attentions[0])
    # Row 2 alone, without the padded rows beside it, decodes the same too.
    alone = model(source[2:], padding[2:], target[2:]).log_probs
    torch.testing.assert_close(alone[0], first.log_probs[2], rtol=1e-12, atol=1e-12)


def test_vector_sources_ignore_their_padded_vectors() -> None:
    model = tiny_rnn(source_vocab_size=None, source_feature_dim=3)
    _, padding = sources()
    vectors = torch.randn(3, 6, 3, dtype=torch.float64)
    other = vectors.clone()
    other[padding] = 100.0
    target = targets()
    assert torch.equal(
        model(vectors, padding, target).log_probs, model(other, padding, target).log_probs
    )


@pytest.mark.parametrize("cell", CELLS)
def test_step_by_step_equals_teacher_forcing(cell: str) -> None:
    """Feeding the target one position at a time through the recurrent state gives the
    teacher-forced log-probabilities (the state is the cache decoding relies on)."""
    model = tiny_rnn(cell=cell)
    source, padding = sources()
    target = targets(length=6)
    encoded = model.encode(source, padding)
    whole = model.decode(target, encoded).log_probs
    state = model.new_cache(capacity=6)
    steps = [model.decode(target[:, t : t + 1], encoded, cache=state).log_probs for t in range(6)]
    assert state.offset == 6
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, rtol=1e-12, atol=1e-12)


def test_recurrent_state_reorders_its_rows() -> None:
    hidden = torch.arange(2 * 3 * 1.0).view(2, 3, 1)
    state = RecurrentState(
        hidden, None, torch.arange(3.0).view(3, 1), torch.arange(3.0).view(3, 1, 1)
    )
    state.reorder(torch.tensor([2, 2, 0]), memory=False)
    assert state.hidden is not None and state.feed is not None and state.keys is not None
    assert state.hidden[:, :, 0].tolist() == [[2, 2, 0], [5, 5, 3]]
    assert state.feed[:, 0].tolist() == [2, 2, 0]
    assert state.keys.flatten().tolist() == [0, 1, 2]  # the same sources: keys stay
    state.reorder(torch.tensor([1]))
    assert state.keys.flatten().tolist() == [1]


def test_options_change_the_model() -> None:
    source, padding = sources()
    target = targets()
    outputs = {}
    for name, options in {
        "base": {},
        "lstm": {"cell": "lstm"},
        "no feeding": {"input_feeding": False},
        "dot": {"score": "dot"},
        "decoder layers": {"decoder_layers": 1},
        "untied": {"tie_output": False},
    }.items():
        torch.manual_seed(0)
        outputs[name] = tiny_rnn(**options)(source, padding, target).log_probs
    for name, out in outputs.items():
        assert name == "base" or not torch.equal(out, outputs["base"]), name


def test_shared_embeddings_are_one_table() -> None:
    model = tiny_rnn(share_embeddings=True)
    assert model.source_embed is model.target_embed is not None
    assert model.out_proj.weight is model.target_embed.weight


SPEC = TaskSpec(task="seq2seq", num_labels=VOCAB, vocab_size=VOCAB, max_len=16)
RNN = model_options(architecture="rnn", embed_dim=16, ffn_dim=20, num_layers=1)


@pytest.mark.parametrize(
    ("seq2seq", "words"),
    [
        ({"output": "pointer"}, "pointer and copy are the transformer's"),
        ({"output": "copy"}, "pointer and copy are the transformer's"),
        ({"nat": True}, "non-autoregressive"),
        ({"cross_layers": "matching"}, "last layer"),
        ({"source_positional": False}, "positional"),
    ],
)
def test_what_the_rnn_has_not_is_refused_in_one_line(seq2seq: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words) as error:
        build_seq2seq_model(RNN, Seq2SeqConfig(**seq2seq), SPEC)
    assert "\n" not in str(error.value) and 'architecture = "rnn"' in str(error.value)


def test_the_builder_reads_the_model_section() -> None:
    model = build_seq2seq_model(
        model_options(
            architecture="rnn", embed_dim=16, ffn_dim=20, rnn_cell="lstm", score="general"
        ),
        Seq2SeqConfig(decoder_layers=3),
        SPEC,
    )
    assert isinstance(model, RNNSeq2Seq) and model.cell == "lstm"
    assert model.attention.general is not None and model.decoder.num_layers == 3
    assert model.encoder.hidden_size == 10 and model.encoder.bidirectional


def test_config_refusals() -> None:
    with pytest.raises(ValueError, match="even"):
        model_options(architecture="rnn", ffn_dim=21)
    with pytest.raises(ValueError, match="general: model"):
        model_options(score="general")
    with pytest.raises(ValueError, match="rnn_cell"):
        model_options(architecture="rnn", rnn_cell="elman")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not use it"):
        build_seq2seq_model(model_options(rnn_cell="lstm"), Seq2SeqConfig(), SPEC)
    token = TaskSpec(task="token", num_labels=3, vocab_size=VOCAB, max_len=16)
    with pytest.raises(ValueError, match="bigru"):
        build_model_from_spec(RNN, token)


def test_what_it_cannot_decode_is_refused() -> None:
    model = tiny_rnn()
    source, padding = sources()
    encoded = model.encode(source, padding)
    with pytest.raises(RuntimeError, match="no length predictor"):
        model.predict_length(encoded)
    with pytest.raises(ValueError, match="left to right"):
        model.decode(targets(), encoded, causal=False)
    with pytest.raises(ValueError, match="at least one real"):
        model.encode(source, torch.ones_like(padding))


def test_the_training_options_read_the_match_weights() -> None:
    """Guided attention and coverage regularise the RNN's α̂; scheduled sampling feeds
    its own predictions: each changes the loss, and the gradient reaches the match."""
    source, padding = sources()
    target_in = targets(length=5)
    target_out = torch.cat([target_in[:, 1:], torch.full((3, 1), 3)], dim=1)
    batch = Seq2SeqBatch(source, padding, target_in, target_out, torch.zeros_like(target_in) > 0)
    model = tiny_rnn(score="additive").train()
    losses = {}
    for name, options in {
        "plain": {},
        "guided": {"guided_attention": 1.0},
        "coverage": {"coverage": 1.0},
        "sampled": {"scheduled_sampling": "constant", "sampling_max": 1.0},
    }.items():
        torch.manual_seed(0)
        model.zero_grad()
        loss = Seq2SeqObjective(Seq2SeqConfig(**options)).loss(model, batch, step=0)
        loss.backward()
        assert model.attention.additive is not None
        assert model.attention.additive.w.weight.grad is not None
        losses[name] = float(loss.detach())
    assert len(set(losses.values())) == len(losses), losses
