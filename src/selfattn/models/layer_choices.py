"""``model.dropout_masks`` and ``model.linear_layers`` on a built model: the two fields
that swap layers in place once a builder is done, applied by every builder through one
call so that no architecture leaves them unread."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from torch import nn

from selfattn.models.dropout_masks import use_dropout_masks
from selfattn.models.linear_layers import use_linear_layers

if TYPE_CHECKING:
    from selfattn.models.option_groups import EncoderOptions

ModelT = TypeVar("ModelT", bound=nn.Module)


def use_layer_choices(model: ModelT, config: EncoderOptions) -> ModelT:
    """``model`` (in place) with its dropout layers drawing ``config.dropout_masks`` and
    its linear layers training by ``config.linear_layers``.

    Returns:
        ``model``.
    """
    use_dropout_masks(model, config.dropout_masks)
    use_linear_layers(model, config.linear_layers)
    return model
