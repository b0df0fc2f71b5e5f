"""``train.checkpoint_activations``: every stack of blocks recomputes its blocks in the
backward pass, with the loss and gradients of a run without it (dropout on), and keeps
far fewer bytes for the backward pass."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from selfattn.bench.memory import measure_memory
from selfattn.cli.main import main
from selfattn.models.checkpointing import enable_activation_checkpointing, saved_bytes
from selfattn.models.config import StackConfig
from selfattn.models.conformer import Conformer
from selfattn.models.encoder import Encoder
from selfattn.models.graph import GraphTransformer
from selfattn.models.seq2seq import Seq2SeqTransformer, decoder_like
from selfattn.pretrained.bert import BertConfig, BertEncoder

from .test_average import write_config

B, L, E = 3, 10, 16
#: Dropout everywhere it can be: the recomputation must draw the same masks.
STACK = StackConfig(E, 2, 32, num_layers=4, dropout=0.2, attention_dropout=0.2, max_len=64)

Loss = Callable[[nn.Module], Tensor]


def _padding() -> Tensor:
    padding = torch.zeros(B, L, dtype=torch.bool)
    padding[1, 7:] = True
    return padding


def _stack_loss(x: Tensor) -> Loss:
    return lambda model: model(x, key_padding_mask=_padding()).last_hidden_state.square().mean()


def _encoder(attention: str = "dense", **options: object) -> tuple[nn.Module, Loss]:
    config = StackConfig(
        E,
        2,
        32,
        num_layers=4,
        dropout=0.2,
        attention_dropout=0.2 if attention == "dense" else None,
        attention=attention,
        attention_options=options,
        max_len=64,
    )
    return Encoder(config), _stack_loss(torch.randn(B, L, E))


def _conformer() -> tuple[nn.Module, Loss]:
    config = StackConfig(E, 2, 32, num_layers=4, dropout=0.2, conv_kernel_size=3, max_len=64)
    return Conformer(config), _stack_loss(torch.randn(B, L, E))


def _graph() -> tuple[nn.Module, Loss]:
    config = StackConfig(E, 2, 32, num_layers=4, dropout=0.2, max_len=64)
    x, padding = torch.randn(B, L, E), _padding()
    # A ring over each graph's first 6 nodes, numbered b·L + i.
    edges = [(b * L + i, b * L + (i + 1) % 6) for b in range(B) for i in range(6)]
    edge_index = torch.tensor(edges).T
    return GraphTransformer(config), lambda model: model(x, padding, edge_index).square().mean()


def _seq2seq() -> tuple[nn.Module, Loss]:
    model = Seq2SeqTransformer(
        STACK, decoder_like(STACK), source_vocab_size=30, target_vocab_size=20
    )
    source, target = torch.randint(4, 30, (B, L)), torch.randint(4, 20, (B, 6))

    def loss(model: nn.Module) -> Tensor:
        return -model(source, _padding(), target).log_probs.mean()

    return model, loss


def _bert() -> tuple[nn.Module, Loss]:
    config = BertConfig(
        vocab_size=50,
        hidden_size=E,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=32,
        hidden_dropout_prob=0.2,
        attention_probs_dropout_prob=0.2,
        max_position_embeddings=32,
    )
    ids, mask = torch.randint(0, 50, (B, L)), ~_padding()
    return BertEncoder(config), lambda model: model(ids, mask).last_hidden_state.square().mean()


STACKS: dict[str, Callable[[], tuple[nn.Module, Loss]]] = {
    "encoder-dense": _encoder,
    "encoder-performer": lambda: _encoder("performer", num_features=8),
    "conformer": _conformer,
    "graph": _graph,
    "seq2seq": _seq2seq,
    "bert": _bert,
}


def _pair(name: str) -> tuple[nn.Module, nn.Module, Loss]:
    """The stack in float64, a copy with checkpointing on, and its loss; train mode."""
    torch.manual_seed(0)
    model, loss = STACKS[name]()
    model = model.double().train()
    checkpointed = copy.deepcopy(model)
    assert enable_activation_checkpointing(checkpointed) >= 1
    return model, checkpointed, loss


@pytest.fixture(autouse=True)
def _float64() -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _loss_and_grads(model: nn.Module, loss_fn: Loss) -> tuple[Tensor, dict[str, Tensor]]:
    torch.manual_seed(1)  # the same dropout masks for both runs
    loss = loss_fn(model)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


@pytest.mark.parametrize("name", list(STACKS))
def test_same_loss_and_gradients_with_dropout(name: str) -> None:
    model, checkpointed, loss_fn = _pair(name)
    loss, grads = _loss_and_grads(model, loss_fn)
    loss_c, grads_c = _loss_and_grads(checkpointed, loss_fn)
    assert grads and grads.keys() == grads_c.keys()
    torch.testing.assert_close(loss_c, loss, rtol=1e-12, atol=1e-12)
    for key, grad in grads.items():
        torch.testing.assert_close(grads_c[key], grad, rtol=1e-10, atol=1e-12, msg=key)
    # Dropout was on: another seed gives another loss.
    torch.manual_seed(2)
    assert not torch.equal(loss_fn(model).detach(), loss)


def test_batch_norm_statistics_are_updated_once_per_step() -> None:
    model, checkpointed, loss_fn = _pair("conformer")
    _loss_and_grads(model, loss_fn)
    _loss_and_grads(checkpointed, loss_fn)
    buffers = dict(model.named_buffers())
    assert any("num_batches_tracked" in key for key in buffers)
    for key, buffer in checkpointed.named_buffers():
        torch.testing.assert_close(buffer, buffers[key], rtol=1e-12, atol=1e-12, msg=key)


def test_evaluation_and_the_kv_cache_are_not_checkpointed() -> None:
    model, checkpointed, _ = _pair("seq2seq")
    for m in (model, checkpointed):
        m.eval()
    source, padding = torch.randint(4, 30, (2, 5)), torch.zeros(2, 5, dtype=torch.bool)
    target = torch.randint(4, 20, (2, 4))
    with torch.no_grad():
        full = checkpointed(source, padding, target).log_probs
        torch.testing.assert_close(full, model(source, padding, target).log_probs)
    from selfattn.attention.cache import DecoderCache

    checkpointed.train()  # even in train mode, a cached step runs as before
    encoded = checkpointed.encode(source, padding)
    cache = DecoderCache()
    steps = [checkpointed.decode(target[:, i : i + 1], encoded, cache=cache) for i in range(4)]
    assert cache.offset == 4 and len(steps) == 4


def test_a_four_layer_stack_keeps_far_fewer_bytes() -> None:
    torch.manual_seed(0)
    config = StackConfig(64, 4, 256, num_layers=4, dropout=0.1, max_len=128)
    model = Encoder(config).float().train()
    x = torch.randn(8, 128, 64, dtype=torch.float32)

    def loss_fn(m: nn.Module) -> Tensor:
        return m(x).last_hidden_state.square().mean()

    without = saved_bytes(model, lambda: loss_fn(model))
    enable_activation_checkpointing(model)
    with_checkpointing = saved_bytes(model, lambda: loss_fn(model))
    ratio = with_checkpointing / without
    print(f"saved-for-backward bytes with / without checkpointing: {ratio:.3f}")
    assert ratio < 0.7

    def step(on: bool) -> None:
        enable_activation_checkpointing(model, on)
        loss_fn(model).backward()

    peaks = [measure_memory(lambda on=on: step(on)).peak for on in (False, True)]
    print(f"peak memory of a step with / without checkpointing: {peaks[1] / peaks[0]:.3f}")
    assert peaks[1] < 0.7 * peaks[0]


@pytest.mark.parametrize("architecture", ["bigru", "fc"])
def test_a_model_without_blocks_is_refused(
    tmp_path: Path, architecture: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, epochs=1, architecture=architecture)
    argv = ["train", str(config), "--no-progress", "--set", "train.checkpoint_activations=true"]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "train.checkpoint_activations" in err and repr(architecture) in err
