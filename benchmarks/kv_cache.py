"""Autoregressive decoding with the KV cache against recomputing the prefix, and the speed
of greedy, beam and non-autoregressive decoding.

The model is a random ``Seq2SeqTransformer`` of a realistic translation size (defaults:
E=256, H=4, 3+3 layers, FFN 1024, vocabulary 8000, fp32 on the CPU, eval mode); sources are random
token sequences. Every decoder emits exactly ``--tokens`` tokens (``min_len = max_len``,
so EOS is banned until then and forced after: one more decoder call), so both paths do
the same work whatever the random weights prefer.

1. ``greedy(use_cache=True)`` ÷ ``greedy(use_cache=False)``: time per sentence of each,
   the ratio cached ÷ recompute (< 1: the cache is faster) and the speed-up (its inverse).
   Both paths must agree: same tokens, log-probs within float error (printed). The
   recomputing path re-runs the decoder over the whole prefix every step, and — as
   ``Seq2SeqTransformer.decode`` does for every position it is given — projects every
   position onto the vocabulary, so its cost grows with t² and includes t·V projections.
2. Sentences/s of greedy, beam search (``--beam-size``) and NAT (one decoder pass at the
   same output length) at each batch size, and each ÷ greedy.
3. Ours ÷ Hugging Face: ``greedy`` / ``beam_search`` against
   ``MarianMTModel.generate`` (``num_beams`` 1 and ``--hf-beam-size``, ``do_sample=False``,
   KV cache on both sides) at ``--hf-batches``, new tokens/s of each and the ratio ours ÷
   HF (> 1: ours is faster). The pair is its own model, built to Marian's design: post-LN
   blocks without a final norm, relu, sinusoidal positions, one embedding table shared by
   source and target and tied to the output, embeddings scaled by √E
   (``scale_embedding=True``), ``--hf-layers`` + ``--hf-layers`` layers (default 4 + 4),
   sources of ``--hf-source-len`` tokens (16), no padding, ``attn_implementation="sdpa"``.
   Marian is built from a ``MarianConfig`` (random weights, no hub name) and then gets
   ours' weights, so the two are the same function: the teacher-forced next-token
   log-probabilities are compared and the largest difference printed (0 or float error).
   What had to be aligned: Marian's position table puts every sine before every cosine
   where ours interleaves them, so ours' table is copied into Marian's (a lookup either
   way); Marian starts the decoder at ``decoder_start_token_id`` = our BOS; ours never
   emits PAD or BOS, so HF gets ``suppress_tokens = [PAD, BOS]``; Marian's default
   ``forced_eos_token_id`` and ``bad_words_ids`` are cleared. Each timed call encodes the
   source and generates ``--tokens`` (n) new tokens per sentence: HF with
   ``min_new_tokens = max_new_tokens = n`` (EOS banned throughout), ours with
   ``min_len = max_len = n - 1`` plus the EOS forced at ``max_len``, so both make n
   decoder calls (counted at 8 tokens and printed: HF's with a forward hook on its
   decoder; ours as decoding steps, since its step runs the decoder's layers without
   calling the modules, ``selfattn.decoding.lean``, and a hook would turn that off) and
   the first n − 1
   tokens are compared (``same tokens in k/B``). Random weights of this kind (tied unit-
   size embeddings) tend to repeat one token, so equal tokens alone are weak evidence; the
   log-probability check is the strong one. HF's parameter count includes its two
   sinusoidal tables (``requires_grad=False``), ours computes them.

Method: median wall-clock over ``--repeats`` calls after an untimed short warm-up; cached
and recompute calls alternate in one process on the same encoded batch, so machine noise
hits both. Rows timed while other processes used the CPU are marked ``noisy``. On a
shared 2-core machine, 2 threads are the worst case: every small kernel waits for the
thread on the busy core (measured: batch-1 cached greedy 7.3 s per sentence with 2 threads,
0.9 s with ``--threads 1``; the full run takes ~18 min instead of ~3). Ratios survive the
noise better than absolute times. Table 3's numbers are printed once more as the last
line, one JSON object (``{"hf": {"b1-greedy": {"ours": …, "hf": …, "ratio": …}, …}}``),
which ``tests/docs/records.py record`` reads.

Usage::

    python benchmarks/kv_cache.py              # 128 tokens, batch 1 and 16 (HF: 1 and 8), 2 threads
    python benchmarks/kv_cache.py --sections hf --threads 1   # only ours ÷ HF
    python benchmarks/kv_cache.py --quick      # 32 tokens, 1 repeat: a smoke check (~15 s)
    python benchmarks/kv_cache.py --batches 1 4 --tokens 64 --threads 1
    python benchmarks/kv_cache.py --device cuda --dtype bfloat16   # the same tables on a GPU

On CUDA (``--device cuda``) both sides' weights are cast to ``--dtype`` (bf16 is how a
model is served there), every timed call is bracketed by ``torch.cuda.synchronize()``,
and the CPU-load note is left out (the host's other processes do not share the GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import torch
from torch import Tensor, nn

from selfattn.decoding import (
    DecodeResult,
    IncrementalDecoder,
    beam_search,
    greedy,
    non_autoregressive,
)
from selfattn.models import StackConfig
from selfattn.models.seq2seq import (
    BOS_ID,
    EOS_ID,
    NUM_SPECIALS,
    PAD_ID,
    EncodedSource,
    Seq2SeqTransformer,
    decoder_like,
)
from selfattn.runtime import machine_busy_seconds

FOREIGN_LOAD_NOTE = 0.3  # cores used by other processes above which a row is marked noisy
WARMUP_TOKENS = 8
SECTIONS = ("cache", "speed", "hf")
R = TypeVar("R")
M = TypeVar("M", bound=nn.Module)


def place(model: M, args: argparse.Namespace) -> M:
    """``model`` on ``--device`` in ``--dtype``."""
    return model.to(device=args.device, dtype=getattr(torch, args.dtype))


def synchronize(device: str) -> None:
    """Wait for the GPU's queued work, so wall-clock time covers it (no-op on the CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def seq2seq(
    args: argparse.Namespace, num_layers: int, source_len: int, *, norm_first: bool, **options: bool
) -> Seq2SeqTransformer:
    """A random encoder–decoder (seed 0) of ``--embed-dim``, ``--num-heads``, ``--ffn-dim``
    and ``--vocab`` with sinusoidal positions, ``num_layers`` + ``num_layers`` layers, for
    sources of ``source_len`` tokens, in eval mode; ``options``: the
    :class:`Seq2SeqTransformer` options (``length_predictor`` …)."""
    torch.manual_seed(0)
    stack = StackConfig(
        args.embed_dim,
        args.num_heads,
        args.ffn_dim,
        num_layers=num_layers,
        positional="sinusoidal",
        max_len=max(args.tokens, source_len),
        norm_first=norm_first,
    )
    vocab = {"target_vocab_size": args.vocab, "source_vocab_size": args.vocab}
    return Seq2SeqTransformer(stack, decoder_like(stack), **vocab, **options).eval()


