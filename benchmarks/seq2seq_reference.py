"""Our encoder–decoder against ``torch.nn.Transformer``, trained by the same loop.

Two models of the same size are trained on the same data with the same loop
(:class:`selfattn.train.loop.Trainer`: AdamW, warm-up and decay, clipping, the same
batches in the same order, the same seed): ours, and one whose encoder and decoder stacks
are ``torch.nn.TransformerEncoder`` / ``torch.nn.TransformerDecoder`` (pre-LN, with a final
norm, as ours) behind the same embeddings, sinusoidal positions and tied output layer.
Both are then decoded greedily on the test split, without a KV cache (torch's decoder
has none) — and ours also with its cache. The table gives BLEU / chrF (sacrebleu), the
median training step time and decoding speed, with the ratios ours ÷ torch.

Usage::

    python benchmarks/seq2seq_reference.py                          # translate-de-en, config epochs
    python benchmarks/seq2seq_reference.py --set train.epochs=2     # a shorter budget
    python benchmarks/seq2seq_reference.py --config configs/convex_hull.toml
    # both at once on two cores, runs kept (``selfattn eval runs/ref/selfattn --beam 5``):
    python benchmarks/seq2seq_reference.py --out runs/ref --only selfattn --threads 1 &
    python benchmarks/seq2seq_reference.py --out runs/ref --only torch.nn --threads 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from selfattn.attention.cache import DecoderCache
from selfattn.config import Config, load_config
from selfattn.models.decoder import DecoderOutput
from selfattn.models.encoder import EncoderOutput
from selfattn.models.encoders import stack_config
from selfattn.models.seq2seq import Seq2SeqTransformer
from selfattn.positional import build_positional
from selfattn.positional.base import AbsolutePositional
from selfattn.tasks import Predictor, Seq2SeqTask, prepare
from selfattn.tasks.run import epoch_batches
from selfattn.train.loop import train


def _absolute(config: Config, max_len: int, wanted: bool) -> nn.Module | None:
    """The run's absolute positional encoding (torch's stacks have no relative ones)."""
    model = config.model
    if not wanted or model.positional is None:
        return None
    encoding = build_positional(
        model.positional, embed_dim=model.embed_dim, num_heads=model.num_heads, max_len=max_len
    )
    if not isinstance(encoding, AbsolutePositional):
        raise ValueError(
            f"the torch reference adds positions to its input; model.positional = "
            f"{model.positional!r} acts inside attention, which torch's layers cannot do"
        )
    return encoding


def _layer_options(config: Config) -> dict[str, Any]:
    model = config.model
    return {
        "d_model": model.embed_dim,
        "nhead": model.num_heads,
        "dim_feedforward": model.ffn_dim,
        "dropout": model.dropout,
        "batch_first": True,
        "norm_first": model.norm_first,
    }


def _placed(layer: nn.Module, config: Config) -> nn.Module:
    """``layer`` with ours' dropout placement: torch's one ``dropout`` also drops the
    feed-forward hidden layer and the attention weights, where ours reads
    ``model.ffn_dropout`` and ``model.attention_dropout`` (each ``None``: ``dropout``)."""
    rates = stack_config(config.model)
    layer.dropout.p = rates.hidden_dropout  # type: ignore[union-attr]
    for name in ("self_attn", "multihead_attn"):  # the decoder's has both
        attention = getattr(layer, name, None)
        if attention is not None:
            attention.dropout = rates.weight_dropout
    return layer


def _final_norm(config: Config) -> nn.Module | None:
    return nn.LayerNorm(config.model.embed_dim) if config.model.norm_first else None


class TorchEncoder(nn.Module):
    """``nn.TransformerEncoder`` behind our :class:`~selfattn.models.Encoder`'s interface."""

    def __init__(self, ours: nn.Module, config: Config, max_len: int) -> None:
        super().__init__()
        self.absolute = _absolute(config, max_len, getattr(ours, "absolute", None) is not None)
        self.dropout = nn.Dropout(config.model.dropout)
        layer = _placed(nn.TransformerEncoderLayer(**_layer_options(config)), config)
        self.stack = nn.TransformerEncoder(
            layer, config.model.num_layers, norm=_final_norm(config), enable_nested_tensor=False
        )
        self.norm = None  # the final norm lives inside the torch stack

    def forward(self, x: Tensor, *, key_padding_mask: Tensor | None = None, **_: Any) -> Any:
        if self.absolute is not None:
            x = self.absolute(x)
        x = self.dropout(x)
        out = self.stack(x, src_key_padding_mask=key_padding_mask)
        return EncoderOutput(out, [x, out], None)


class TorchDecoder(nn.Module):
    """``nn.TransformerDecoder`` behind our :class:`~selfattn.models.Decoder`'s interface."""

    def __init__(self, config: Config, num_layers: int, max_len: int) -> None:
        super().__init__()
        self.absolute = _absolute(config, max_len, True)
        self.dropout = nn.Dropout(config.model.dropout)
        layer = _placed(nn.TransformerDecoderLayer(**_layer_options(config)), config)
        self.stack = nn.TransformerDecoder(layer, num_layers, norm=_final_norm(config))

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        causal: bool = True,
        need_weights: bool = False,
        cache: DecoderCache | None = None,
        **_: Any,
    ) -> DecoderOutput:
        if cache is not None:
            raise ValueError("torch.nn.TransformerDecoder has no KV cache")
        if need_weights:
            raise ValueError("torch.nn.TransformerDecoder does not return attention weights")
        if self.absolute is not None:
            x = self.absolute(x)
        x = self.dropout(x)
        length = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=x.device)
        out = self.stack(
            x,
            memory,
            tgt_mask=mask if causal else None,
            tgt_is_causal=causal,
            tgt_key_padding_mask=self_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
        )
        return DecoderOutput(out, [x, out])


