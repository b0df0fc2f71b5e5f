#!/usr/bin/env bash
# The translate-en-zh table of docs/translation.md: the Transformer and the RNN encoder–
# decoder with attention, each on the Chinese target as characters (translate-en-zh) and as
# the shipped word segmentation (translate-en-zh-words), at one wall-clock budget each
# (train.max_minutes, default 15), one thread each, two trainings at a time. After each
# training: dev BLEU / chrF with beam 5 (what chooses settings), then test greedy and beam 5
# (sacrebleu, zh tokens). Logs under ${OUT:-en-zh-logs}/, runs under ${RUNS:-runs/en_zh}/;
# summary.txt holds each run's command, training seconds and the three scores.
#
#   PYTHONPATH=src bash benchmarks/translation_en_zh.sh
#   MINUTES=30 PYTHONPATH=src bash benchmarks/translation_en_zh.sh --set train.seed=1
#
# Arguments are passed to every training as overrides (a smoke run:
# --set data.train_fraction=0.05 --set train.epochs=1). The Transformer config ships 6,000
# BPE pieces, the RNN's 4,000; the docs' comparison is at 4,000 for both:
# --set data.bpe_vocab_size=4000.
set -uo pipefail
out=${OUT:-en-zh-logs}
runs=${RUNS:-runs/en_zh}
python=${PYTHON:-python3}
minutes=${MINUTES:-15}
mkdir -p "$out" "$runs"

one() {  # NAME CONFIG [--set ...]: train, then score dev beam 5, test greedy, test beam 5
    local name=$1 config=$2 started
    shift 2
    started=$(date +%s)
    "$python" -m selfattn train "$config" --no-progress --set train.threads=1 \
        --set "train.max_minutes=$minutes" --set "run_dir=$runs/$name" "$@" \
        >"$out/train_$name.txt" 2>&1 || { echo "$name training FAILED" >"$out/line_$name"; return 1; }
    local seconds=$(( $(date +%s) - started )) scores="" overrides="$*"
    for split_flags in "dev --beam 5" "test --greedy" "test --beam 5"; do
        set -- $split_flags
        "$python" -m selfattn eval "$runs/$name" --threads 1 --split "$1" "$2" ${3:-} \
            >"$out/eval_${name}_$1$2${3:-}.txt" 2>&1
        scores+="$1 $2 ${3:-}: $(tail -n 1 "$out/eval_${name}_$1$2${3:-}.txt")"$'\n'
    done
    printf '%s: %s %s, %s s of training\n%s' "$name" "$config" "$overrides" "$seconds" "$scores" \
        >"$out/line_$name"
}

lane() {  # NAME CONFIG DATASET ...: the runs of one lane, one after the other
    while (($#)); do
        one "$1" "$2" --set "data.dataset=$3" "${extra[@]}"
        shift 3
    done
}

extra=("$@")
lane transformer_chars configs/translate_en_zh.toml translate-en-zh \
    transformer_words configs/translate_en_zh.toml translate-en-zh-words &
lane rnn_chars configs/translate_en_zh_rnn.toml translate-en-zh \
    rnn_words configs/translate_en_zh_rnn.toml translate-en-zh-words &
wait
cat "$out"/line_* >"$out/summary.txt"
cat "$out/summary.txt"