def build_model(args: argparse.Namespace) -> Seq2SeqTransformer:
    """A random pre-LN encoder–decoder of the benchmark's size, in eval mode."""
    model = seq2seq(args, args.num_layers, args.source_len, norm_first=True, length_predictor=True)
    return place(model, args)


def encode(model: Seq2SeqTransformer, batch: int, length: int, vocab: int) -> EncodedSource:
    """A batch of random sources of ``length`` tokens, encoded."""
    generator = torch.Generator().manual_seed(batch)
    source = torch.randint(NUM_SPECIALS, vocab, (batch, length), generator=generator)
    device = next(model.parameters()).device
    with torch.no_grad():
        padding = torch.zeros(batch, length, dtype=torch.bool)
        return model.encode(source.to(device), padding.to(device))


def timed(
    calls: Mapping[str, Callable[[int], R]], tokens: int, repeats: int, device: str = "cpu"
) -> tuple[dict[str, float], dict[str, R], float]:
    """Median seconds per call of each entry at ``tokens`` tokens (alternating order), the
    last results, and the cores other processes used meanwhile.

    The untimed warm-up call generates only a few tokens: it exists to initialise kernels,
    threads and the allocator, and a full-length recomputing call would cost minutes.
    """
    for call in calls.values():
        call(min(tokens, WARMUP_TOKENS))
    results: dict[str, R] = {}
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    busy_before, cpu_before, wall_before = machine_busy_seconds(), _own_cpu(), time.time()
    for i in range(repeats):
        for name in list(calls)[:: -1 if i % 2 else 1]:
            synchronize(device)
            start = time.perf_counter()
            results[name] = calls[name](tokens)
            synchronize(device)
            seconds[name].append(time.perf_counter() - start)
    wall = time.time() - wall_before
    foreign = (machine_busy_seconds() - busy_before - (_own_cpu() - cpu_before)) / max(wall, 1e-9)
    if device != "cpu":
        foreign = 0.0  # the host's other processes do not share the GPU
    return {name: statistics.median(v) for name, v in seconds.items()}, results, foreign


