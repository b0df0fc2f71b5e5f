"""A bidirectional RNN over the real positions of a padded batch: the encoder of the
``bigru`` sequence encoder (:class:`~selfattn.models.architectures.bigru.BiGRUEncoder`)
and of the RNN encoder–decoder (:class:`~selfattn.models.rnn_seq2seq.RNNSeq2Seq`)."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def bidirectional_rnn(
    cell: type[nn.GRU] | type[nn.LSTM],
    input_dim: int,
    hidden_dim: int,
    num_layers: int,
    dropout: float,
) -> nn.GRU | nn.LSTM:
    """A batch-first bidirectional ``cell`` whose [forward; backward] state has
    ``hidden_dim`` (H / 2 per direction: H is even), with ``dropout`` between stacked
    layers (none for one layer, where PyTorch would only warn that it drops nothing)."""
    return cell(
        input_dim,
        hidden_dim // 2,
        num_layers,
        batch_first=True,
        bidirectional=True,
        dropout=dropout if num_layers > 1 else 0.0,
    )


def run_packed(rnn: nn.GRU | nn.LSTM, x: Tensor, lengths: Tensor) -> Tensor:
    """``rnn`` over the first ``lengths[b]`` (≥ 1) vectors of each row of ``x`` ``(B, L, ·)``
    only (packed sequences), so padding never reaches a state → ``(B, L, H)``, zeros past
    each row's length."""
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, _ = rnn(packed)
    return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]
