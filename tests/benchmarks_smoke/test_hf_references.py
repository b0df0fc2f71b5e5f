"""The Hugging Face columns of benchmarks/train_throughput.py and benchmarks/kv_cache.py run
at a tiny size, and the Marian twin computes what ours computes."""

from __future__ import annotations

import json
from types import ModuleType

import pytest
import torch

from ..helpers_scripts import load_script

pytest.importorskip("transformers")


def load(name: str) -> ModuleType:
    return load_script(f"benchmarks/{name}.py")


def argv(line: str) -> list[str]:
    return line.split()


def test_train_throughput_prints_three_sides(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load("train_throughput")
    bench.main(argv("--sizes tiny --shapes 2x16 --vocab 300 --steps 1 --warmup 1 --threads 1"))
    out = capsys.readouterr().out
    assert "ours/HF" in out
    assert "HF BertForMaskedLM" in out
    last = json.loads(out.splitlines()[-1])  # the numbers again, for a record of the run
    assert last["tiny"]["ours_params"] > 0 and last["tiny"]["hf_params"] > 0
    assert f"{last['tiny']['ours_params']:,}" in out
    row = last["tiny.default.t1.2x16"]
    assert row["ours_over_hf"] == pytest.approx(row["ours"] / row["hf"])


def test_marian_twin_has_our_weights() -> None:
    bench = load("kv_cache")
    args = bench.parse_args(
        argv("--embed-dim 32 --num-heads 2 --ffn-dim 64 --hf-layers 1 --vocab 200 --tokens 12")
    )
    ours, theirs = bench.build_pair(args)
    assert bench.check_pair(ours, theirs, args) < 1e-4
    source = torch.randint(4, 200, (2, args.hf_source_len))
    calls = bench.hf_calls(ours, theirs, source, beam=2)
    assert bench.count_decoder_calls(ours, theirs, calls) == {"ours": 8, "hf": 8}
    assert calls["ours"](12) == calls["hf"](12)


def test_kv_cache_hf_table(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load("kv_cache")
    bench.main(
        argv(
            "--sections hf --quick --threads 1 --embed-dim 32 --num-heads 2 --ffn-dim 64 "
            "--hf-layers 1 --vocab 200 --hf-batches 2"
        )
    )
    out = capsys.readouterr().out
    assert "same tokens in 2/2" in out
    assert "decoder calls at 8 tokens 8/8" in out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(
    ("name", "line", "expected"),
    [
        (
            "kv_cache",
            "--quick --device cuda --dtype bfloat16 --embed-dim 32 --num-heads 2 --ffn-dim 64 "
            "--num-layers 1 --hf-layers 1 --vocab 200 --batches 2 --hf-batches 2",
            "decoder calls at 8 tokens 8/8",
        ),
        (
            "train_throughput",
            "--sizes tiny --shapes 2x16 --vocab 300 --steps 2 --warmup 1 --threads 1 "
            "--device cuda --dtype bfloat16",
            "ours/HF",
        ),
    ],
    ids=["kv_cache", "train_throughput"],
)
def test_tables_run_on_cuda_in_bf16(
    capsys: pytest.CaptureFixture[str], name: str, line: str, expected: str
) -> None:
    load(name).main(argv(line))
    out = capsys.readouterr().out
    assert "bfloat16 on cuda" in out
    assert expected in out


def test_kv_cache_refuses_bf16_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load("kv_cache")
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv("--dtype bfloat16"))
    assert exit_info.value.code == 2
    assert "on the CPU" in capsys.readouterr().err


def test_train_throughput_reports_both_placements(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load("train_throughput")
    bench.main(argv("--sizes tiny --shapes 2x16 --vocab 300 --steps 1 --warmup 0 --threads 1"))
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    table = [row for row in rows if row[:1] == ["tiny"] and row[1] in bench.PLACEMENTS]
    assert [row[1] for row in table] == ["everywhere", "bert", "bert-uniform", "default"]


def test_the_default_row_trains_ours_by_onednn_and_the_twin_by_torch() -> None:
    bench = load("train_throughput")
    ours = bench.build_ours(bench.SIZES["tiny"], 50, 16, 0.1, "default")
    twin = bench.TorchTokenModel(ours, bench.SIZES["tiny"], 0.1)
    linears = {type(m).__name__ for m in ours.modules() if isinstance(m, torch.nn.Linear)}
    assert linears == {"OneDNNLinear"}
    assert {type(m) for m in twin.modules() if isinstance(m, torch.nn.Linear)} <= {
        torch.nn.Linear,
        torch.nn.modules.linear.NonDynamicallyQuantizableLinear,
    }


def test_bert_placement_drops_what_bert_drops() -> None:
    """BERT placement: no dropout on the feed-forward hidden layer or before the head, in
    ours and in the torch twin; the rest keeps the rate."""
    bench = load("train_throughput")
    size = bench.SIZES["tiny"]
    for placement, hidden in (("everywhere", 0.1), ("bert", 0.0), ("default", 0.0)):
        ours = bench.build_ours(size, 50, 16, 0.1, placement)
        twin = bench.TorchTokenModel(ours, size, 0.1)
        blocks = ours.encoder.encoder.layers
        assert {block.feedforward.dropout.p for block in blocks} == {hidden}
        assert {layer.dropout.p for layer in twin.encoder.layers} == {hidden}
        assert ours.head.dropout.p == twin.head.dropout.p == hidden
        assert type(twin.head.dropout) is torch.nn.Dropout
        assert {block.dropout1.p for block in blocks} == {0.1}
        assert {block.self_attn.dropout for block in blocks} == {0.1}


def test_train_throughput_cpu_clock() -> None:
    bench = load("train_throughput")
    assert bench.parse_args(argv("--clock cpu")).clock == "cpu"