def cache_row(model: Seq2SeqTransformer, args: argparse.Namespace, batch: int) -> str:
    """Table 1: cached ÷ recomputing greedy decoding at one batch size."""
    encoded = encode(model, batch, args.source_len, args.vocab)

    def run(use_cache: bool) -> Callable[[int], DecodeResult]:
        return lambda n: greedy(model, encoded, max_len=n, min_len=n, use_cache=use_cache)

    calls = {"cached": run(True), "recompute": run(False)}
    seconds, results, foreign = timed(calls, args.tokens, args.repeats, args.device)
    cached, full = results["cached"], results["recompute"]
    same = cached.tokens == full.tokens
    gap = float((cached.step_log_probs - full.step_log_probs).abs().max())
    notes = [f"tokens {'equal' if same else 'DIFFER'}, max |Δ log p| = {gap:.1e}"]
    if foreign > FOREIGN_LOAD_NOTE:
        notes.append(f"noisy: other processes used {foreign:.1f} cores")
    per_cached, per_full = seconds["cached"] / batch, seconds["recompute"] / batch
    ratio = per_cached / per_full
    return (
        f"{batch:>5} {per_cached * 1e3:>13.1f} {per_full * 1e3:>15.1f} {ratio:>17.3f} "
        f"{1 / ratio:>9.1f}x  " + "; ".join(notes)
    )


def speed_rows(model: Seq2SeqTransformer, args: argparse.Namespace, batch: int) -> list[str]:
    """Table 2: sentences/s of greedy, beam and NAT at one batch size."""
    encoded = encode(model, batch, args.source_len, args.vocab)
    calls: dict[str, Callable[[int], DecodeResult]] = {
        "greedy": lambda n: greedy(model, encoded, max_len=n, min_len=n),
        f"beam {args.beam_size}": lambda n: beam_search(
            model, encoded, beam_size=args.beam_size, max_len=n, min_len=n
        ),
        "nat": lambda n: non_autoregressive(model, encoded, lengths=[n] * batch),
    }
    seconds, results, foreign = timed(calls, args.tokens, args.repeats, args.device)
    note = (
        f"  noisy: other processes used {foreign:.1f} cores" if foreign > FOREIGN_LOAD_NOTE else ""
    )
    rows = []
    for name, value in seconds.items():
        length = statistics.mean(results[name].lengths)
        rows.append(
            f"{batch:>5} {name:<8} {batch / value:>13.2f} {seconds['greedy'] / value:>12.2f} "
            f"{length:>11.0f}{note}"
        )
    return rows


# --- 3. ours ÷ Hugging Face (MarianMTModel.generate) -----------------------------------


