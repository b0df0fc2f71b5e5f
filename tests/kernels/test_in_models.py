"""Every attention variant inside the encoder, a config and the CLI: the lecture's
properties (no positions ⇒ permutation equivariance for kernels that treat keys as a set;
padding ignored; truncated ⇒ equals the dense window mask), training from a config, and
the ``selfattn bench attention`` table."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.data.recipes.listops import ListOpsSpec, evaluate_listops, generate_listops
from selfattn.kernels import KERNELS
from selfattn.models import Encoder, StackConfig

from ..helpers_cli import TINY_MODEL, write_config
from .helpers import SIZES, size_options

E, H, L = 16, 2, 12


def _encoder(name: str, seed: int = 0) -> Encoder:
    torch.manual_seed(seed)
    options = size_options(name)
    config = StackConfig(
        E, H, 32, num_layers=2, attention=name, attention_options=options, max_len=L
    )
    encoder = Encoder(config)
    return encoder.double().eval()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_variant_trains_and_ignores_padding(name: str) -> None:
    encoder = _encoder(name)
    x = torch.randn(2, L, E, dtype=torch.float64)
    padding = torch.zeros(2, L, dtype=torch.bool)
    padding[1, 8:] = True
    out = encoder(x, key_padding_mask=padding).last_hidden_state
    for value in (100.0, float("nan"), float("inf"), float("-inf")):
        changed = x.clone()
        changed[1, 8:] = value  # whatever sits in the padding must not matter
        again = encoder(changed, key_padding_mask=padding).last_hidden_state
        torch.testing.assert_close(again[1, :8], out[1, :8])
        torch.testing.assert_close(again[0], out[0])
    encoder.train()
    loss = encoder(x, key_padding_mask=padding).last_hidden_state[~padding].square().mean()
    loss.backward()
    grads = [p.grad for p in encoder.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)


@pytest.mark.parametrize("name", ["dense", "linear", "performer"])
def test_set_kernels_without_positions_are_permutation_equivariant(name: str) -> None:
    encoder = _encoder(name)
    x = torch.randn(1, L, E, dtype=torch.float64)
    order = torch.randperm(L, generator=torch.Generator().manual_seed(1))
    out = encoder(x).last_hidden_state
    torch.testing.assert_close(encoder(x[:, order]).last_hidden_state, out[:, order])


@pytest.mark.parametrize("name", ["window", "linformer"])
def test_position_aware_kernels_are_not(name: str) -> None:
    """A window and a projection along the sequence both know where a vector is, even
    with no positional encoding: permuting the input does not permute the output."""
    encoder = _encoder(name)
    x = torch.randn(1, L, E, dtype=torch.float64)
    order = torch.randperm(L, generator=torch.Generator().manual_seed(1))
    out = encoder(x).last_hidden_state
    assert not torch.allclose(encoder(x[:, order]).last_hidden_state, out[:, order])


def test_window_encoder_equals_the_dense_encoder_with_a_window_mask() -> None:
    window = _encoder("window")
    dense = Encoder(StackConfig(E, H, 32, num_layers=2, max_len=L)).double().eval()
    dense.load_state_dict(window.state_dict())
    x = torch.randn(2, L, E, dtype=torch.float64)
    padding = torch.zeros(2, L, dtype=torch.bool)
    padding[0, 10:] = True
    expected = dense(x, key_padding_mask=padding, window=SIZES["window"]).last_hidden_state
    got = window(x, key_padding_mask=padding).last_hidden_state
    torch.testing.assert_close(got, expected)


def test_random_feature_kernels_differ_per_block() -> None:
    encoder = _encoder("performer")
    first, second = (layer.self_attn.kernel.projection for layer in encoder.layers)
    assert not torch.equal(first, second)


def _listops_file(path: Path, count: int, seed: int) -> Path:
    spec = ListOpsSpec(min_length=8, max_length=40, max_depth=3, max_args=4, sizes=(0, 0, 0))
    examples = generate_listops(spec, count, seed)
    rows = [f"{evaluate_listops(e.tokens)}\t{' '.join(e.tokens)}" for e in examples]
    random.Random(seed).shuffle(rows)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", ["window", "performer"])
def test_train_and_eval_a_variant_from_the_cli(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _listops_file(tmp_path / "train.tsv", 128, 0)
    dev = _listops_file(tmp_path / "dev.tsv", 32, 1)
    config = write_config(
        tmp_path / "listops.toml",
        run_dir=tmp_path / "run",
        data={"dataset": train, "dev": dev, "test": dev, "batch_size": 32},
        model={**TINY_MODEL, "dropout": None, "attention": name, "attention_size": SIZES[name]},
        train={"epochs": 2, "seed": 0, "device": "cpu", "threads": 1},
    )
    assert main(["train", str(config), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "run")]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["count"] == 32
    # The kernel survives the checkpoint and draws its own attention map (window: the
    # banded weights; performer: the matrix its features imply).
    image = tmp_path / "map.png"
    assert main(["attention", str(tmp_path / "run"), "[MAX 1 2 ]", "--output", str(image)]) == 0
    assert image.exists() and "wrote" in capsys.readouterr().out


def test_bench_attention_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    args = ["bench", "attention", "--lengths", "64,128", "--variants", ",".join(KERNELS)]
    args += ["--window", "8", "--heads", "2", "--head-dim", "8", "--repeats", "1"]
    assert main([*args, "--threads", "1", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "x dense" in table and "window" in table
    rows = json.loads(out.read_text())
    last = json.loads(table.splitlines()[-1])  # the numbers again, for a record of the run
    assert {(v, int(n)) for v, lengths in last.items() for n in lengths} == {
        (r["variant"], r["length"]) for r in rows
    }
    window = next(r for r in rows if (r["variant"], r["length"]) == ("window", 128))
    assert last["window"]["128"] == {
        "forward_s": window["forward_s"],
        "backward_s": window["backward_s"],
        "forward_mib": window["forward_peak"] / 2**20,
        "backward_mib": window["backward_peak"] / 2**20,
        "error": window["error"],
        "ratios": window["ratios"],
    }
    others = [name for name in KERNELS if name != "dense"]
    assert [(r["variant"], r["length"]) for r in rows] == [
        (v, n) for n in (64, 128) for v in ("dense", *others)
    ]
    assert all(r["forward_s"] > 0 and r["backward_peak"] > 0 for r in rows)
    by = {(r["variant"], r["length"]): r for r in rows}
    assert by[("dense", 64)]["ratios"]["forward_s"] == 1.0
    assert by[("window", 128)]["error"] < 1e-5  # exact, against its band-masked reference
    assert by[("linear", 128)]["error"] > 1e-2  # an approximation of softmax attention
    assert main(["bench", "attention", "--variants", "nope"]) == 2