class TorchStacks(Seq2SeqTask):
    """Builds our model, then swaps its stacks for torch's."""

    def build(self) -> nn.Module:
        model = super().build()
        assert isinstance(model, Seq2SeqTransformer)
        settings = self.config.seq2seq
        layers = settings.decoder_layers or self.config.model.num_layers
        model.encoder = TorchEncoder(model.encoder, self.config, model.max_len + 2)  # type: ignore[assignment]
        model.decoder = TorchDecoder(self.config, layers, model.max_len + 2)  # type: ignore[assignment]
        return model


def train_one(config: Config, prepared: Any, reference: bool) -> tuple[Path, dict[str, float]]:
    """Train with the library's loop; returns the run folder and the training's facts:
    median step time, epochs run, best epoch, whether ``train.max_minutes`` ended it."""
    dev = prepared.batches_of(prepared.splits.dev)
    objective = TorchStacks(config, prepared.spec) if reference else prepared.task
    result = train(
        config,
        prepared.spec,
        epoch_batches(config, prepared),
        lambda: dev,
        objective=objective,
        vocabs=prepared.vocabs(),
        overwrite=True,
    )
    history = result.history
    if not history:
        raise SystemExit(
            f"{result.run_dir}: no epoch ended within train.max_minutes; nothing to score"
        )
    steps = [
        line["seconds"] / max(1, line["step"] - previous["step"])
        for previous, line in zip([{"step": 0}, *history], history, strict=False)
    ]
    facts = {
        "step_s": statistics.median(steps),
        "epochs": len(history),
        "best_epoch": result.best["epoch"] if result.best else 0,
        "train_s": sum(line["seconds"] for line in history),
        "out_of_time": float(result.out_of_time),
    }
    return result.run_dir, facts


NAMES = ("selfattn", "torch.nn")
METRICS_FILE = "reference_metrics.json"


def measure(
    name: str, config: Config, cached_only: bool = False, batch_size: int | None = None
) -> dict[str, float]:
    """Train one of the two models, decode the test split; its metrics (also saved).

    Ours decodes twice, recomputing the prefix (as the twin must) and with its KV cache;
    ``cached_only``: with the cache alone (the same tokens, tested elsewhere), for a run
    that wants the scores and not the speed comparison. ``batch_size``: sources decoded
    at once (``selfattn eval --batch-size``; default the task's)."""
    reference = name == "torch.nn"
    prepared = prepare(config)
    run_dir, facts = train_one(config, prepared, reference)
    predictor = Predictor(run_dir, task=TorchStacks if reference else None)
    started = time.perf_counter()
    use_cache = cached_only and not reference
    sized = {} if batch_size is None else {"batch_size": batch_size}
    metrics = predictor.evaluate("test", method="greedy", use_cache=use_cache, **sized)
    metrics["decode_s"] = time.perf_counter() - started
    if not reference:
        cached = metrics if use_cache else predictor.evaluate("test", method="greedy", **sized)
        metrics["cached_sentences_per_s"] = cached["sentences_per_s"]
    metrics.update(facts, cached_only=float(use_cache))
    (run_dir / METRICS_FILE).write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return metrics


def report(ours: dict[str, float], ref: dict[str, float]) -> None:
    keys = [k for k in ("bleu", "chrf", "exact_match", "hull_coverage") if k in ours]
    print(f"{'':<22}{'selfattn':>12}{'torch.nn':>12}{'ours/torch':>12}")
    speed = [] if ours.get("cached_only") else ["sentences_per_s"]  # else cache vs none
    for key in [*keys, "step_s", *speed]:
        ratio = ours[key] / ref[key] if ref[key] else float("nan")
        print(f"{key:<22}{ours[key]:>12.4f}{ref[key]:>12.4f}{ratio:>12.3f}")
    print(f"{'cached sentences/s':<22}{ours['cached_sentences_per_s']:>12.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/translate_de_en.toml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, help="keep the two run folders here (default: a temporary folder)"
    )
    parser.add_argument(
        "--only",
        choices=NAMES,
        help="train just one of the two (e.g. both at once in two processes, --threads 1, "
        "same --out); the table is printed once both have run",
    )
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="ours decodes with its KV cache alone (its sentences/s is then not comparable)",
    )
    parser.add_argument(
        "--decode-batch",
        type=int,
        metavar="N",
        help="sources decoded at once (selfattn eval --batch-size; default 64)",
    )
    args = parser.parse_args()
    if args.decode_batch is not None and args.decode_batch < 1:
        parser.error(f"--decode-batch must be at least 1, got {args.decode_batch}")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.out or Path(scratch)
        for name in [args.only] if args.only else NAMES:
            config = load_config(args.config, [*args.overrides, f"run_dir={folder / name}"])
            measure(name, config, args.cached_only, args.decode_batch)
        found = [folder / name / METRICS_FILE for name in NAMES]
        if all(path.exists() for path in found):
            ours, ref = (json.loads(path.read_text(encoding="utf-8")) for path in found)
            report(ours, ref)
        else:
            print(f"metrics saved under {folder}; the table needs both runs there")


if __name__ == "__main__":
    main()
