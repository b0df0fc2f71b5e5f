"""Truncated attention in a token model built from its config (``model.attention =
"window"``, the frame classifiers of ``phones-espeak``): a frame's label scores depend on
exactly the frames within the stack's reach, ±w a Transformer layer and ±(w + k) a
Conformer layer (its depthwise convolution adds ±``window_k``), and on no frame beyond."""

from __future__ import annotations

import pytest
import torch

from selfattn.datatypes import Batch
from selfattn.models.registry import model_options

from ..helpers_models import build

LENGTH, FEATURES, WINDOW, K, LAYERS, FRAME = 48, 6, 3, 2, 2, 24


@pytest.mark.parametrize(("architecture", "reach"), [("transformer", 3 * 2), ("conformer", 5 * 2)])
def test_a_frame_depends_only_on_frames_within_the_window_reach(
    architecture: str, reach: int
) -> None:
    torch.manual_seed(0)
    config = model_options(
        architecture=architecture,  # type: ignore[arg-type]
        embed_dim=16,
        num_heads=2,
        num_layers=LAYERS,
        ffn_dim=32,
        dropout=0.0,
        attention="window",
        attention_size=WINDOW,
        **({"window_k": K} if architecture == "conformer" else {}),  # type: ignore[arg-type]
    )
    assert reach == LAYERS * (WINDOW + (K if architecture == "conformer" else 0))
    model = build(config, "token", num_labels=5, feature_dim=FEATURES, max_len=64).eval()
    features = torch.randn(1, LENGTH, FEATURES, requires_grad=True)
    mask = torch.zeros(1, LENGTH, dtype=torch.bool)
    logits = model(Batch(None, None, features, mask, torch.zeros(1, LENGTH, dtype=torch.long)))
    assert logits.shape == (1, LENGTH, 5)
    logits[0, FRAME].sum().backward()
    assert features.grad is not None
    seen = features.grad[0].abs().sum(-1) > 0  # (L,) frames the label scores depend on
    distance = (torch.arange(LENGTH) - FRAME).abs()
    assert not seen[distance > reach].any()
    assert seen[distance <= reach].all()
