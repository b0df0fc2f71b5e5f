"""What the training loop tells the console, and how it hears Ctrl-C.

Everything goes to stderr, leaving stdout to a command's result. On a terminal a tqdm bar
shows the step, loss, tokens/s and ETA, and each epoch's summary is written above it.
Elsewhere (a log file, a pipe, a notebook's captured stream) a bar's redraws would fill
the log with carriage returns, so the loop writes plain lines instead: one per epoch, and
one every :data:`LOG_SECONDS` within a long epoch.

:class:`StopOnSignal` turns the first Ctrl-C (SIGINT) or SIGTERM into a request that the
loop honours at the next step boundary, so that no signal lands inside ``optimizer.step``
and the loop can save a checkpoint first; a second signal acts at once.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Literal, TextIO

from tqdm import tqdm

from selfattn.messages import plural

if TYPE_CHECKING:
    from selfattn.config import TrainConfig
    from selfattn.train.start import Started

#: ``auto``: a bar on a terminal, plain lines elsewhere; ``bar``; ``lines``; ``off``: silent.
ProgressMode = Literal["auto", "bar", "lines", "off"]
#: Within an epoch, at most one plain progress line per this many seconds.
LOG_SECONDS = 30.0


def resolve_mode(progress: bool | str, stream: TextIO) -> Literal["bar", "lines", "off"]:
    """The concrete mode: ``True`` means ``auto``, ``False`` plain lines (no bar)."""
    if progress is True or progress == "auto":
        isatty = getattr(stream, "isatty", None)
        return "bar" if isatty is not None and isatty() else "lines"
    if progress is False:
        return "lines"
    if progress in ("bar", "lines", "off"):
        return progress  # type: ignore[return-value]
    raise ValueError(f"progress must be one of auto, bar, lines, off or a bool, got {progress!r}")


class Progress:
    """The loop's console output.

    Args:
        mode: see :data:`ProgressMode` (or a bool, see :func:`resolve_mode`).
        total_steps: optimizer steps of the whole run.
        done_steps: steps already taken (a resumed run).
        stream: where to write (default: stderr).
    """

    def __init__(
        self,
        mode: bool | str,
        total_steps: int,
        done_steps: int = 0,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.mode = resolve_mode(mode, self.stream)
        self.bar: tqdm[Any] | None = None
        if self.mode == "bar":
            self.bar = tqdm(
                total=total_steps,
                initial=done_steps,
                file=self.stream,
                unit="step",
                dynamic_ncols=True,
            )
        self._last_line = time.monotonic()

    def say(self, text: str) -> None:
        """A line of its own (above the bar on a terminal)."""
        if self.mode == "off":
            return
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def notice(self, text: str) -> None:
        """Like :meth:`say`, but safe inside a signal handler (no tqdm lock)."""
        if self.mode != "off":
            prefix = "\n" if self.bar is not None else ""
            self.stream.write(f"{prefix}{text}\n")
            self.stream.flush()

    def step(self, epoch: str, step: int, steps: int, loss: float, tokens_per_s: float) -> None:
        """After an optimizer step: ``epoch`` as ``"E/N"``, ``step`` of ``steps`` in it."""
        if self.bar is not None:
            # No forced redraw per step: tqdm redraws at most ten times a second.
            self.bar.set_postfix(
                epoch=epoch, loss=f"{loss:.4f}", tok_s=f"{tokens_per_s:.0f}", refresh=False
            )
            self.bar.update(1)
        elif self.mode == "lines" and step < steps:
            now = time.monotonic()
            if now - self._last_line >= LOG_SECONDS:
                self._last_line = now
                self.say(
                    f"epoch {epoch}  step {step}/{steps}  loss {loss:.4f}  "
                    f"{tokens_per_s:,.0f} tokens/s"
                )

    def epoch_end(self, line: dict[str, Any], epochs: int) -> None:
        """The epoch's summary: training loss, every dev metric, the best epoch."""
        self._last_line = time.monotonic()
        self.say(epoch_summary(line, epochs))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def opening_lines(
    run_dir: Path, train: TrainConfig, started: Started, where: str | None, processes: int
) -> list[str]:
    """The run's first console lines: for a new run (``where`` it trains, e.g. ``cpu, 2
    threads``) its length, for a resumed one (``where`` is ``None``) where it goes on from
    (or that it has nothing left to do), run by how many ``processes``; where its weights
    came from."""
    state, epochs = started.state, train.epochs
    if where is not None:
        limit = (
            f" (stopping at train.max_steps = {train.max_steps})"
            if train.max_steps is not None and train.max_steps < epochs * state.steps_per_epoch
            else ""
        )
        lines = [
            f"training {run_dir}: {plural(epochs, 'epoch')} of "
            f"{plural(state.steps_per_epoch, 'step')}{limit} on {where}"
        ]
    elif state.stopped_early or state.epoch >= epochs:
        why = "stopped early" if state.stopped_early else f"train.epochs is {epochs}"
        lines = [f"{run_dir} has finished after epoch {state.epoch} ({why}); nothing to do"]
    else:
        lines = [f"resuming {run_dir} from {state.position()} ({epochs} epochs)"]
    if started.initialised_from is not None:
        lines.append(f"starting from the weights of {started.initialised_from}")
    if started.resumed and started.trained_by != processes:
        lines.append(
            f"resuming a run of {plural(started.trained_by, 'process')} with "
            f"{processes}: the batches are global, so it goes on as before"
        )
    return lines


def epoch_summary(line: dict[str, Any], epochs: int) -> str:
    """One metrics line as text, e.g. ``epoch 2/10  train loss 0.4321  dev accuracy 0.9120
    loss 0.3012 count 300  best epoch 2  (12.3 s, 4,567 tokens/s)``."""
    parts = [f"epoch {line['epoch']}/{epochs}", f"train loss {line['train_loss']:.4f}"]
    dev = [
        f"{key[4:]} {_number(key, value)}" for key, value in line.items() if key.startswith("dev_")
    ]
    if dev:
        parts.append("dev " + " ".join(dev))
    if line.get("best_epoch") is not None:
        parts.append(f"best epoch {line['best_epoch']}")
    if "skipped_steps" in line:  # train.nan_policy = "skip"
        parts.append(f"skipped {plural(line['skipped_steps'], 'step')} (loss not finite)")
    timing = f"({line.get('seconds', 0.0):.1f} s, {line.get('tokens_per_s', 0.0):,.0f} tokens/s)"
    return "  ".join([*parts, timing])


def _number(key: str, value: Any) -> str:
    if isinstance(value, float) and key.endswith("count") and value.is_integer():
        return str(int(value))
    return f"{value:.4f}" if isinstance(value, float) else str(value)


Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class StopOnSignal:
    """While active, the first SIGINT or SIGTERM sets :attr:`requested` (and says so).

    The handlers in place before are restored at that first signal, so a second one acts
    at once (Ctrl-C raises :class:`KeyboardInterrupt`), and on leaving the ``with`` block.
    Signals can only be caught in the main thread: elsewhere this does nothing. A signal
    the process ignores (``nohup``, a background job's SIGINT) stays ignored.

    Args:
        notice: writes a line; called from the signal handler.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, notice: Callable[[str], None]) -> None:
        self.notice = notice
        self.requested = False
        self._previous: dict[int, Handler] = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                previous = signal.getsignal(signum)
                if previous is not signal.SIG_IGN:
                    self._previous[signum] = previous
                    signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._restore()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        self._restore()
        again = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        self.notice(f"stopping after this step… ({again} again to quit at once)")

    def _restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()
