#!/usr/bin/env bash
# One short GPU check (at most 9 minutes: the steps' timeouts sum to 540 s, under the device
# tool's 10-minute limit per command): the CUDA tests, then the GPU benchmarks; results go to
# $OUT (default benchmarks/results/gpu). Run on a machine with a CUDA build of torch:
#   PYTHON=python3 bash benchmarks/gpu_check.sh
# Copy the figures into benchmarks/README.md with the GPU named (nvidia-smi.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-benchmarks/results/gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi not found" > "$OUT/nvidia-smi.txt"
"$PYTHON" -c "import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" > "$OUT/torch.txt" 2>&1
# CUDA tests: every test that names cuda, plus the device-independent estimator tests on CUDA.
timeout 150 "$PYTHON" -m pytest -q -x -k "cuda or CUDA" tests/ > "$OUT/cuda_tests.txt" 2>&1
echo "cuda tests exit code: $?" >> "$OUT/cuda_tests.txt"
# Benchmarks on the GPU.
timeout 60 "$PYTHON" benchmarks/bench_sparsemax.py --device cuda --repeats 3 --readme "$OUT/README_gpu.md" > "$OUT/bench_sparsemax.txt" 2>&1
echo "bench_sparsemax exit code: $?" >> "$OUT/bench_sparsemax.txt"
# Whole fit / predict / explain against pytorch-tabnet on the GPU (one repeat, 4 epochs).
timeout 120 "$PYTHON" benchmarks/bench_speed.py --device cuda --threads 2 --repeats 1 --epochs 4 --readme "$OUT/README_gpu.md" > "$OUT/bench_speed.txt" 2>&1
echo "bench_speed exit code: $?" >> "$OUT/bench_speed.txt"
# torch.compile (tabsparse compiled, plain compiled) against the hand-fused eager step on the GPU:
# the measurement behind compile="auto" on CUDA, and the same with CUDA graphs (three compiles).
timeout 210 "$PYTHON" benchmarks/bench_compile.py --device cuda --repeats 1 --readme "$OUT/README_gpu.md" > "$OUT/bench_compile.txt" 2>&1
echo "bench_compile exit code: $?" >> "$OUT/bench_compile.txt"
tail -n 3 "$OUT"/*.txt
