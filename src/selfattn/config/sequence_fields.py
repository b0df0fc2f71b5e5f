"""Checks of the ``[train]`` fields of sequence-level training (lecture 003, "optimising
the evaluation metric"): minimum risk training (Shen et al. 2016) and REINFORCE (Williams
1992; Ranzato et al. 2016). Each refusal is one line naming the field and its choices; a
field that the chosen ``train.objective`` would not read is refused rather than ignored.
"""

from __future__ import annotations

from typing import Any

from selfattn.messages import check_range

#: The fields only ``mrt`` / ``reinforce`` read, with their defaults.
SEQUENCE_DEFAULTS: dict[str, Any] = {
    "sequence_samples": 4,
    "sequence_candidates": "sample",
    "sequence_cost": "auto",
    "mrt_alpha": 5e-3,
    "mrt_reference": False,
    "mle_weight": 0.0,
}
#: Of those, the ones only ``mrt`` reads.
MRT_ONLY = ("mrt_alpha", "mrt_reference")


def check_sequence_fields(train: Any) -> None:
    """Refuse bad or unread sequence-level settings of a ``TrainConfig`` in one line.

    Raises:
        ValueError: k < 2, α ≤ 0, a negative ``mle_weight``, beam candidates or the
            reference for REINFORCE (it must sample from the model), or a field set that
            the objective does not read.
    """
    objective = train.objective
    if objective == "mle":
        changed = [
            f"train.{name}"
            for name, default in SEQUENCE_DEFAULTS.items()
            if getattr(train, name) != default
        ]
        if changed:
            raise ValueError(
                f"{', '.join(changed)}: read only by sequence-level training; set "
                'train.objective = "mrt" or "reinforce" (it is "mle")'
            )
        return
    if train.sequence_samples < 2:
        raise ValueError(
            f"train.sequence_samples must be >= 2 (a risk or a baseline compares candidates), "
            f"got {train.sequence_samples}"
        )
    check_range("train.mrt_alpha", train.mrt_alpha, above=0)  # Shen et al. use 5e-3
    check_range("train.mle_weight", train.mle_weight, at_least=0)
    if objective == "reinforce":
        if train.sequence_candidates != "sample":
            raise ValueError(
                f'train.sequence_candidates = "{train.sequence_candidates}": REINFORCE '
                'needs samples from the model; choose "sample" (or train.objective = "mrt")'
            )
        changed = [
            f"train.{name}" for name in MRT_ONLY if getattr(train, name) != SEQUENCE_DEFAULTS[name]
        ]
        if changed:
            raise ValueError(
                f'{", ".join(changed)}: read only by train.objective = "mrt" (it is "reinforce")'
            )