def build_pair(args: argparse.Namespace) -> tuple[Seq2SeqTransformer, nn.Module]:
    """Ours (post-LN, sinusoidal, shared and tied embeddings) and a ``MarianMTModel`` of the
    same design holding the same weights, both in eval mode."""
    from transformers import MarianConfig, MarianMTModel

    shared = {"share_embeddings": True, "tie_output": True}
    ours = seq2seq(args, args.hf_layers, args.hf_source_len, norm_first=False, **shared)
    positions = ours.decoder.config.max_len
    config = MarianConfig(
        vocab_size=args.vocab,
        decoder_vocab_size=args.vocab,
        d_model=args.embed_dim,
        encoder_layers=args.hf_layers,
        decoder_layers=args.hf_layers,
        encoder_attention_heads=args.num_heads,
        decoder_attention_heads=args.num_heads,
        encoder_ffn_dim=args.ffn_dim,
        decoder_ffn_dim=args.ffn_dim,
        activation_function="relu",
        max_position_embeddings=positions,
        scale_embedding=True,  # ours multiplies embeddings by √E too
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID,
        forced_eos_token_id=None,
        dropout=0.0,
        attn_implementation="sdpa",
    )
    theirs = MarianMTModel(config).eval()
    copy_weights(ours, theirs, positions)
    ours, theirs = place(ours, args), place(theirs, args)
    generation = theirs.generation_config
    generation.forced_eos_token_id = None
    generation.bad_words_ids = None
    generation.suppress_tokens = [PAD_ID, BOS_ID]  # ours never emits them either
    generation.max_length = None
    return ours, theirs


def _layer_names(attention: dict[str, str], norms: dict[str, str]) -> dict[str, str]:
    """Marian's name → ours of each module of a layer whose weights :func:`copy_weights`
    copies: the attention projections, the feed-forward layers and the norms."""
    projections = ("q_proj", "k_proj", "v_proj", "out_proj")
    return {
        **{f"{their}.{p}": f"{my}.{p}" for their, my in attention.items() for p in projections},
        "fc1": "feedforward.in_proj",
        "fc2": "feedforward.out_proj",
        **norms,
    }


ENCODER_LAYER = _layer_names(
    {"self_attn": "self_attn"}, {"self_attn_layer_norm": "norm1", "final_layer_norm": "norm2"}
)
DECODER_LAYER = _layer_names(
    {"self_attn": "self_attn", "encoder_attn": "cross_attn"},
    {
        "self_attn_layer_norm": "norm1",
        "encoder_attn_layer_norm": "norm2",
        "final_layer_norm": "norm3",
    },
)


@torch.no_grad()
def copy_weights(ours: Seq2SeqTransformer, theirs: nn.Module, positions: int) -> None:
    """Load ours' weights into the Marian model (same layout but for names and its
    position table, which gets ours' sinusoids: Marian puts every sine before every
    cosine, ours interleaves them)."""
    model = theirs.model  # type: ignore[union-attr]
    model.shared.weight.copy_(ours.target_embed.weight)
    table = ours.decoder.absolute(torch.zeros(1, positions, ours.embed_dim), 0)[0]
    for stack in (model.encoder, model.decoder):
        stack.embed_positions.weight.copy_(table)
    stacks = (
        (ours.encoder, model.encoder, ENCODER_LAYER),
        (ours.decoder, model.decoder, DECODER_LAYER),
    )
    for mine_stack, their_stack, names in stacks:
        for mine, layer in zip(mine_stack.layers, their_stack.layers, strict=True):
            for their_name, my_name in names.items():
                weights = mine.get_submodule(my_name).state_dict()
                layer.get_submodule(their_name).load_state_dict(weights)


def check_pair(ours: Seq2SeqTransformer, theirs: nn.Module, args: argparse.Namespace) -> float:
    """Largest difference of the two models' teacher-forced next-token log-probabilities
    on a random source and target (the weights were copied: it should be float error)."""
    generator = torch.Generator().manual_seed(0)
    source = torch.randint(NUM_SPECIALS, args.vocab, (2, args.hf_source_len), generator=generator)
    target = torch.randint(NUM_SPECIALS, args.vocab, (2, args.tokens), generator=generator)
    target[:, 0] = BOS_ID
    source, target = source.to(args.device), target.to(args.device)
    with torch.no_grad():
        padding = torch.zeros_like(source, dtype=torch.bool)
        mine = ours.decode(target, ours.encode(source, padding)).log_probs.float()
        logits = theirs(input_ids=source, decoder_input_ids=target).logits.float()
    return float((mine - logits.log_softmax(-1)).abs().max())


