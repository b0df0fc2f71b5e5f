"""``python -m selfattn``: the ``selfattn`` command (what torchrun's ``-m selfattn`` runs)."""

from __future__ import annotations

import sys

from selfattn.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
