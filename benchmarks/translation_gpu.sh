#!/usr/bin/env bash
# The translation table of issue 18 on one GPU: bible-en-es (28,579 training verse pairs)
# trained by three models at once (30 epochs at most, patience 4), each in its own process
# sharing the GPU:
#   * ours, configs/translate_bible_en_es.toml, through benchmarks/seq2seq_reference.py,
#     which also trains
#   * its torch.nn.Transformer twin (the same embeddings, loop, batches and seed), and
#   * the RNN encoder–decoder with attention, configs/translate_bible_en_es_rnn.toml
#     (12.23 M parameters against the Transformer's 12.21 M), at the same budget.
# As soon as a model's training ends, its test decodings run (at once): greedy for the
# twin (seq2seq_reference.py), greedy (with the KV cache), beam 5 and NAT for ours,
# greedy and beam 5 for the RNN, each scored on the 1,000 test verses by BLEU / chrF
# (sacrebleu). Logs and summary.txt under ${OUT:-bible-logs}/, runs under ${RUNS:-runs/bible}/.
#
# TRAIN_MINUTES=M gives each training a wall-clock budget (train.max_minutes): no epoch
# starts that would end past it, so a lease of limited minutes still leaves scored runs.
# DECODE_BATCH=N (default 256) sources are decoded at once (selfattn eval --batch-size):
# at eval's default of 64 the beam searches of 2026-11-26 ran 7–8 verses/s on an H200,
# two minutes of the lease each, the GPU waiting on Python between small steps.
# In one 10-minute command (a 15-minute lease): TRAIN_MINUTES=7.3 and `timeout 575`. On
# 2026-11-26 (H200, three at once, float32) an epoch took ~20 s for the Transformers and
# ~25 s for the RNN with checkpoints and dev evaluation, so 7.3 minutes should hold the
# RNN's 15 epochs and, once it is done, the Transformers' 30; decoding at 256 a time
# should then fit in the rest (estimates, not yet run).
#
# TRANSFORMER_CONFIG (default configs/translate_bible_en_es.toml, autoregressive only):
# configs/translate_bible_en_es_nat.toml trains the NAT pass too and adds its --nat row.
#
# TRANSFORMER_SET and RNN_SET: space-separated FIELD=VALUE overrides for the two
# Transformers or the RNN alone, e.g. TRANSFORMER_SET=train.amp=true where
# benchmarks/train_precision.py finds bf16 autocast the faster for them (each family's
# fastest precision: the RNN's GRU already multiplies in TF32 through cuDNN).
#
# On a CPU-only machine the full run is days of work; arguments are passed to every
# training as overrides, e.g. a smoke run:
#
#   PYTHONPATH=src bash benchmarks/translation_gpu.sh --set data.train_fraction=0.01 --set train.epochs=1
#
# The recipe reads two Debian packages (sword-text-web, sword-text-sparv) from the cache;
# on a machine without apt access, copy them there first ($SELFATTN_CACHE/debian/…).
set -uo pipefail
out=${OUT:-bible-logs}
runs=${RUNS:-runs/bible}
python=${PYTHON:-python3}
mkdir -p "$out" "$runs"
rm -f "$out"/line_*
decode_batch=${DECODE_BATCH:-256}
transformer_config=${TRANSFORMER_CONFIG:-configs/translate_bible_en_es.toml}
budget=()
[[ -n ${TRAIN_MINUTES:-} ]] && budget=(--set "train.max_minutes=$TRAIN_MINUTES")
transformer_sets=()
for field in ${TRANSFORMER_SET:-}; do transformer_sets+=(--set "$field"); done
rnn_sets=()
for field in ${RNN_SET:-}; do rnn_sets+=(--set "$field"); done
export PYTHONUNBUFFERED=1
started=$(date +%s)

elapsed() { echo "$(( $(date +%s) - started )) s"; }

evaluate() {  # RUN NAME FLAGS...: a line_NAME file with the eval's last line (or FAILED)
    local run=$1 name=$2
    shift 2
    if "$python" -m selfattn eval "$run" --threads 1 --batch-size "$decode_batch" "$@" \
        >"$out/eval_$name.txt" 2>&1; then
        echo "$name $(tail -n 1 "$out/eval_$name.txt")  [done at $(elapsed)]" >"$out/line_$name"
    else
        echo "$name FAILED: $(tail -n 1 "$out/eval_$name.txt")" >"$out/line_$name"
        return 1
    fi
}

twin() {  # NAME: train one of the two Transformers, then decode greedily (seq2seq_reference)
    "$python" benchmarks/seq2seq_reference.py --config "$transformer_config" \
        --only "$1" --out "$runs" --threads 1 --cached-only --decode-batch "$decode_batch" \
        "${@:2}" >"$out/train_$1.txt" 2>&1
}

chain() {  # NAME: one model's training, then its decodings at once; fails if any failed
    local name=$1 failed=0
    shift
    case $name in
        selfattn)
            twin selfattn "${budget[@]}" "${transformer_sets[@]}" "$@" || return 1
            echo "selfattn trained and decoded greedily at $(elapsed)" >>"$out/line_0_times"
            evaluate "$runs/selfattn" transformer_beam5 --beam 5 &
            # NAT decoding where the config trains the NAT pass (TRANSFORMER_CONFIG=
            # configs/translate_bible_en_es_nat.toml; the shipped recipe has it off).
            if grep -q '^nat = true' "$transformer_config"; then
                evaluate "$runs/selfattn" transformer_nat --nat &
            fi
            ;;
        torch.nn)
            twin torch.nn "${budget[@]}" "${transformer_sets[@]}" "$@" || return 1
            echo "torch.nn trained and decoded greedily at $(elapsed)" >>"$out/line_0_times"
            ;;
        rnn)
            "$python" -m selfattn train configs/translate_bible_en_es_rnn.toml --threads 1 \
                --set run_dir="$runs/rnn" "${budget[@]}" "${rnn_sets[@]}" "$@" \
                >"$out/train_rnn.txt" 2>&1 ||
                return 1
            echo "rnn trained at $(elapsed)" >>"$out/line_0_times"
            evaluate "$runs/rnn" rnn_greedy --greedy &
            evaluate "$runs/rnn" rnn_beam5 --beam 5 &
            ;;
    esac
    for job in $(jobs -p); do wait "$job" || failed=1; done
    return $failed
}

status=0
for name in selfattn torch.nn rnn; do
    chain "$name" "$@" &
done
for job in $(jobs -p); do wait "$job" || status=1; done
{
    echo "all done at $(elapsed); TRANSFORMER_SET='${TRANSFORMER_SET:-}' RNN_SET='${RNN_SET:-}'"
    for name in rnn selfattn torch.nn; do
        echo "== $name"
        grep -E "^epoch [0-9]+/[0-9]+  train|^stopping|max_minutes|Error|error" "$out/train_$name.txt" | tail -n 4
    done
    grep -h -A6 "ours/torch" "$out/train_selfattn.txt" "$out/train_torch.nn.txt"  # the twins' table
    cat "$out"/line_*
} | tee "$out/summary.txt"
rm -f "$out"/line_*
exit $status