def hf_calls(
    ours: Seq2SeqTransformer, theirs: nn.Module, source: Tensor, beam: int
) -> dict[str, Callable[[int], list[list[int]]]]:
    """Ours and HF generating n new tokens from ``source`` (encoder included), each
    returning the first n - 1 tokens per sentence. Ours emits n - 1 tokens and the EOS
    forced at ``max_len``; HF emits n with EOS banned (``min_new_tokens``): n decoder calls
    each."""
    padding = torch.zeros_like(source, dtype=torch.bool)

    def mine(n: int) -> list[list[int]]:
        encoded = ours.encode(source, padding)
        if beam == 1:
            return greedy(ours, encoded, max_len=n - 1, min_len=n - 1).tokens
        return beam_search(ours, encoded, beam_size=beam, max_len=n - 1, min_len=n - 1).tokens

    def hf(n: int) -> list[list[int]]:
        out = theirs.generate(  # type: ignore[operator]
            input_ids=source,
            attention_mask=(~padding).long(),
            num_beams=beam,
            do_sample=False,
            min_new_tokens=n,
            max_new_tokens=n,
        )
        return out[:, 1:n].tolist()  # without the decoder start (our BOS)

    return {"ours": torch.no_grad()(mine), "hf": torch.no_grad()(hf)}


def count_decoder_calls(
    ours: Seq2SeqTransformer, theirs: nn.Module, calls: dict[str, Callable[[int], object]]
) -> dict[str, int]:
    """Decoder calls of one ``WARMUP_TOKENS``-token call of each side: HF's decoder
    forwards, and ours' decoding steps (a forward hook would make ours call the modules,
    so it is not the path timed)."""
    counts = {"ours": 0, "hf": 0}

    def hook(*_: object) -> None:
        counts["hf"] += 1

    handle = theirs.model.decoder.register_forward_hook(hook)  # type: ignore[union-attr]
    calls["hf"](WARMUP_TOKENS)
    handle.remove()
    step = IncrementalDecoder.log_probs

    def counted(state: IncrementalDecoder) -> Tensor:
        counts["ours"] += 1
        return step(state)

    IncrementalDecoder.log_probs = counted  # type: ignore[method-assign]
    try:
        calls["ours"](WARMUP_TOKENS)
    finally:
        IncrementalDecoder.log_probs = step  # type: ignore[method-assign]
    return counts


