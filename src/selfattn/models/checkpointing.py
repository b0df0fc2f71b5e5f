"""Activation checkpointing per block (Chen et al. 2016, "Training Deep Nets with Sublinear
Memory Cost"): a stack keeps only each block's input for the backward pass and recomputes
the block's activations there, trading one more forward pass for memory.

Every stack of blocks (:class:`~selfattn.models.encoder.BlockStack`,
:class:`~selfattn.models.decoder.Decoder`, :class:`~selfattn.models.graph.GraphTransformer`)
has a ``checkpoint_activations`` attribute, off by default; :func:`enable_activation_checkpointing`
switches on every one in a model (``train.checkpoint_activations``). Blocks are
checkpointed only while training with gradients on, so evaluation and incremental
decoding (the decoder's KV cache) run as before. The RNG state is saved and restored
around the recomputation (``preserve_rng_state``), so dropout draws the same masks and the
gradients equal those without checkpointing; batch norms' running statistics (a
Conformer's convolution module) are put back after it, so they too are updated once per
step, as without checkpointing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.utils.checkpoint import checkpoint


def run_block(stack: nn.Module | None, block: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``block(*args, **kwargs)``, recomputed in the backward pass when ``stack`` has
    ``checkpoint_activations`` on, is training and gradients are enabled (``None``: never)."""
    if (
        stack is not None
        and getattr(stack, "checkpoint_activations", False)
        and stack.training
        and torch.is_grad_enabled()
    ):
        return checkpoint(_once_stateful(block), *args, use_reentrant=False, **kwargs)
    return block(*args, **kwargs)


def _once_stateful(block: Callable[..., Any]) -> Callable[..., Any]:
    """``block``, whose batch norms keep the running statistics of the first call: the
    recomputation in the backward pass must not count the batch a second time."""
    norms = [
        module
        for module in (block.modules() if isinstance(block, nn.Module) else [])
        if isinstance(module, _BatchNorm) and module.track_running_stats
    ]
    if not norms:
        return block
    calls = 0

    def run(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            return block(*args, **kwargs)
        buffers = [buffer for norm in norms for buffer in norm.buffers(recurse=False)]
        kept = [buffer.clone() for buffer in buffers]
        try:
            return block(*args, **kwargs)
        finally:  # also when the recomputation stops early, having what it needs
            with torch.no_grad():
                for buffer, value in zip(buffers, kept, strict=True):
                    buffer.copy_(value)

    return run


def enable_activation_checkpointing(model: nn.Module, enabled: bool = True) -> int:
    """Switch per-block activation checkpointing on (or off) in every stack of ``model``.

    Returns:
        The number of stacks switched; 0 means ``model`` has no stack of blocks.
    """
    stacks = [module for module in model.modules() if hasattr(module, "checkpoint_activations")]
    for stack in stacks:
        setattr(stack, "checkpoint_activations", enabled)  # noqa: B010 (nn.Module's typing)
    return len(stacks)


def saved_bytes(model: nn.Module, forward: Callable[[], Any]) -> int:
    """Bytes ``forward()`` keeps for the backward pass of ``model``: every tensor autograd
    saves, and the inputs each block of a stack keeps to be recomputed from (each storage
    counted once). With checkpointing, autograd's hooks do not see what a checkpointed
    block saves internally: it is dropped and recomputed."""
    storages: dict[int, torch.UntypedStorage] = {}

    def keep(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage  # held, so no address is reused meanwhile
        return tensor

    def block_inputs(_: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for value in (*args, *kwargs.values()):
            if isinstance(value, Tensor):
                keep(value)

    hooks = [
        block.register_forward_pre_hook(block_inputs, with_kwargs=True)
        for stack in model.modules()
        if hasattr(stack, "checkpoint_activations")
        for child in stack.children()
        if isinstance(child, nn.ModuleList)
        for block in child
    ]
    try:
        with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
            forward()
    finally:
        for hook in hooks:
            hook.remove()
    return sum(storage.nbytes() for storage in storages.values())
