"""The error of a pretrained checkpoint that cannot be had or read."""

from __future__ import annotations

from selfattn.datatypes import DataError


class PretrainedError(DataError):
    """A checkpoint that cannot be had or read: one line naming the file and the problem."""
