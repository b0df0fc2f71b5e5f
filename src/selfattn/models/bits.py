"""Models of the ``bits`` task (the copy recipes): a vector in and a vector of bit logits
out at every step.

* ``ntm``: the neural Turing machine (Graves et al. 2014; :class:`selfattn.memory.ntm.NTM`,
  lecture 003): an LSTM controller ``ffn_dim`` wide with one read and one write head on a
  memory of ``memory_size`` slots of ``memory_width`` numbers;
* ``lstm``: the paper's baseline, an LSTM of ``num_layers`` layers ``ffn_dim`` wide and a
  linear output.

Both read the steps in order (neither sees the future).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor, nn

from selfattn.datatypes import moved
from selfattn.memory.ntm import NTM
from selfattn.models.architectures.lstm import LSTMOptions
from selfattn.models.architectures.ntm import NTMOptions
from selfattn.models.option_groups import ModelOptions

if TYPE_CHECKING:
    from selfattn.models.task_model import TaskSpec

__all__ = ["BitsBatch", "BitsModel", "LSTMBits", "NTMBits", "build_bits_model"]


@dataclass
class BitsBatch:
    """Padded sequences of the bits task.

    Attributes:
        inputs: ``(B, T, F)`` input vectors (0 at padding).
        labels: ``(B, T, C)`` the bits due at each step, and ``IGNORE_INDEX`` (-100)
            where nothing is due (and at padding): the loss is the mean over the rest.
        key_padding_mask: ``(B, T)`` True at padding.
    """

    inputs: Tensor
    labels: Tensor
    key_padding_mask: Tensor

    @property
    def num_tokens(self) -> int:
        """Real input steps."""
        return int((~self.key_padding_mask).sum())

    @property
    def due(self) -> Tensor:
        """``(B, T)`` True where bits are due."""
        return (self.labels >= 0).all(-1)

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> BitsBatch:
        """The same batch on ``device`` (``non_blocking``: :func:`selfattn.datatypes.moved`)."""
        return BitsBatch(
            moved(self.inputs, device, non_blocking),
            moved(self.labels, device, non_blocking),
            moved(self.key_padding_mask, device, non_blocking),
        )


class NTMBits(nn.Module):
    """A neural Turing machine over the steps; ``looks`` keeps its heads' weightings."""

    #: How it was built, for checkpoints (set by the bits task).
    #: What its attention shows: the read and write heads' weightings over the memory.
    attention_view: ClassVar[str] = "heads"
    spec: TaskSpec | None = None

    def __init__(self, config: NTMOptions, *, inputs: int, outputs: int) -> None:
        super().__init__()
        self.machine = NTM(
            inputs,
            outputs,
            hidden=config.ffn_dim,
            slots=config.memory_size,
            width=config.memory_width,
        )

    def forward(self, batch: BitsBatch) -> Tensor:
        return self.machine(batch.inputs)[0]

    @torch.no_grad()
    def heads(self, inputs: Tensor) -> tuple[Tensor, Tensor]:
        """``(B, T, N)`` weightings of the write head and the read head at every step."""
        state = self.machine.initial_state(inputs.shape[0])
        writes, reads = [], []
        for t in range(inputs.shape[1]):
            _, state = self.machine.step(inputs[:, t], state)
            writes.append(state.write_weights)
            reads.append(state.read_weights)
        return torch.stack(writes, 1), torch.stack(reads, 1)


class LSTMBits(nn.Module):
    """The LSTM baseline: ``num_layers`` layers, then a linear map to the bits."""

    #: How it was built, for checkpoints (set by the bits task).
    #: It has no attention to show.
    attention_view: ClassVar[str] = "none"
    spec: TaskSpec | None = None

    def __init__(self, config: LSTMOptions, *, inputs: int, outputs: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(inputs, config.ffn_dim, num_layers=config.num_layers, batch_first=True)
        self.out = nn.Linear(config.ffn_dim, outputs)

    def forward(self, batch: BitsBatch) -> Tensor:
        return self.out(self.lstm(batch.inputs)[0])


#: What the bits task asks of a model: ``forward(batch) → (B, T, C)`` logits.
BitsModel = NTMBits | LSTMBits


def build_bits_model(config: ModelOptions, *, inputs: int, outputs: int) -> BitsModel:
    """The ``ntm`` or ``lstm`` model of ``config`` for ``inputs`` features and ``outputs``
    bits per step.

    Raises:
        ValueError: another architecture (one line).
    """
    check_bits_model(config)
    if isinstance(config, NTMOptions):
        return NTMBits(config, inputs=inputs, outputs=outputs)
    assert isinstance(config, LSTMOptions)
    return LSTMBits(config, inputs=inputs, outputs=outputs)


def check_bits_model(config: ModelOptions) -> None:
    """Refuse, in one line, an architecture that is not a model of the bits task (a field
    it does not read has no place in its options)."""
    if config.architecture not in ("ntm", "lstm"):
        raise ValueError(
            f"model.architecture = {config.architecture!r}: the bits task (the copy recipes) "
            'is learned by "ntm" (a neural Turing machine) or "lstm"'
        )
