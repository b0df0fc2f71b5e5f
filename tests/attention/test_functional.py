"""The kernel against the lecture's formula b^i = Σ_j α'_{i,j} v^j, written out in float64."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from selfattn import AdditiveScore, attention
from selfattn.attention import NORMALIZERS, SCORES, adjacency_mask, functional

B, H, T, D = 2, 3, 6, 4
F64 = torch.float64


def _custom_normalizer(s: torch.Tensor) -> torch.Tensor:
    return torch.softmax(2.0 * s, dim=-1)


NORMALIZER_CHOICES: dict[str, str | Callable[[torch.Tensor], torch.Tensor]] = {
    **{name: name for name in NORMALIZERS},
    "callable": _custom_normalizer,
}


def _reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    score_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    norm_fn: Callable[[torch.Tensor], torch.Tensor],
    allowed: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One query at a time, as in the lecture: α_{i,j} = score, α' = norm over allowed j."""
    batch, heads, num_q, _ = q.shape
    num_k = k.shape[2]
    out = torch.zeros(batch, heads, num_q, v.shape[-1], dtype=F64)
    weights = torch.zeros(batch, heads, num_q, num_k, dtype=F64)
    for b in range(batch):
        for h in range(heads):
            for i in range(num_q):
                keep = allowed[b, h, i]
                if not keep.any():
                    continue  # nothing to attend to: output stays zero
                alpha = score_fn(q[b, h, i][None, None, None], k[b, h][None, None])[0, 0, 0]
                if bias is not None:
                    alpha = alpha + bias[b, h, i]
                alpha_prime = torch.zeros(num_k, dtype=F64)
                alpha_prime[keep] = norm_fn(alpha[keep][None])[0]
                weights[b, h, i] = alpha_prime
                out[b, h, i] = (alpha_prime[:, None] * v[b, h]).sum(0)
    return out, weights


def _mask_case(kind: str, num_q: int, num_k: int) -> tuple[dict, torch.Tensor, torch.Tensor | None]:
    """(kwargs for attention, the (B, H, T, S) allowed matrix built independently, bias)."""
    allowed = torch.ones(B, H, num_q, num_k, dtype=torch.bool)
    offset = num_k - num_q
    i = torch.arange(num_q)[:, None] + offset
    j = torch.arange(num_k)[None, :]
    if kind == "none":
        return {}, allowed, None
    if kind == "padding":
        pad = torch.zeros(B, num_k, dtype=torch.bool)
        pad[1, -2:] = True
        return {"key_padding_mask": pad}, allowed & ~pad[:, None, None, :], None
    if kind == "bool":
        m = torch.rand(num_q, num_k) > 0.3
        return {"mask": m}, allowed & m, None
    if kind == "float":
        bias = torch.randn(B, 1, num_q, num_k, dtype=F64)
        return {"mask": bias}, allowed, bias.expand(B, H, num_q, num_k)
    if kind == "causal":
        return {"causal": True}, allowed & (j <= i), None
    if kind == "window":
        return {"window": 1}, allowed & ((i - j).abs() <= 1), None
    if kind == "graph":
        edges = torch.tensor([[0, 1, 2, 3, 5], [1, 2, 3, 4, 0]])
        adj = adjacency_mask(edges, num_k)
        return {"mask": adj}, allowed & adj, None
    if kind == "no_self":
        return {"include_self": False}, allowed & (i != j), None
    if kind == "empty_row":
        m = torch.ones(num_q, num_k, dtype=torch.bool)
        m[2] = False
        return {"mask": m}, allowed & m, None
    raise AssertionError(kind)


MASK_KINDS = [
    "none",
    "padding",
    "bool",
    "float",
    "causal",
    "window",
    "graph",
    "no_self",
    "empty_row",
]


