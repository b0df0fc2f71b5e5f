#!/usr/bin/env bash
# bible-en-es on a CPU at one budget for both models: the Transformer
# (configs/translate_bible_en_es.toml) and the RNN encoder–decoder with attention
# (configs/translate_bible_en_es_rnn.toml), trained at once, one thread each, for the same
# number of optimizer steps (EPOCHS epochs of 64 verses a batch, 447 steps an epoch, the
# cosine schedule over them, 150 warm-up steps), then scored side by side on the test split
# (greedy and beam 5) by benchmarks/translation_scores.py. Runs under ${RUNS:-runs/bible_cpu}/.
#
#   PYTHONPATH=src bash benchmarks/bible_cpu.sh             # 2 epochs: ~40 minutes on 2 cores
#   EPOCHS=4 PYTHONPATH=src bash benchmarks/bible_cpu.sh --set train.seed=1
#
# Arguments are passed to both trainings as overrides.
set -euo pipefail
runs=${RUNS:-runs/bible_cpu}
python=${PYTHON:-python3}
epochs=${EPOCHS:-2}
train() {  # NAME CONFIG [--set ...]
    local name=$1 config=$2
    shift 2
    "$python" -m selfattn train "$config" --no-progress --set train.threads=1 \
        --set data.batch_size=64 --set train.warmup_steps=150 --set "train.epochs=$epochs" \
        --set "run_dir=$runs/$name" "$@"
}
train transformer configs/translate_bible_en_es.toml "$@" &
train rnn configs/translate_bible_en_es_rnn.toml "$@" &
wait %1 && wait %2
"$python" benchmarks/translation_scores.py "transformer=$runs/transformer" "rnn=$runs/rnn" \
    --decodings greedy,beam5 --jobs 2
