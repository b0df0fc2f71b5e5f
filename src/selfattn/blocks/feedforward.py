"""Position-wise feed-forward network (Vaswani et al. 2017, §3.3; SwiGLU: Shazeer 2020).

The same two-layer network is applied to every position on its own:
``FFN(x) = W_2 f(W_1 x + b_1) + b_2``. A *gated* activation (GLU variants, Shazeer 2020,
"GLU Variants Improve Transformer") multiplies the activated hidden layer by a second,
linear one: ``SwiGLU(x) = W_2 (Swish(W_1 x) ⊙ V x)``, which costs a third weight matrix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.attention.packed_linear import PackedLinears, plain

ActivationName = Literal["relu", "gelu", "swiglu"]


@dataclass(frozen=True)
class Activation:
    """A hidden-layer non-linearity.

    Attributes:
        function: applied element-wise to the hidden layer.
        gated: multiply ``function(W_1 x)`` by a linear gate ``V x`` (GLU variants).
    """

    function: Callable[[Tensor], Tensor]
    gated: bool = False


#: The activations :class:`FeedForward` accepts, by name.
ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(F.relu),
    "gelu": Activation(F.gelu),
    "swiglu": Activation(F.silu, gated=True),  # Swish with β = 1 is SiLU
}


def check_activation(name: str) -> Activation:
    """The registered activation called ``name``; a one-line error lists the choices."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def activation_from_torch(activation: object) -> ActivationName:
    """The name of the activation a ``torch.nn.Transformer*Layer`` stores.

    Torch keeps either a function (``F.relu``, ``F.gelu``) or a module (``nn.ReLU``,
    ``nn.GELU``). Anything else — including the tanh approximation of GELU — has no exact
    counterpart here and is refused rather than silently changed.
    """
    if activation in (F.relu, torch.relu) or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (
        isinstance(activation, nn.GELU) and activation.approximate == "none"
    ):
        return "gelu"
    raise ValueError(
        f"from_torch: activation {activation!r} is not supported; only relu and exact gelu "
        "(F.relu, F.gelu, nn.ReLU, nn.GELU()) can be copied"
    )


class FeedForward(nn.Module):
    """Position-wise feed-forward network ``(B, L, E) → (B, L, E)``.

    Args:
        embed_dim: E, input and output size.
        ffn_dim: size of the hidden layer (the paper's d_ff).
        activation: ``"relu"`` (the paper), ``"gelu"`` or ``"swiglu"`` (gated).
        dropout: dropout on the hidden layer during training.
        bias: biases in the linear layers.
    """

    def __init__(
        self,
        embed_dim: int,
        ffn_dim: int,
        activation: ActivationName = "relu",
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if embed_dim < 1 or ffn_dim < 1:
            raise ValueError(
                f"embed_dim and ffn_dim must be positive, got {embed_dim} and {ffn_dim}"
            )
        self.activation_name = activation
        self.activation = check_activation(activation)
        self.in_proj = nn.Linear(embed_dim, ffn_dim, bias=bias)
        self.gate_proj = nn.Linear(embed_dim, ffn_dim, bias=bias) if self.activation.gated else None
        self.out_proj = nn.Linear(ffn_dim, embed_dim, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, linears: PackedLinears | None = None) -> Tensor:
        """Args:
            x: ``(B, L, E)``.
            linears: a decode's packed weights (incremental decoding's few rows), or None.

        Returns:
            ``(B, L, E)``.
        """
        project = linears if linears is not None else plain
        hidden = self.activation.function(project(self.in_proj, x))  # (B, L, ffn_dim)
        if self.gate_proj is not None:
            hidden = hidden * project(self.gate_proj, x)
        return project(self.out_proj, self.dropout(hidden))

    def extra_repr(self) -> str:
        return f"activation={self.activation_name!r}"

    @classmethod
    def from_torch(
        cls, layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
    ) -> FeedForward:
        """The feed-forward part (``linear1``, ``activation``, ``linear2``) of a torch layer."""
        has_bias = layer.linear1.bias is not None
        new = cls(
            layer.linear1.in_features,
            layer.linear1.out_features,
            activation=activation_from_torch(layer.activation),
            dropout=layer.dropout.p,
            bias=has_bias,
        )
        # Move before loading: loading first would round float64 weights to float32.
        new = new.to(layer.linear1.weight.device, layer.linear1.weight.dtype)
        new.in_proj.load_state_dict(layer.linear1.state_dict())
        new.out_proj.load_state_dict(layer.linear2.state_dict())
        return new
