"""Fine-tuning: start a run from another run's weights (``train.init_from``).

The usual road to sequence-level training (lecture 003; Shen et al. 2016 §4 start MRT
from an MLE-trained model): train with likelihood, then go on from those weights with
``train.objective = "mrt"``. Only the weights are taken, not the optimizer, schedule or
counters: the new run is a new run. A run that builds another model, or reads its data
with other vocabularies, is refused in one line; the one difference allowed is exit heads
(``model.exit_heads``) that the run started from lacks, which start as built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from selfattn.config import Config
from selfattn.models.spec import TaskSpec
from selfattn.train.checkpoint import load_checkpoint
from selfattn.train.run_dir import checkpoint_in
from selfattn.train.state_fit import load_fitting_weights

#: The ``[seq2seq]`` fields that shape the model (the others are training or decoding).
SEQ2SEQ_MODEL_FIELDS = (
    "output",
    "decoder_layers",
    "share_embeddings",
    "tie_output",
    "cross_layers",
    "source_positional",
    "nat",
)

#: The ``[model]`` fields a run may add to the one it starts from: exit heads after every
#: block of a model fine-tuned without them (DeeBERT's second stage).
EXIT_FIELDS = ("exit_heads", "exit_loss_weights")


def load_initial_weights(
    model: nn.Module,
    path: str | Path,
    config: Config,
    spec: TaskSpec,
    vocabs: dict[str, Any],
) -> Path:
    """Copy the weights of the run or checkpoint ``path`` into ``model``.

    Args:
        model: the freshly built model of ``config``.
        path: a run folder (its ``best``, else ``last``) or a checkpoint folder.
        config: this run's configuration.
        spec: this run's task spec.
        vocabs: this run's vocabularies (what its checkpoints will store).

    Returns:
        The checkpoint folder the weights came from.

    Raises:
        ValueError: one line: no checkpoint at ``path``; a different ``[model]`` section,
            model-shaping ``[seq2seq]`` field, task spec or vocabulary; weights that do
            not fit the model.
    """
    directory = checkpoint_in(path)
    checkpoint = load_checkpoint(directory)
    stored = checkpoint.config
    adding_exits = getattr(config.model, "exit_heads", False) and not getattr(
        stored.model, "exit_heads", False
    )
    differ = [
        f"model.{name}"
        for name, value in vars(config.model).items()
        if getattr(stored.model, name, None) != value and not (adding_exits and name in EXIT_FIELDS)
    ]
    differ += [
        f"seq2seq.{name}"
        for name in SEQ2SEQ_MODEL_FIELDS
        if getattr(stored.seq2seq, name) != getattr(config.seq2seq, name)
    ]
    if checkpoint.spec is not None and checkpoint.spec != spec:
        differ.append("the task spec (vocabulary sizes, classes, max_len)")
    if checkpoint.vocabs != vocabs:
        differ.append("the vocabularies (data, data.bpe_vocab_size or data.train_fraction)")
    if differ:
        raise ValueError(
            f"train.init_from = {str(path)!r}: {directory} holds another model (differing: "
            f"{', '.join(differ)}); fine-tune with the run's own model and data settings"
        )
    weights = checkpoint.model_state
    if adding_exits:  # the run had none: the exits start as built, the rest is the run's
        fresh = {k: v for k, v in model.state_dict().items() if ".exits." in f".{k}"}
        weights = {**fresh, **weights}
    load_fitting_weights(
        model,
        weights,
        f"train.init_from = {str(path)!r}: the weights of {directory} do not fit the model",
    )
    return directory
