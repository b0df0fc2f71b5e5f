#!/usr/bin/env bash
# Content vs location-aware vs forward cross-attention on spoken digit strings
# (digit-strings-espeak), with and without guided attention, for the Transformer
# encoder–decoder and the RNN encoder–decoder, at one equal reduced budget; the table of
# docs/results.md ("Cross-attention alignments"). Each run trains with 1 thread, then
# `selfattn eval RUN` decodes the test voices greedily; the last lines print one row per run.
#
#   benchmarks/digit_strings_alignment.sh [EPOCHS=20] [PARALLEL=2] [ONLY=regex of run names]
set -euo pipefail
EPOCHS=${1:-20}
PARALLEL=${2:-2}
ONLY=${3:-.}
PY=${PYTHON:-python}
export OMP_NUM_THREADS=1
OUT=runs/alignment_e${EPOCHS}

runs() {  # name config settings...; the configs' guided attention (1.0) first
  for guided in 1.0 0.0; do
    echo "tf-content-g$guided configs/digit_strings_espeak.toml --set seq2seq.guided_attention=$guided"
    echo "tf-location-g$guided configs/digit_strings_location.toml --set seq2seq.guided_attention=$guided"
    echo "tf-forward20-g$guided configs/digit_strings_forward.toml --set seq2seq.guided_attention=$guided"
  done
  for guided in 1.0 0.0; do
    echo "rnn-content-g$guided configs/digit_strings_rnn.toml --set seq2seq.guided_attention=$guided"
    echo "rnn-location-g$guided configs/digit_strings_rnn.toml --set seq2seq.guided_attention=$guided --set seq2seq.alignment=location"
    echo "rnn-forward20-g$guided configs/digit_strings_rnn.toml --set seq2seq.guided_attention=$guided --set seq2seq.alignment=forward --set seq2seq.forward_max_advance=20"
  done
  # Zhang et al.'s one position per step cannot get past frame T + 1 of ~90.
  echo "tf-forward1-g1.0 configs/digit_strings_forward.toml --set seq2seq.forward_max_advance=1"
}

one() {  # name config settings...
  local name=$1 config=$2
  shift 2
  local start=$SECONDS
  $PY -m selfattn train "$config" "$@" --set train.epochs="$EPOCHS" --set train.threads=1 \
    --set run_dir="$OUT/$name" --overwrite --no-progress >"$OUT/$name.train.log" 2>&1
  $PY -m selfattn eval "$OUT/$name" >"$OUT/$name.eval.json" 2>"$OUT/$name.eval.log"
  echo "$name $((SECONDS - start)) s $(tail -1 "$OUT/$name.eval.json")"
}
export -f one
export EPOCHS OUT PY

mkdir -p "$OUT"
runs | grep -E "^($ONLY)" | xargs -P "$PARALLEL" -L 1 bash -c 'one "$@"' _
