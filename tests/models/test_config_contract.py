"""No option silently ignored: for every task type × architecture × ``[model]`` field (of any
architecture's options), a non-default value either changes the model built (its
parameters, its structure, or its outputs on a fixed batch under a fixed seed) or is
refused with a one-line ValueError.

The fields are read from the registry (:func:`~selfattn.models.registry.model_keys`), so a
field added without a non-default value here fails the first test, and one that no model
reads fails the rest.
Fields that only make sense for some inputs are tried on that input: the character fields
on text, the image fields on an image grid, every graph field on graphs with edge features.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from selfattn.data.copy_task import copy_inputs
from selfattn.data.vocab import Vocabulary
from selfattn.datatypes import Batch
from selfattn.models.architectures import ARCHITECTURES as REGISTRY
from selfattn.models.bits import BitsBatch, build_bits_model
from selfattn.models.memory import MemoryTaskModel
from selfattn.models.option_groups import ModelOptions
from selfattn.models.registry import FORMER_DEFAULTS, model_keys, model_options, unset
from selfattn.models.seq2seq import BOS_ID, NUM_SPECIALS
from selfattn.models.seq2seq_builder import SEQ2SEQ_MODELS, build_seq2seq_model
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import TaskSpec, build_model_from_spec
from selfattn.tasks import TASKS as TASK_TYPES

TASKS: tuple[str, ...] = tuple(TASK_TYPES)
ARCHITECTURES: tuple[str, ...] = tuple(REGISTRY)
VOCAB, CHARS, FEATURES, EDGE_DIM, IMAGE, BITS = 12, 8, 3, 2, (4, 4, 1), 4
#: The words of the text batches for the memory network: "." is id 2, "?" id 3.
STORY_WORDS = Vocabulary([".", "?", *(f"w{i}" for i in range(4, VOCAB))])
STORY_END_ID = STORY_WORDS.token_id(".")
LENGTHS = [5, 3]
#: Small sizes every architecture reads, with dropout on so rates have something to change.
SIZES: dict[str, Any] = {"embed_dim": 16, "num_layers": 2, "ffn_dim": 16, "dropout": 0.1}

Case = tuple[dict[str, Any], dict[str, Any]]
#: Per field, the non-default values to try: ``(base overrides, changes)``. The base
#: overrides set what the value needs to mean something (a size needs its kernel).
CHANGES: dict[str, list[Case]] = {
    "architecture": [],  # filled per architecture: the base's architecture changed
    "embed_dim": [({}, {"embed_dim": 24})],
    "num_heads": [({}, {"num_heads": 2})],
    "num_layers": [({}, {"num_layers": 3})],
    "ffn_dim": [({}, {"ffn_dim": 32})],
    "dropout": [({}, {"dropout": 0.3})],
    "positional": [({}, {"positional": "learned"}), ({}, {"positional": "rotary"})],
    "pooling": [({}, {"pooling": name}) for name in ("first", "attention", "cls")],
    "window_k": [({}, {"window_k": 2})],
    "char_features": [({}, {"char_features": True})],
    "char_dim": [({"char_features": True}, {"char_dim": 24})],
    "word_dropout": [({}, {"word_dropout": 0.5})],
    "norm_first": [({}, {"norm_first": False})],
    "attention": [({}, {"attention": "linear"}), ({}, {"attention": "performer"})],
    "attention_size": [
        ({"attention": "window", "attention_size": 1}, {"attention_size": 2}),
        ({"attention": "performer"}, {"attention_size": 8}),
    ],
    "attention_dropout": [({}, {"attention_dropout": 0.0})],
    "patch_size": [({"positional": None}, {"patch_size": 2})],
    "grid_positional": [({"positional": None}, {"grid_positional": "sinusoidal2d"})],
    "score": [({}, {"score": name}) for name in ("dot", "additive", "general")],
    "normalizer": [({}, {"normalizer": "relu"}), ({}, {"normalizer": "sigmoid"})],
    "include_self": [({}, {"include_self": False})],
    "share_weights": [({}, {"share_weights": True})],
    "rnn_cell": [({}, {"rnn_cell": "lstm"})],
    "input_feeding": [({}, {"input_feeding": False})],
    # Without the checkpoint in the spec (what a prepared task puts there) it is refused;
    # tests/pretrained/test_fine_tune.py builds it with one.
    "pretrained": [({}, {"pretrained": "minilm-l6"})],
    "exit_heads": [({}, {"exit_heads": True})],
    "exit_loss_weights": [({"exit_heads": True}, {"exit_loss_weights": "linear"})],
    "memory_size": [({}, {"memory_size": 1})],
    "memory_tying": [({}, {"memory_tying": "layerwise"})],
    "linear_start_steps": [({}, {"linear_start_steps": 10})],
    "memory_noise": [({}, {"memory_noise": 0.5})],
    "memory_width": [({}, {"memory_width": 8})],
    # Adaptive depth needs the shared block; ponder_weight only means something with it.
    "halting": [({"share_weights": True}, {"halting": "act"})],
    "ponder_weight": [({"share_weights": True, "halting": "act"}, {"ponder_weight": 0.1})],
    "ffn_dropout": [({}, {"ffn_dropout": 0.3})],
    "head_dropout": [({}, {"head_dropout": 0.3})],
    "dropout_masks": [({}, {"dropout_masks": "bernoulli"})],
    "linear_layers": [({}, {"linear_layers": "torch"})],
}
TEXT_FIELDS = {"char_features", "char_dim", "word_dropout"}
IMAGE_FIELDS = {"patch_size", "grid_positional"}


def _input_kind(architecture: str, field: str) -> str:
    """The input a field is tried on: text, image or graph (vectors with edges)."""
    if field in IMAGE_FIELDS or architecture == "cnn2d":
        return "image"
    if field in TEXT_FIELDS:
        return "text"
    return "graph" if architecture == "graph" else "text"


def _spec(task: str, kind: str) -> TaskSpec:
    num_labels = 1 if task == "regression" else VOCAB if task == "seq2seq" else 3
    common: dict[str, Any] = {"task": task, "num_labels": num_labels, "max_len": 16}
    if kind == "text":
        return TaskSpec(**common, vocab_size=VOCAB, char_vocab_size=CHARS)
    if kind == "image":
        return TaskSpec(**common, feature_dim=IMAGE[2], image_shape=IMAGE)
    return TaskSpec(**common, feature_dim=FEATURES, edge_dim=EDGE_DIM)


def _batch(task: str, kind: str) -> Batch | BitsBatch:
    """A fixed batch of two examples (lengths 5 and 3; images are whole)."""
    generator = torch.Generator().manual_seed(0)
    if task == "bits":  # vectors in, bits out, at every step
        copy = copy_inputs(torch.randint(0, 2, (2, 3, BITS), generator=generator).float())
        labels = copy.targets.long().masked_fill(~copy.mask.bool()[..., None], -100)
        return BitsBatch(copy.inputs, labels, torch.zeros(copy.mask.shape, dtype=torch.bool))
    length = IMAGE[0] * IMAGE[1] if kind == "image" else max(LENGTHS)
    lengths = [length] * len(LENGTHS) if kind == "image" else LENGTHS
    mask = torch.arange(length)[None, :] >= torch.tensor(lengths)[:, None]
    labels = (
        torch.zeros(len(lengths), length, dtype=torch.long)
        if task == "token"
        else torch.zeros(len(lengths))
    )
    if kind == "text":
        tokens = torch.randint(2, VOCAB, (len(lengths), length), generator=generator)
        tokens[:, 1] = STORY_END_ID  # a fact and a question for the memory network
        chars = torch.randint(1, CHARS, (len(lengths), length, 3), generator=generator)
        tokens, chars = tokens.masked_fill(mask, 0), chars.masked_fill(mask[..., None], 0)
        return Batch(tokens, chars, None, mask, labels)
    width = IMAGE[2] if kind == "image" else FEATURES
    features = torch.rand(len(lengths), length, width, generator=generator)
    if kind == "image":
        return Batch(None, None, features, mask, labels)
    # A path in each graph, both directions, over the flat positions b·L + i.
    pairs = [
        (b * length + i, b * length + i + 1) for b, n in enumerate(lengths) for i in range(n - 1)
    ]
    edges = torch.tensor(pairs + [(j, i) for i, j in pairs]).T
    edge_attr = torch.rand(edges.shape[1], EDGE_DIM, generator=generator)
    return Batch(None, None, features, mask, labels, edge_index=edges, edge_attr=edge_attr)


def _build(config: ModelOptions, task: str, kind: str) -> nn.Module:
    torch.manual_seed(0)
    if task == "bits":
        return build_bits_model(config, inputs=BITS + 2, outputs=BITS + 1)
    spec = _spec(task, kind)
    if task == "seq2seq":
        return build_seq2seq_model(config, Seq2SeqConfig(), spec)
    model = build_model_from_spec(config, spec)
    if isinstance(model, MemoryTaskModel):  # what a prepared task does with its vocabulary
        model.bind(STORY_WORDS, STORY_WORDS.decode(range(VOCAB - spec.num_labels, VOCAB)))
    return model


def _outputs(model: nn.Module, batch: Batch, *, train: bool) -> torch.Tensor:
    model.train(train)
    torch.manual_seed(1)
    with torch.no_grad():
        if not isinstance(model, SEQ2SEQ_MODELS):
            return model(batch)
        assert batch.token_ids is not None
        target = batch.token_ids.clamp(min=NUM_SPECIALS)[:, :4]
        target[:, 0] = BOS_ID
        return model(batch.token_ids, batch.key_padding_mask, target).log_probs


def _changed(a: nn.Module, b: nn.Module, batch: Batch) -> bool:
    """Whether ``b`` differs from ``a``: parameters, structure, or outputs."""
    first, second = a.state_dict(), b.state_dict()
    if {k: v.shape for k, v in first.items()} != {k: v.shape for k, v in second.items()}:
        return True
    if repr(a) != repr(b) or any(not torch.equal(first[k], second[k]) for k in first):
        return True
    return any(
        not torch.equal(_outputs(a, batch, train=train), _outputs(b, batch, train=train))
        for train in (False, True)
    )


def _base(architecture: str, overrides: dict[str, Any]) -> dict[str, Any]:
    reads = REGISTRY[architecture].options.field_names()
    sizes = {name: value for name, value in SIZES.items() if name in reads}
    return {"architecture": architecture, **sizes, **overrides}


def _cases(architecture: str, field: str) -> list[Case]:
    if field == "architecture":
        other = "conformer" if architecture != "conformer" else "transformer"
        return [({}, {"architecture": other})]
    return CHANGES[field]


def test_every_field_has_a_value_to_try() -> None:
    missing = [name for name in model_keys() if name not in CHANGES]
    assert not missing, f"add non-default values of {missing} to CHANGES"


def _refused(error: ValueError) -> str | None:
    """``None`` when ``error`` is a proper refusal, else what is wrong with it."""
    message = str(error)
    return None if message and "\n" not in message else f"not one line: {message!r}"


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("task", TASKS)
def test_every_field_is_honoured_or_refused(task: str, architecture: str) -> None:
    silent, bad_errors = [], []
    for field in model_keys():
        kind = _input_kind(architecture, field)
        batch = _batch(task, kind)
        for overrides, changes in _cases(architecture, field):
            try:
                base = _build(model_options(**_base(architecture, overrides)), task, kind)
            except ValueError as error:  # the setting the value needs is refused already
                if problem := _refused(error):
                    bad_errors.append((field, problem))
                continue
            try:
                changed = _build(
                    model_options(**_base(architecture, overrides | changes)), task, kind
                )
            except ValueError as error:
                if problem := _refused(error):
                    bad_errors.append((field, problem))
                continue
            # A run saved before 2026-11-26 holds the former defaults, which a model that
            # does not read the field accepts as unset (test_a_run_saved_before_... below).
            reads = REGISTRY[architecture].options.field_names()
            former = field not in reads and unset(field, changes[field])
            if not former and not _changed(base, changed, batch):
                silent.append((field, changes))
    assert not bad_errors, bad_errors
    assert not silent, f"{task} × {architecture}: silently ignored {silent}"


# The combinations that must build: a refusal of the base itself would make the test above
# pass vacuously. They come from the registries: a task type takes the architectures
# that produce what it accepts.
NOT_ON_IMAGES = {"memn2n", "ntm", "lstm"}
SUPPORTED = [
    (task, arch) for task in TASK_TYPES for arch in ARCHITECTURES if TASK_TYPES[task].takes(arch)
]
#: What the hand-written table said before the registries did: a memory network answers
#: one label per story, image models classify whole images, the copy tasks' and seq2seq's
#: models are not label models.
NOT_MULTILABEL = {"memn2n", "cnn2d", "ntm", "lstm", "rnn"}
LABEL_TASKS = ("token", "sequence", "regression")
BY_HAND = {
    *((task, arch) for task in LABEL_TASKS for arch in ARCHITECTURES),
    ("seq2seq", "transformer"),
    ("seq2seq", "conformer"),
    ("seq2seq", "rnn"),
    *(("multilabel", arch) for arch in ARCHITECTURES if arch not in NOT_MULTILABEL),
    ("bits", "ntm"),
    ("bits", "lstm"),
} - {("token", "cnn2d"), ("regression", "cnn2d"), ("token", "memn2n"), ("regression", "memn2n")}
BY_HAND -= {(task, arch) for task in LABEL_TASKS for arch in ("ntm", "lstm", "rnn")}


def test_the_registries_give_every_combination_the_table_had() -> None:
    assert set(SUPPORTED) == BY_HAND
    assert set(TASKS) >= {"token", "sequence", "regression", "multilabel", "seq2seq", "bits"}


@pytest.mark.parametrize(("task", "architecture"), SUPPORTED)
def test_the_base_configurations_build(task: str, architecture: str) -> None:
    kind = _input_kind(architecture, "embed_dim")
    model = _build(model_options(**_base(architecture, {})), task, kind)
    assert torch.isfinite(_outputs(model, _batch(task, kind), train=False)).all()


@pytest.mark.parametrize(("task", "architecture"), SUPPORTED)
def test_a_run_saved_before_the_defaults_changed_still_builds(task: str, architecture: str) -> None:
    """A run folder stores every field, so one saved before 2026-11-26 holds the former
    defaults of ffn_dropout, head_dropout, dropout_masks and linear_layers, also where
    its model reads none of them (an RNN, a seq2seq model's head): it must still load."""
    kind = _input_kind(architecture, "embed_dim")
    model = _build(model_options(**_base(architecture, FORMER_DEFAULTS)), task, kind)
    assert torch.isfinite(_outputs(model, _batch(task, kind), train=False)).all()


@pytest.mark.parametrize(
    "architecture",
    sorted(
        name for name, entry in REGISTRY.items() if {"vectors", "image_vectors"} & entry.produces
    ),
)
def test_the_image_fields_are_honoured_on_images(architecture: str) -> None:
    """The vacuous-pass guard for the image fields: on an image and a sequence task they
    change the model of every architecture (each can read patches and 2-D positions)."""
    batch = _batch("sequence", "image")
    for field in sorted(IMAGE_FIELDS):
        for overrides, changes in CHANGES[field]:
            base = _build(model_options(**_base(architecture, overrides)), "sequence", "image")
            changed = _build(
                model_options(**_base(architecture, overrides | changes)), "sequence", "image"
            )
            assert _changed(base, changed, batch), (architecture, field)


@pytest.mark.parametrize("architecture", ["transformer", "conformer"])
@pytest.mark.parametrize("task", ["token", "sequence", "regression"])
def test_adaptive_depth_is_honoured_by_the_attention_stacks(task: str, architecture: str) -> None:
    """The vacuous-pass guard for ``halting`` and ``ponder_weight``: the stacks that can
    run adaptive depth build it, and each field changes the model."""
    batch = _batch(task, "text")
    for field in ("halting", "ponder_weight"):
        for overrides, changes in CHANGES[field]:
            base = _build(model_options(**_base(architecture, overrides)), task, "text")
            changed = _build(
                model_options(**_base(architecture, overrides | changes)), task, "text"
            )
            assert _changed(base, changed, batch), (architecture, field)


@pytest.mark.parametrize(
    ("task", "architecture"),
    [("seq2seq", "transformer"), ("sequence", "graph"), ("sequence", "fc"), ("bits", "ntm")],
)
def test_adaptive_depth_is_refused_where_there_is_no_shared_stack(
    task: str, architecture: str
) -> None:
    kind = _input_kind(architecture, "halting")
    fields = {"share_weights": True} if architecture in ("transformer", "graph") else {}
    with pytest.raises(ValueError, match="halting") as error:
        _build(model_options(**_base(architecture, {**fields, "halting": "act"})), task, kind)
    assert "\n" not in str(error.value)


def test_halting_needs_shared_weights_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"needs model\.share_weights = true") as error:
        model_options(halting="act")
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="ponder_weight"):
        model_options(share_weights=True, ponder_weight=0.5)
