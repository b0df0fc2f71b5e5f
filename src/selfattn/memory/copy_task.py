"""The neural Turing machine's copy and repeat-copy tasks (Graves et al. 2014, §4.1–4.2):
their layout is data, :mod:`selfattn.data.copy_task`, re-exported here for the callers
that still import it from this module.
"""

from __future__ import annotations

from selfattn.data.copy_task import CopyBatch, bits_wrong, copy_batch, copy_inputs, copy_loss

__all__ = ["CopyBatch", "bits_wrong", "copy_batch", "copy_inputs", "copy_loss"]
