"""TensorBoard event files of a training run, beside its ``metrics.jsonl``.

``metrics.jsonl`` is the run's record; the events repeat each of its lines for TensorBoard
(the viewer PyTorch, fairseq, ESPnet and Lightning users already run): every number of an
epoch's line is a scalar at step = the epoch (``train_loss`` as ``train/loss``,
``dev_accuracy`` as ``dev/accuracy``, ``lr`` as ``train/lr``, ``tokens_per_s`` as
``speed/tokens_per_s`` …, :func:`scalar_tag`), and every
``train.tensorboard_images`` epochs the attention maps of one fixed dev example are an
image per layer (its heads side by side, darker = more weight).

The events are written into the run folder itself (``tensorboard --logdir RUN``; the
folder above several runs shows them side by side), by
:class:`torch.utils.tensorboard.SummaryWriter` when the ``tensorboard`` package is
installed (``pip install selfattn[tensorboard]``), and skipped otherwise with a one-line
hint. ``train.tensorboard = false`` turns them off. A resumed run appends a new events
file that hides the previous file's epochs from the one it resumes at on (TensorBoard's
``purge_step``), so the curves show each epoch once.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from torch import Tensor, nn

if TYPE_CHECKING:
    from selfattn.config import Config
    from selfattn.train.distributed import Distributed
    from selfattn.train.start import Started

#: ``model → [(title, per-layer (H, T, S) maps, the example's tokens)]``: the attention of
#: the fixed dev example that the run's images show (a task builds it; the loop calls it).
AttentionProbe = Callable[[nn.Module], Sequence[tuple[str, Sequence[Tensor], Sequence[str]]]]
#: Fields of a metrics line that are not a curve of their own.
NOT_SCALARS = ("epoch",)
#: A head's map is drawn about this many pixels wide (each cell a square of at most
#: :data:`MAX_CELL_PIXELS`, at least one pixel).
IMAGE_PIXELS = 256
MAX_CELL_PIXELS = 16
EVENTS_GLOB = "events.out.tfevents.*"


def installed() -> bool:
    """Whether the ``tensorboard`` package (which SummaryWriter needs) can be imported."""
    return importlib.util.find_spec("tensorboard") is not None


def scalar_tag(key: str) -> str:
    """The TensorBoard tag of a metrics-line field: ``train_loss`` → ``train/loss``,
    ``dev_accuracy`` → ``dev/accuracy``, ``tokens_per_s`` → ``speed/tokens_per_s``,
    ``seconds`` → ``speed/seconds``, anything else ``train/<key>``."""
    head, _, rest = key.partition("_")
    if head in ("train", "dev", "test") and rest:
        return f"{head}/{rest}"
    if key in ("tokens_per_s", "seconds"):
        return f"speed/{key}"
    return f"train/{key}"


def scalars(line: dict[str, Any]) -> dict[str, float]:
    """The numbers of a metrics line that become curves, by tag."""
    return {
        scalar_tag(key): float(value)
        for key, value in line.items()
        if key not in NOT_SCALARS and isinstance(value, int | float) and not isinstance(value, bool)
    }


def attention_image(maps: Tensor) -> np.ndarray:
    """One layer's ``(H, T, S)`` weights as a grey ``(height, width)`` uint8 image: the
    heads side by side with a white gap, each cell a square of pixels, darker = more
    weight (each head scaled to its own largest weight)."""
    weights = maps.detach().float().cpu().numpy()
    _, rows, cols = weights.shape
    scale = max(1, min(MAX_CELL_PIXELS, IMAGE_PIXELS // max(rows, cols, 1)))
    panels = []
    for head in weights:
        top = float(head.max()) if head.size else 0.0
        shade = 1.0 - (head / top if top > 0 else head)
        panels.append(np.kron(shade, np.ones((scale, scale))))
        panels.append(np.ones((rows * scale, 2)))
    image = np.concatenate(panels[:-1], axis=1) if panels else np.ones((1, 1))
    return (np.clip(image, 0.0, 1.0) * 255).astype(np.uint8)


class Board:
    """The run's TensorBoard writer: :meth:`epoch` after each metrics line is appended.

    Args:
        run_dir: the run folder (the events go there).
        enabled: write at all (``train.tensorboard``, and rank 0 of several processes).
        images_every: draw the attention images every this many epochs; 0: never.
        probe: gives the attention maps of the fixed dev example; ``None``: no images.
        first_epoch: the first epoch this process writes (a resumed run's earlier epochs
            are in the events files already; later ones, from before a crash, are hidden).
        say: writes one console line.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        enabled: bool,
        images_every: int = 1,
        probe: AttentionProbe | None = None,
        first_epoch: int = 1,
        say: Callable[[str], None] = print,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.enabled = enabled and installed()
        self.hint = enabled and not self.enabled
        self.images_every = images_every
        self.probe = probe
        self.first_epoch = first_epoch
        self.say = say
        self._writer: Any = None
        self._example_written = False

    def opening_line(self) -> str | None:
        """Where the events go and how to see them; the install hint without the package;
        ``None`` when off."""
        if self.enabled:
            where = self.run_dir
            return f"tensorboard events in {where} (view: tensorboard --logdir {where})"
        if self.hint:
            return "no tensorboard events: pip install tensorboard (or train.tensorboard = false)"
        return None

    def epoch(self, line: dict[str, Any], model: nn.Module) -> None:
        """Write one metrics line's scalars, and the attention images when due."""
        if not self.enabled:
            return
        writer = self._open()
        step = int(line["epoch"])
        for tag, value in scalars(line).items():
            writer.add_scalar(tag, value, step)
        if self.probe is not None and self.images_every > 0 and step % self.images_every == 0:
            self._images(writer, model, step)
        writer.flush()

    def _open(self) -> Any:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            if self.first_epoch <= 1:  # a new run: a previous run's events are not its own
                for old in self.run_dir.glob(EVENTS_GLOB):
                    old.unlink(missing_ok=True)
            purge = self.first_epoch if self.first_epoch > 1 else None
            self._writer = SummaryWriter(str(self.run_dir), purge_step=purge)
        return self._writer

    def _images(self, writer: Any, model: nn.Module, step: int) -> None:
        assert self.probe is not None
        was_training = model.training
        model.eval()
        try:
            figures = self.probe(model)
        except Exception as error:  # a picture never stops the training
            # ValueError: the model has no attention weights to show; anything else is a
            # model this drawing does not know, named by its type.
            what = str(error).splitlines()[0] if str(error) else ""
            if not isinstance(error, ValueError):
                what = f"{type(error).__name__}: {what}"
            self.say(f"no attention images in tensorboard: {what}")
            self.probe = None
            return
        finally:
            model.train(was_training)
        for title, maps, tokens in figures:
            name = title.replace(" ", "_")
            if not self._example_written:
                writer.add_text(f"{name}/example", " ".join(tokens), step)
            for layer, weights in enumerate(maps, start=1):
                image = attention_image(weights)
                writer.add_image(f"{name}/layer_{layer}", image, step, dataformats="HW")
        self._example_written = True

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> Board:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_board(
    config: Config,
    started: Started,
    dist: Distributed,
    probe: AttentionProbe | None,
    say: Callable[[str], None],
) -> Board:
    """The :class:`Board` of a run that :func:`~selfattn.train.start.start_run` started:
    written by the main process alone when ``train.tensorboard`` is on, with attention
    images when ``probe`` is given and one process trains (a forward pass on one rank
    alone would wait for the others); its opening line said unless the run has nothing
    left to do."""
    train = config.train
    done = started.state.stopped_early or started.state.epoch >= train.epochs
    board = Board(
        Path(config.run_dir),
        enabled=train.tensorboard and dist.is_main() and not done,
        images_every=train.tensorboard_images,
        probe=probe if dist.size == 1 else None,
        first_epoch=started.state.epoch + 1,
        say=say,
    )
    line = board.opening_line()
    if line is not None:
        say(line)
    return board