def hf_rows(
    ours: Seq2SeqTransformer,
    theirs: nn.Module,
    args: argparse.Namespace,
    batch: int,
    values: dict[str, dict[str, float]] | None = None,
) -> list[str]:
    """Table 3: new tokens/s of ours and HF ``generate``, greedy and beam, at one batch;
    each row's numbers also go into ``values`` under ``b{batch}-{method}`` (as printed)."""
    generator = torch.Generator().manual_seed(batch)
    source = torch.randint(
        NUM_SPECIALS, args.vocab, (batch, args.hf_source_len), generator=generator
    ).to(args.device)
    rows = []
    for beam in (1, args.hf_beam_size):
        calls = hf_calls(ours, theirs, source, beam)
        counts = count_decoder_calls(ours, theirs, calls)
        seconds, results, foreign = timed(calls, args.tokens, args.repeats, args.device)
        equal = sum(a == b for a, b in zip(results["ours"], results["hf"], strict=True))
        notes = [
            f"decoder calls at {WARMUP_TOKENS} tokens {counts['ours']}/{counts['hf']}",
            f"same tokens in {equal}/{batch}",
        ]
        if foreign > FOREIGN_LOAD_NOTE:
            notes.append(f"noisy: other processes used {foreign:.1f} cores")
        rate = {side: batch * args.tokens / seconds[side] for side in seconds}
        name = "greedy" if beam == 1 else f"beam {beam}"
        if values is not None:
            values[f"b{batch}-{name.replace(' ', '')}"] = {
                "ours": round(rate["ours"], 1),
                "hf": round(rate["hf"], 1),
                "ratio": round(rate["ours"] / rate["hf"], 2),
            }
        rows.append(
            f"{batch:>5} {name:<8} {rate['ours']:>12.1f} {rate['hf']:>10.1f} "
            f"{rate['ours'] / rate['hf']:>8.2f}  " + "; ".join(notes)
        )
    return rows


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--tokens", type=int, default=128, help="tokens generated per sentence")
    parser.add_argument("--source-len", type=int, default=32)
    parser.add_argument("--embed-dim", type=int, default=256)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=3, help="encoder and decoder each")
    parser.add_argument("--ffn-dim", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per entry")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument(
        "--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="tables to print"
    )
    parser.add_argument("--hf-batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--hf-layers", type=int, default=4, help="ours ÷ HF: layers per stack")
    parser.add_argument("--hf-source-len", type=int, default=16)
    parser.add_argument("--hf-beam-size", type=int, default=4)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        default="float32",
        help="weights and activations (on the CPU only float32: it has no bf16 units)",
    )
    parser.add_argument("--quick", action="store_true", help="32 tokens, 1 repeat: a smoke check")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here")
    if args.device == "cpu" and args.dtype != "float32":
        parser.error(f"--dtype {args.dtype} on the CPU: this benchmark runs float32 there")
    if args.quick:
        args.tokens, args.repeats = 32, 1
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"E={args.embed_dim} H={args.num_heads} FFN={args.ffn_dim} V={args.vocab} "
        f"{args.dtype} on {args.device}, "
        f"{args.tokens} tokens generated, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, median of {args.repeats}"
    )
    if "cache" in args.sections or "speed" in args.sections:
        model = build_model(args)
        print(
            f"tables 1-2: pre-LN, {args.num_layers}+{args.num_layers} layers, source "
            f"{args.source_len} tokens"
        )
    if "cache" in args.sections:
        print_cache_table(model, args)
    if "speed" in args.sections:
        print_speed_table(model, args)
    if "hf" in args.sections:
        print_hf_table(args)


def print_cache_table(model: Seq2SeqTransformer, args: argparse.Namespace) -> None:
    print("\n1. greedy decoding: KV cache ÷ recomputing the prefix (ms per sentence)")
    header = (
        f"{'batch':>5} {'cached ms':>13} {'recompute ms':>15} {'cached/recompute':>17} "
        f"{'speed-up':>10}  notes"
    )
    print(header)
    print("-" * len(header))
    for batch in args.batches:
        print(cache_row(model, args, batch), flush=True)


def print_speed_table(model: Seq2SeqTransformer, args: argparse.Namespace) -> None:
    print(f"\n2. decoding speed (KV cache; NAT: one pass), {args.tokens} tokens per sentence")
    header = f"{'batch':>5} {'method':<8} {'sentences/s':>13} {'÷ greedy':>12} {'mean len':>11}"
    print(header)
    print("-" * len(header))
    for batch in args.batches:
        for row in speed_rows(model, args, batch):
            print(row, flush=True)


def print_hf_table(args: argparse.Namespace) -> None:
    import transformers

    ours, theirs = build_pair(args)
    params = [sum(p.numel() for p in m.parameters()) for m in (ours, theirs)]
    print(
        f"\n3. ours ÷ Hugging Face MarianMTModel.generate (transformers "
        f"{transformers.__version__}, sdpa), the same weights: post-LN, sinusoidal, shared and "
        f"tied embeddings, {args.hf_layers}+{args.hf_layers} layers, source "
        f"{args.hf_source_len} tokens, {args.tokens} new tokens per sentence (encoder "
        f"included); parameters ours {params[0]:,}, HF {params[1]:,}; max |Δ log p| "
        f"teacher-forced = {check_pair(ours, theirs, args):.1e}"
    )
    header = f"{'batch':>5} {'method':<8} {'ours tok/s':>12} {'HF tok/s':>10} {'ours/HF':>8}  notes"
    print(header)
    print("-" * len(header))
    values: dict[str, dict[str, float]] = {}
    for batch in args.hf_batches:
        for row in hf_rows(ours, theirs, args, batch, values):
            print(row, flush=True)
    # The table's numbers as the last line, for tests/docs/records.py.
    print(json.dumps({"hf": values}))


if __name__ == "__main__":
    main()
