"""``python -m selfattn``: the ``selfattn`` command (what torchrun's ``-m selfattn`` runs).

A rank torchrun started leaves without the interpreter's shutdown once the command has
returned (its checkpoints written, its output flushed): under FSDP the device mesh and
DTensor's caches still hold the process group after ``Distributed.close``, and gloo's
threads torn down during shutdown can abort a rank ("terminate called without an active
exception", SIGABRT) after a run that succeeded.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from selfattn.cli.main import main
from selfattn.train.distributed import inside_torchrun


def run() -> NoReturn:
    """Run the command and exit with its status (a rank of torchrun's: at once)."""
    status = main()
    if inside_torchrun():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    run()
