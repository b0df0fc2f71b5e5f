#!/usr/bin/env bash
# The translation table of issue 18 on one GPU: bible-en-es (28,579 training verse pairs)
# trained to convergence (30 epochs at most, patience 4) by three models at once, each in
# its own process sharing the GPU:
#   * ours, configs/translate_bible_en_es.toml, through benchmarks/seq2seq_reference.py,
#     which also trains
#   * its torch.nn.Transformer twin (the same embeddings, loop, batches and seed), and
#   * the RNN encoder–decoder with attention, configs/translate_bible_en_es_rnn.toml
#     (12.23 M parameters against the Transformer's 12.21 M), at the same budget.
# Then `selfattn eval` scores greedy, beam 5 and NAT decoding (ours) and greedy and beam 5
# (the RNN) on the 1,000 test verses: BLEU / chrF (sacrebleu). Logs under ${OUT:-bible-logs}/,
# runs under ${RUNS:-runs/bible}/. On a CPU-only machine this is days of work; arguments
# are passed to every training as overrides, e.g. a smoke run:
#
#   PYTHONPATH=src bash benchmarks/translation_gpu.sh --set data.train_fraction=0.01 --set train.epochs=1
#
# TRAIN_MINUTES=M gives each training a wall-clock budget (train.max_minutes): no epoch
# starts that would end past it, so a lease of limited minutes still leaves scored runs.
# The five evaluations then run at once.
#
# The recipe reads two Debian packages (sword-text-web, sword-text-sparv) from the cache;
# on a machine without apt access, copy them there first ($SELFATTN_CACHE/debian/…).
set -uo pipefail
out=${OUT:-bible-logs}
runs=${RUNS:-runs/bible}
python=${PYTHON:-python3}
mkdir -p "$out" "$runs"
budget=()
[[ -n ${TRAIN_MINUTES:-} ]] && budget=(--set "train.max_minutes=$TRAIN_MINUTES")
export PYTHONUNBUFFERED=1
status=0
started=$(date +%s)
for twin in selfattn torch.nn; do
    "$python" benchmarks/seq2seq_reference.py --config configs/translate_bible_en_es.toml \
        --only "$twin" --out "$runs" --threads 1 "${budget[@]}" "$@" >"$out/train_$twin.txt" 2>&1 &
done
"$python" -m selfattn train configs/translate_bible_en_es_rnn.toml --threads 1 \
    --set run_dir="$runs/rnn" "${budget[@]}" "$@" >"$out/train_rnn.txt" 2>&1 &
for job in $(jobs -p); do wait "$job" || status=1; done
echo "training: $(( $(date +%s) - started )) s wall for the three at once" | tee "$out/summary.txt"
tail -n 8 "$out"/train_*.txt >>"$out/summary.txt"
evaluate() {  # RUN NAME FLAGS...: the eval's last line (BLEU / chrF / speed), or FAILED
    local run=$1 name=$2
    shift 2
    if "$python" -m selfattn eval "$run" --threads 1 "$@" >"$out/eval_$name.txt" 2>&1; then
        echo "$name $(tail -n 1 "$out/eval_$name.txt")" >"$out/line_$name"
    else
        echo "$name FAILED: $(tail -n 1 "$out/eval_$name.txt")" >"$out/line_$name"
        return 1
    fi
}
started=$(date +%s)
evaluate "$runs/selfattn" transformer_greedy --greedy &
evaluate "$runs/selfattn" transformer_beam5 --beam 5 &
evaluate "$runs/selfattn" transformer_nat --nat &
evaluate "$runs/rnn" rnn_greedy --greedy &
evaluate "$runs/rnn" rnn_beam5 --beam 5 &
for job in $(jobs -p); do wait "$job" || status=1; done
echo "evaluation: $(( $(date +%s) - started )) s wall for the five at once" | tee -a "$out/summary.txt"
cat "$out"/line_* | tee -a "$out/summary.txt"
rm -f "$out"/line_*
exit $status