def _score_pair(
    name: str, head_dim: int
) -> tuple[object, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """(what to pass as score=, the lecture's formula for it)."""
    if name == "dot":
        return "dot", lambda q, k: q @ k.transpose(-2, -1)
    if name == "scaled_dot":
        return "scaled_dot", lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(head_dim)
    if name == "additive":
        module = AdditiveScore(head_dim, hidden_dim=5).double()
        wq, wk, bk = module.q_proj.weight, module.k_proj.weight, module.k_proj.bias
        w = module.w.weight[0]

        def additive(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            # w · tanh(W [q; k]) with W = [W^q  W^k], one (i, j) pair at a time
            big_w = torch.cat([wq, wk], dim=1)
            rows = []
            for qi in q.reshape(-1, head_dim):
                rows.append(
                    torch.stack(
                        [
                            w @ torch.tanh(big_w @ torch.cat([qi, kj]) + bk)
                            for kj in k.reshape(-1, head_dim)
                        ]
                    )
                )
            return torch.stack(rows).reshape(*q.shape[:-1], k.shape[-2])

        return module, additive
    raise AssertionError(name)


def _norm_fn(normalizer: object) -> Callable[[torch.Tensor], torch.Tensor]:
    if callable(normalizer):
        return normalizer  # type: ignore[return-value]
    return {
        "softmax": lambda s: torch.softmax(s, -1),
        "relu": torch.relu,
        "sigmoid": torch.sigmoid,
    }[
        normalizer  # type: ignore[index]
    ]


@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("normalizer_name", list(NORMALIZER_CHOICES))
@pytest.mark.parametrize("score_name", list(SCORES))
def test_matches_lecture_formula(score_name: str, normalizer_name: str, mask_kind: str) -> None:
    q, k, v = (torch.randn(B, H, T, D, dtype=F64) for _ in range(3))
    score, score_fn = _score_pair(score_name, D)
    normalizer = NORMALIZER_CHOICES[normalizer_name]
    kwargs, allowed, bias = _mask_case(mask_kind, T, T)
    expected, expected_w = _reference(q, k, v, score_fn, _norm_fn(normalizer), allowed, bias)
    with torch.no_grad():
        out, _ = attention(q, k, v, score=score, normalizer=normalizer, **kwargs)
        out_w, weights = attention(
            q, k, v, score=score, normalizer=normalizer, need_weights=True, **kwargs
        )
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out_w, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(weights, expected_w, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mask_kind", ["causal", "window", "padding"])
def test_fewer_queries_than_keys_align_to_the_end(mask_kind: str) -> None:
    """During incremental decoding the T newest queries sit at positions S-T … S-1."""
    num_q, num_k = 3, 7
    q = torch.randn(B, H, num_q, D, dtype=F64)
    k, v = (torch.randn(B, H, num_k, D, dtype=F64) for _ in range(2))
    kwargs, allowed, _ = _mask_case(mask_kind, num_q, num_k)
    score_fn = _score_pair("scaled_dot", D)[1]
    expected, _ = _reference(q, k, v, score_fn, _norm_fn("softmax"), allowed)
    out, _ = attention(q, k, v, **kwargs)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("normalizer_name", list(NORMALIZER_CHOICES))
@pytest.mark.parametrize("score_name", list(SCORES))
def test_gradcheck(score_name: str, normalizer_name: str) -> None:
    q, k, v = (torch.randn(1, 2, 4, 3, dtype=F64, requires_grad=True) for _ in range(3))
    score, _ = _score_pair(score_name, 3)
    normalizer = NORMALIZER_CHOICES[normalizer_name]
    pad = torch.tensor([[False, False, False, True]])
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[1] = False  # a row with nothing to attend to must still have finite gradients

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attention(
            q,
            k,
            v,
            score=score,
            normalizer=normalizer,
            key_padding_mask=pad,
            mask=mask,
            chunk_size=2,
        )[0]

    assert torch.autograd.gradcheck(fn, (q, k, v))


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("normalizer", ["softmax", "relu"])
def test_fully_masked_rows_are_zero_with_finite_gradients(
    normalizer: str, need_weights: bool
) -> None:
    q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
    pad = torch.ones(B, T, dtype=torch.bool)
    pad[0] = False  # batch 1 has no keys at all
    out, _ = attention(
        q, k, v, normalizer=normalizer, key_padding_mask=pad, need_weights=need_weights
    )
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    assert torch.isfinite(out).all()
    out.sum().backward()
    for t in (q, k, v):
        assert t.grad is not None and torch.isfinite(t.grad).all()


def test_fused_path_calls_sdpa_and_eager_path_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(functional.F, "scaled_dot_product_attention", spy)
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    attention(q, k, v, causal=True)
    attention(q, k, v, score="dot", window=2)
    assert len(calls) == 2
    attention(q, k, v, need_weights=True)
    attention(q, k, v, normalizer="relu")
    assert len(calls) == 2


@pytest.mark.parametrize("kwargs", [{}, {"causal": True}, {"window": 2, "include_self": False}])
def test_weights_requested_give_the_same_output_as_the_fused_path(kwargs: dict) -> None:
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    fused, none = attention(q, k, v, **kwargs)
    eager, weights = attention(q, k, v, need_weights=True, **kwargs)
    assert none is None and weights is not None
    torch.testing.assert_close(fused, eager, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))


@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 2, 5])
def test_chunking_changes_nothing_including_gradients(
    chunk_size: int, recompute: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if recompute:  # force the activation-checkpointed blocks even on a tiny input
        monkeypatch.setattr(functional, "RECOMPUTE_BUDGET", 0)
    q, k, v = (torch.randn(B, H, T + 1, D, dtype=F64, requires_grad=True) for _ in range(3))
    bias = torch.randn(T + 1, T + 1, dtype=F64)

    def run(chunk: int | None) -> tuple[torch.Tensor, ...]:
        out, _ = attention(q, k, v, normalizer="sigmoid", mask=bias, causal=True, chunk_size=chunk)
        grads = torch.autograd.grad(out.square().sum(), (q, k, v))
        return (out, *grads)

    for a, b in zip(run(chunk_size), run(None), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("normalizer", ["softmax", "relu"])
def test_grouped_query_heads_equal_repeated_keys(normalizer: str) -> None:
    q = torch.randn(B, 4, T, D)
    k, v = torch.randn(B, 2, T, D), torch.randn(B, 2, T, D)
    grouped, _ = attention(q, k, v, normalizer=normalizer, causal=True)
    repeated, _ = attention(
        q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), normalizer=normalizer, causal=True
    )
    torch.testing.assert_close(grouped, repeated)


def test_matches_sdpa_with_dropout_off_and_custom_scale() -> None:
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    ours, _ = attention(q, k, v, scale=0.3, need_weights=True)
    ref = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(ours, ref)


def test_dropout_only_when_asked() -> None:
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    a, _ = attention(q, k, v, dropout=0.5, normalizer="relu")
    b, _ = attention(q, k, v, normalizer="relu")
    assert not torch.allclose(a, b)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda q, k, v: (q[0], k, v), r"q must have shape \(B, H, L, D\)"),
        (lambda q, k, v: (q, k.double(), v), "share a dtype"),
        (lambda q, k, v: (q, k[..., :3], v), "head dims differ"),
        (lambda q, k, v: (q, k[:, :2], v[:, :2]), "multiple of key/value heads"),
        (lambda q, k, v: (q.long(), k, v), "floating-point"),
    ],
)
def test_bad_inputs_name_the_problem(change: Callable, message: str) -> None:
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    with pytest.raises((ValueError, TypeError), match=message):
        attention(*change(q, k, v))


