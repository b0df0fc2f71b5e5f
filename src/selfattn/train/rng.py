"""The global random generators a run draws from: seeding them, and their states for
checkpoints (so that a resumed run draws what an uninterrupted one would)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (CUDA's included)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def get_rng_state() -> dict[str, Any]:
    """The states of Python's, NumPy's and torch's (CPU and CUDA) global generators."""
    name, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "name": name,
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`get_rng_state` returned."""
    random.setstate(state["python"])
    numpy = state["numpy"]
    keys = numpy["keys"].cpu().numpy().astype(np.uint32)
    np.random.set_state((numpy["name"], keys, numpy["pos"], numpy["has_gauss"], numpy["gauss"]))
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
