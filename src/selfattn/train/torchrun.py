"""torchrun's launcher as ``selfattn train --nproc N`` runs it: ``python -m
selfattn.train.torchrun TORCHRUN-ARGS``, whose exit status is the ranks'.

torchrun reports a failed rank with a Python traceback, a table and log lines, even when
the rank has already said why in one line and exited with status 2 (a refused input).
Here that report is left out: when the ranks exited 2 (or 130, interrupted), or were
stopped by torchrun (SIGTERM) after one did, the launcher exits with that status and
says nothing more; any other failure is one line naming each failed rank and its status
or signal, exit 1 (its own output, above, says what happened).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Sequence

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import parse_args, run

#: Statuses a rank exits with after saying why in one line itself.
QUIET_STATUSES = (2, 130)


def main(argv: Sequence[str] | None = None) -> int:
    """Run torchrun with ``argv``; the exit status of its ranks (see the module)."""
    # torchrun's agent logs each failure it then raises; the line below says it once.
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed.elastic"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        run(parse_args(list(sys.argv[1:] if argv is None else argv)))
    except ChildFailedError as error:
        failures = [error.failures[rank] for rank in sorted(error.failures)]
        said = [f.exitcode for f in failures if f.exitcode in QUIET_STATUSES]
        stopped = [f for f in failures if f.exitcode == -signal.SIGTERM]  # by torchrun
        if said and len(said) + len(stopped) == len(failures):
            return said[0]
        failed = ", ".join(
            f"rank {rank}: "
            + (
                f"signal {failure.signal_name()}"
                if failure.exitcode < 0
                else f"status {failure.exitcode}"
            )
            for rank, failure in sorted(error.failures.items())
        )
        print(f"selfattn train: a process failed ({failed}); its output is above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