def test_bad_masks_name_the_problem() -> None:
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    with pytest.raises(ValueError, match="does not broadcast"):
        attention(q, k, v, mask=torch.ones(T + 1, T, dtype=torch.bool))
    with pytest.raises(TypeError, match="True = padding"):
        attention(q, k, v, key_padding_mask=torch.zeros(B, T))
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        attention(q, k, v, key_padding_mask=torch.zeros(B, T + 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="unknown normalizer"):
        attention(q, k, v, normalizer="tanh")
    with pytest.raises(ValueError, match="AdditiveScore"):
        attention(q, k, v, score="additive")
    with pytest.raises(ValueError, match="window"):
        attention(q, k, v, window=-1)


@pytest.mark.slow
def test_training_dropout_on_cpu_never_holds_the_whole_weight_matrix() -> None:
    """SDPA has no fused CPU dropout: with dropout_p > 0 it falls back to the math path and
    keeps all B·H·L·L weights (an lra-text batch of 32 × 4k tokens ran out of 24 GB). Long
    inputs with dropout go through the chunked path instead; dropout still acts."""
    from selfattn.attention.functional import CHUNK_BUDGET, RECOMPUTE_BUDGET
    from selfattn.bench import measure_memory

    batch, length = 8, 4096
    weights_bytes = batch * length * length * 4  # all B·H·L·L weights, H = 1
    assert weights_bytes // 4 > RECOMPUTE_BUDGET  # big enough to recompute blocks
    q = torch.randn(batch, 1, length, 8, requires_grad=True)

    def step() -> torch.Tensor:
        out, _ = attention(q, q, q, dropout=0.1)
        out.sum().backward()
        return out.detach()

    report = measure_memory(step)
    assert report.largest <= CHUNK_BUDGET * 4 < weights_bytes
    assert report.peak < weights_bytes  # the math path peaks at 4x (2.1 GB)
    plain, _ = attention(q, q, q)
    assert not torch.allclose(report.result, plain.detach())  # dropout was applied


PAD_FILLS = [float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize("extra", ["none", "causal", "float_mask"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "weights"])
@pytest.mark.parametrize("normalizer", ["softmax", "relu", "sigmoid"])
@pytest.mark.parametrize("score_name", list(SCORES))
def test_padding_holding_nan_or_inf_changes_nothing(
    score_name: str, normalizer: str, need_weights: bool, extra: str
) -> None:
    """A masked weight is 0, but 0 · NaN = NaN in weights @ V, and NaN + −inf = NaN in a
    masked score: padded keys and values holding NaN or ±inf must still give exactly the
    result they give holding zeros, with finite weights (0 on padding) and gradients."""
    q, k, v = (torch.randn(B, H, T, D, dtype=F64) for _ in range(3))
    score, _ = _score_pair(score_name, D)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[0, -2:] = True
    pad[1, ::2] = True  # causal: query 0 of batch 1 has no key at all
    kwargs: dict = {
        "none": {},
        "causal": {"causal": True},
        "float_mask": {"mask": torch.randn(T, T, dtype=F64)},
    }[extra]

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, weights = attention(
            q,
            k,
            v,
            score=score,
            normalizer=normalizer,
            key_padding_mask=pad,
            need_weights=need_weights,
            chunk_size=4,  # two blocks on the eager path
            **kwargs,
        )
        return (out,) if weights is None else (out, weights)

    def fill(t: torch.Tensor, value: float) -> torch.Tensor:
        return t.masked_fill(pad[:, None, :, None], value)

    expected = run(q, fill(k, 0.0), fill(v, 0.0))
    padded_keys = pad[:, None, None, :].expand(B, H, T, T)
    for value in PAD_FILLS:
        inputs = [q.clone().requires_grad_(), *(fill(t, value).requires_grad_() for t in (k, v))]
        got = run(*inputs)
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
        if need_weights:
            assert torch.all(got[1][padded_keys] == 0)
        got[0].sum().backward()
        assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in inputs)
        # Self-attention: padded queries hold the same; only their own rows may change.
        out = run(fill(q, value), *inputs[1:])[0].detach()
        real = ~pad[:, None, :, None].expand_as(out)
        torch.testing.assert_close(out[real], expected[0][real], rtol=1e-10, atol=1e-12)


def test_masking_in_place_spares_a_custom_scores_saved_output() -> None:
    """The eager path masks a product's scores in place; a custom score whose backward
    reads its own output (exp) must still get its gradient, equal to masking a copy."""

    def exp_score(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
        return torch.exp(q @ k.transpose(-2, -1) * scale)

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    for score in (exp_score, "scaled_dot"):
        out, weights = attention(q, k, v, score=score, key_padding_mask=padding, need_weights=True)
        out.sum().backward()
        assert q.grad is not None and torch.isfinite(q.grad).all()
        assert weights is not None and torch.all(weights[1, :, :, 3:] == 0)
        q.grad = None
