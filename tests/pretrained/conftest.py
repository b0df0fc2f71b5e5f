"""``minilm_folder``: the real all-MiniLM-L6-v2 checkpoint, or a skip saying why it cannot
be fetched here (no network). CI fetches it, so there these tests run."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfattn.pretrained.weights import PRETRAINED, PretrainedError


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    try:
        return PRETRAINED["minilm-l6"].fetch()
    except PretrainedError as err:
        pytest.skip(f"minilm-l6: its weights cannot be fetched here ({err})")
