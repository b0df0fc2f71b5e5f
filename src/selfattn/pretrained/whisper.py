"""Whisper (Radford et al. 2022, "Robust Speech Recognition via Large-Scale Weak
Supervision") from selfattn's own blocks, loaded from a Hugging Face Whisper folder.

The encoder reads a log-mel spectrogram ``(B, 80, 2S)``
(:func:`~selfattn.speech.whisper_mel.whisper_log_mel`): two convolutions of width 3 with
GELU (the second of stride 2, halving the frames to S ≤ 1500), the stored sinusoidal
positions added, then a pre-LN :class:`~selfattn.models.Encoder` (GELU feed-forward) and
its final LayerNorm. The decoder embeds tokens, adds learned positions, runs a pre-LN
:class:`~selfattn.models.Decoder` with cross-attention to the encoder's states, and
projects onto the vocabulary with the token embedding itself (tied). Whisper's k
projections have no bias: selfattn's attention has one, held at zero.

Every tensor of ``model.safetensors`` is checked against the shape the folder's
``config.json`` implies before any weight is read: a missing, unexpected or mis-shaped
tensor is one line naming it. No ``transformers`` at run time.

>>> model = load_whisper("whisper-base")
>>> memory = model.encoder(features)                  # (1, 1500, 512)
>>> logits = model.decoder(tokens, memory)            # (1, T, 51865)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors import safe_open
from torch import Tensor, nn

from selfattn.attention.cache import DecoderCache
from selfattn.kernels.window import WindowKernel
from selfattn.models.config import StackConfig
from selfattn.models.decoder import Decoder
from selfattn.models.encoder import Encoder
from selfattn.pretrained.errors import PretrainedError
from selfattn.pretrained.weights import PRETRAINED, convert_whisper_base, pretrained_folder

__all__ = [
    "WhisperConfig",
    "WhisperDecoder",
    "WhisperEncoder",
    "WhisperModel",
    "hf_name",
    "is_whisper_checkpoint",
    "load_whisper",
]


@dataclass(frozen=True)
class WhisperConfig:
    """The sizes and token ids of a Whisper checkpoint (its ``config.json``).

    Attributes:
        num_mel_bins: mel bands the encoder reads (80).
        d_model: E.
        encoder_layers, encoder_heads, encoder_ffn_dim: the encoder stack.
        decoder_layers, decoder_heads, decoder_ffn_dim: the decoder stack.
        max_source_positions: encoder positions (1500: 30 s of 10 ms frames, halved).
        max_target_positions: decoder positions (448), the task prefix included.
        vocab_size: V.
        eot_id: ``<|endoftext|>``, which ends a transcript.
        start_id: ``<|startoftranscript|>``, the decoder's first input.
        suppress_tokens: ids never emitted.
        begin_suppress_tokens: ids not emitted as the first token (a blank, EOT).
    """

    num_mel_bins: int
    d_model: int
    encoder_layers: int
    encoder_heads: int
    encoder_ffn_dim: int
    decoder_layers: int
    decoder_heads: int
    decoder_ffn_dim: int
    max_source_positions: int
    max_target_positions: int
    vocab_size: int
    eot_id: int
    start_id: int
    suppress_tokens: tuple[int, ...] = ()
    begin_suppress_tokens: tuple[int, ...] = ()

    @classmethod
    def from_folder(cls, folder: Path) -> WhisperConfig:
        """Read ``folder/config.json``.

        Raises:
            PretrainedError: unreadable, ``model_type`` not ``whisper``, a size missing or
                not a positive integer, or E not divisible by a stack's heads (one line).
        """
        path = folder / "config.json"
        try:
            raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise PretrainedError(f"{path}: not a JSON file ({type(error).__name__})") from None
        if raw.get("model_type") != "whisper":
            raise PretrainedError(
                f"{path}: model_type is {raw.get('model_type')!r}, not 'whisper' "
                "(a Hugging Face Whisper folder is needed)"
            )
        keys = {
            "num_mel_bins": "num_mel_bins",
            "d_model": "d_model",
            "encoder_layers": "encoder_layers",
            "encoder_heads": "encoder_attention_heads",
            "encoder_ffn_dim": "encoder_ffn_dim",
            "decoder_layers": "decoder_layers",
            "decoder_heads": "decoder_attention_heads",
            "decoder_ffn_dim": "decoder_ffn_dim",
            "max_source_positions": "max_source_positions",
            "max_target_positions": "max_target_positions",
            "vocab_size": "vocab_size",
            "eot_id": "eos_token_id",
            "start_id": "decoder_start_token_id",
        }
        sizes: dict[str, int] = {}
        for field, key in keys.items():
            value = raw.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise PretrainedError(f"{path}: {key} is {value!r}, not a non-negative integer")
            sizes[field] = value
        for side in ("encoder", "decoder"):
            heads = sizes[f"{side}_heads"]
            if heads < 1 or sizes["d_model"] % heads:
                raise PretrainedError(
                    f"{path}: d_model {sizes['d_model']} is not divisible by "
                    f"{side}_attention_heads {heads}"
                )
        if raw.get("activation_function", "gelu") != "gelu" or raw.get("scale_embedding"):
            raise PretrainedError(f"{path}: only GELU and unscaled embeddings are read")
        return cls(
            **sizes,
            suppress_tokens=tuple(int(i) for i in raw.get("suppress_tokens") or ()),
            begin_suppress_tokens=tuple(int(i) for i in raw.get("begin_suppress_tokens") or ()),
        )

    def stack(self, side: str) -> StackConfig:
        """The pre-LN, GELU stack of the ``"encoder"`` or ``"decoder"``."""
        encoder = side == "encoder"
        return StackConfig(
            self.d_model,
            self.encoder_heads if encoder else self.decoder_heads,
            self.encoder_ffn_dim if encoder else self.decoder_ffn_dim,
            num_layers=self.encoder_layers if encoder else self.decoder_layers,
            max_len=self.max_source_positions if encoder else self.max_target_positions,
            activation="gelu",
            norm_first=True,
        )


class WhisperEncoder(nn.Module):
    """Log-mel frames → the encoder's states.

    Args:
        config: the checkpoint's sizes.

    Attributes:
        window: ``None`` (Whisper's full self-attention) or w: every layer's
            self-attention reads only positions |i − j| ≤ w (:meth:`use_window`).
    """

    def __init__(self, config: WhisperConfig) -> None:
        super().__init__()
        self.window: int | None = None
        self._full_kernels: list[nn.Module] | None = None
        dim = config.d_model
        self.conv1 = nn.Conv1d(config.num_mel_bins, dim, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, kernel_size=3, stride=2, padding=1)
        # Sinusoids, but read as stored: the checkpoint's are the reference.
        self.positions = nn.Parameter(torch.zeros(config.max_source_positions, dim))
        self.stack = Encoder(config.stack("encoder"))

    def forward(self, features: Tensor) -> Tensor:
        """Args:
            features: ``(B, n_mels, F)`` log-mel frames, F ≤ 2 · ``max_source_positions``.

        Returns:
            ``(B, ⌈F / 2⌉, E)``.
        """
        return self.stack(self.embed(features)).last_hidden_state

    def embed(self, features: Tensor) -> Tensor:
        """The convolutional front end and the positions: ``(B, n_mels, F)`` →
        ``(B, ⌈F / 2⌉, E)``, what the first layer reads. Position j reads the mel frames
        2j − 2 … 2j + 2."""
        x = F.gelu(self.conv1(features))
        x = F.gelu(self.conv2(x)).transpose(1, 2)  # (B, S, E)
        if x.shape[1] > self.positions.shape[0]:
            raise ValueError(
                f"{features.shape[-1]} frames give {x.shape[1]} encoder positions; the "
                f"model has {self.positions.shape[0]}"
            )
        return x + self.positions[: x.shape[1]]

    def use_window(self, window: int | None) -> None:
        """Truncated self-attention (lecture 000's speech case) in every encoder layer:
        position i reads only positions |i − j| ≤ ``window`` (20 ms each), computed by
        :class:`~selfattn.kernels.WindowKernel` in time that grows as S · window;
        ``None`` restores Whisper's full attention.

        Raises:
            ValueError: a negative window.
        """
        if window is not None and window < 0:
            raise ValueError(f"the encoder's window must be at least 0, got {window}")
        attentions = [layer.get_submodule("self_attn") for layer in self.stack.layers]
        if self._full_kernels is None:
            self._full_kernels = [attention.get_submodule("kernel") for attention in attentions]
        for attention, full in zip(attentions, self._full_kernels, strict=True):
            attention.kernel = full if window is None else WindowKernel(window)
        self.window = window


class WhisperDecoder(nn.Module):
    """Tokens and the encoder's states → next-token logits.

    Args:
        config: the checkpoint's sizes.
    """

    def __init__(self, config: WhisperConfig) -> None:
        super().__init__()
        weight = torch.empty(config.vocab_size, config.d_model)
        if not weight.is_meta:  # on the meta device, torch's normal_ takes seconds to trace
            nn.init.normal_(weight)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, _weight=weight)
        self.positions = nn.Parameter(torch.zeros(config.max_target_positions, config.d_model))
        self.stack = Decoder(config.stack("decoder"))

    def forward(
        self, tokens: Tensor, memory: Tensor, *, cache: DecoderCache | None = None
    ) -> Tensor:
        """Args:
            tokens: ``(B, T)`` ids; with a ``cache``, only those after its ``offset``.
            memory: ``(B, S, E)`` the encoder's states.
            cache: incremental decoding's keys and values (start with an empty one).

        Returns:
            ``(B, T, V)`` logits.
        """
        offset = 0 if cache is None else cache.offset
        end = offset + tokens.shape[1]
        if end > self.positions.shape[0]:
            raise ValueError(f"{end} decoder positions; the model has {self.positions.shape[0]}")
        x = self.embed_tokens(tokens) + self.positions[offset:end]
        hidden = self.stack(x, memory, cache=cache).last_hidden_state
        return F.linear(hidden, self.embed_tokens.weight)  # tied output projection

    def cross_attention(self, tokens: Tensor, memory: Tensor) -> list[Tensor]:
        """Every layer's cross-attention weights ``(B, H, T, S)`` over ``memory`` in one
        teacher-forced pass over ``tokens`` ``(B, T)``."""
        x = self.embed_tokens(tokens) + self.positions[: tokens.shape[1]]
        weights = self.stack(x, memory, need_weights=True).cross_attentions
        assert weights is not None  # asked for
        return weights


class WhisperModel(nn.Module):
    """Whisper's encoder and decoder.

    Args:
        config: the checkpoint's sizes and token ids.
    """

    def __init__(self, config: WhisperConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = WhisperEncoder(config)
        self.decoder = WhisperDecoder(config)

    def forward(self, features: Tensor, tokens: Tensor) -> Tensor:
        """``(B, n_mels, F)`` frames and ``(B, T)`` tokens → ``(B, T, V)`` logits."""
        return self.decoder(tokens, self.encoder(features))


#: selfattn's names inside a block → Hugging Face's, encoder and decoder.
_BLOCK_NAMES = {
    "encoder": {"norm1": "self_attn_layer_norm", "norm2": "final_layer_norm"},
    "decoder": {
        "norm1": "self_attn_layer_norm",
        "cross_attn": "encoder_attn",
        "norm2": "encoder_attn_layer_norm",
        "norm3": "final_layer_norm",
    },
}
_SHARED_NAMES = {"feedforward.in_proj": "fc1", "feedforward.out_proj": "fc2"}
_TOP_NAMES = {
    "encoder.conv1": "model.encoder.conv1",
    "encoder.conv2": "model.encoder.conv2",
    "encoder.positions": "model.encoder.embed_positions.weight",
    "encoder.stack.norm": "model.encoder.layer_norm",
    "decoder.embed_tokens": "model.decoder.embed_tokens",
    "decoder.positions": "model.decoder.embed_positions.weight",
    "decoder.stack.norm": "model.decoder.layer_norm",
}
_LAYER = re.compile(r"^(encoder|decoder)\.stack\.layers\.(\d+)\.(.+)$")


def hf_name(name: str) -> str | None:
    """The Hugging Face name of one of :class:`WhisperModel`'s parameters (``None``: a k
    projection's bias, which Whisper does not have)."""
    if re.search(r"attn\.k_proj\.bias$", name):
        return None
    layer = _LAYER.match(name)
    if layer is not None:
        side, index, rest = layer.groups()
        for ours, theirs in {**_BLOCK_NAMES[side], **_SHARED_NAMES}.items():
            if rest.startswith(ours + "."):
                rest = theirs + rest[len(ours) :]
                break
        return f"model.{side}.layers.{index}.{rest}"
    for ours, theirs in _TOP_NAMES.items():
        if name == ours or name.startswith(ours + "."):
            return theirs + name[len(ours) :]
    raise AssertionError(f"no Hugging Face name for {name}")


def _checked_names(model: WhisperModel, path: Path) -> dict[str, str]:
    """Our parameter → its tensor in the file, every shape checked first.

    Raises:
        PretrainedError: a tensor missing, of the wrong shape, or not Whisper's.
    """
    wanted = {
        theirs: (ours, tuple(param.shape))
        for ours, param in model.named_parameters()
        if (theirs := hf_name(ours)) is not None
    }
    try:
        with safe_open(str(path), framework="pt") as f:
            names = f.keys()  # a safe_open handle is not iterable
            shapes = {key: tuple(f.get_slice(key).get_shape()) for key in names}
    except Exception as error:  # safetensors raises its own errors for a bad header
        raise PretrainedError(f"{path}: not a safetensors file ({error})") from None
    for theirs, (_, shape) in wanted.items():
        if theirs not in shapes:
            raise PretrainedError(f"{path}: tensor {theirs} is missing (expected {list(shape)})")
        if shapes[theirs] != shape:
            raise PretrainedError(
                f"{path}: tensor {theirs} has shape {list(shapes[theirs])}, "
                f"config.json implies {list(shape)}"
            )
    extra = sorted(set(shapes) - set(wanted) - {"proj_out.weight"})
    if extra:
        raise PretrainedError(f"{path}: tensor {extra[0]} is not part of a Whisper model")
    if (
        "proj_out.weight" in shapes
        and shapes["proj_out.weight"] != wanted["model.decoder.embed_tokens.weight"][1]
    ):
        raise PretrainedError(f"{path}: tensor proj_out.weight is not the embedding's shape")
    return {ours: theirs for theirs, (ours, _) in wanted.items()}


def is_whisper_checkpoint(name_or_path: str | Path) -> bool:
    """Whether ``name_or_path`` names a Whisper checkpoint: a registered one converted to
    Whisper (``whisper-base``), or a folder whose ``config.json`` says ``model_type``
    ``whisper``. Reads one small file at most; fetches nothing."""
    name = str(name_or_path)
    if name in PRETRAINED:
        return PRETRAINED[name].convert is convert_whisper_base
    try:
        config = json.loads((Path(name).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model_type") == "whisper"


def load_whisper(folder_or_name: str | Path) -> WhisperModel:
    """A Whisper checkpoint in selfattn's modules, float32, in eval mode.

    Args:
        folder_or_name: ``"whisper-base"`` (fetched and converted on first use) or a
            Hugging Face Whisper folder (``config.json``, ``model.safetensors``).

    Raises:
        PretrainedError: not a Whisper folder, or a tensor missing or mis-shaped (one
            line naming the file and the tensor).
    """
    folder = pretrained_folder(folder_or_name)
    config = WhisperConfig.from_folder(folder)
    path = folder / "model.safetensors"
    with torch.device("meta"):  # shapes only: nothing allocated until every one is checked
        model = WhisperModel(config)
    names = _checked_names(model, path)
    model = model.to_empty(device="cpu")
    state = {}
    with safe_open(str(path), framework="pt") as f:
        for ours, theirs in names.items():
            state[ours] = f.get_tensor(theirs).float()
    for ours, param in model.named_parameters():
        if ours not in state:  # the k projections' biases
            state[ours] = torch.zeros_like(param)
    model.load_state_dict(state, strict=True)
    return model.eval()
