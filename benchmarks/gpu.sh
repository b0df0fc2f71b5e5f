#!/usr/bin/env bash
# Everything that needs a GPU, in one run: the gpu-marked tests, then the CUDA tables of
# the training-throughput, decoding and window-attention benchmarks. Run from the
# repository root on a machine with CUDA and PyTorch (selfattn on PYTHONPATH or
# installed); logs go to ${OUT:-gpu-logs}/. About 6 minutes on one H200.
#
#   PYTHONPATH=src bash benchmarks/gpu.sh
set -uo pipefail
out=${OUT:-gpu-logs}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 - <<'EOF' 2>&1 | tee "$out/device.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
print("bf16:", torch.cuda.is_bf16_supported())
EOF
status=0
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/train/test_amp.py tests/kernels/test_window.py tests/decoding/test_cuda.py \
    tests/models/test_cuda_dynamic.py tests/benchmarks_smoke/test_hf_references.py 2>&1 | tee "$out/pytest_gpu.txt" || status=1
timeout 120 python3 benchmarks/train_throughput.py --device cuda --dtype bfloat16 \
    --threads 1 --shapes 32x128,64x512 --steps 30 --warmup 3 --placements default bert 2>&1 \
    | tee "$out/train_throughput_cuda.txt" || status=1
timeout 200 python3 benchmarks/kv_cache.py --device cuda --dtype bfloat16 --threads 1 \
    --repeats 5 --batches 1 16 2>&1 | tee "$out/kv_cache_cuda.txt" || status=1
timeout 60 python3 benchmarks/window_attention.py --device cuda --lengths 4096 16384 \
    --growth 4096 16384 65536 2>&1 | tee "$out/window_cuda.txt" || status=1
exit $status
