#!/usr/bin/env bash
# One short GPU check (at most 9 minutes: the steps' timeouts sum to 540 s, under the device
# tool's 10-minute limit per command): the wheels installed offline, the CUDA tests, then the GPU
# benchmarks; results go to $OUT (default benchmarks/results/gpu).
#
# The GPU machine is offline and has Python 3.12 with a CUDA torch, scikit-learn, pandas,
# pyarrow, onnx and tqdm, but not safetensors (which tabsparse imports), pytorch-tabnet and
# entmax (the references) or pytest and hypothesis (the tests). Bring them as wheels:
#   make gpu-wheels        # here, with internet: fills benchmarks/wheels (git-ignored, ~3.5 MB)
# then run through the device tool, carrying that ignored folder (its $OUT comes back):
#   run(command="bash benchmarks/gpu_check.sh", carry=["benchmarks/wheels"], timeout_s=600)
# Elsewhere: PYTHON=python3 bash benchmarks/gpu_check.sh
# The wheels go into a fresh folder outside the tree ($GPU_SITE, put on PYTHONPATH after the
# checkout), not into the interpreter, so its CUDA torch stays; tabsparse itself is imported from
# the checkout. Copy the figures into benchmarks/README.md with the GPU named (nvidia-smi.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-benchmarks/results/gpu}
GPU_SITE=${GPU_SITE:-${TMPDIR:-/tmp}/tabsparse-gpu-site}
mkdir -p "$OUT"
rm -rf "$GPU_SITE" && mkdir -p "$GPU_SITE"
# Install the carried wheels offline (pip --target; without pip, a wheel unpacked is installed).
shopt -s nullglob
wheels=(benchmarks/wheels/*.whl)
if ((${#wheels[@]})); then
    timeout 15 "$PYTHON" -m pip install --no-index --no-deps --no-compile -q \
        --disable-pip-version-check --target "$GPU_SITE" "${wheels[@]}" > "$OUT/install.txt" 2>&1 ||
        timeout 5 "$PYTHON" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
            "$GPU_SITE" "${wheels[@]}" >> "$OUT/install.txt" 2>&1
    echo "install exit code: $? (${#wheels[@]} wheels into $GPU_SITE)" >> "$OUT/install.txt"
else
    echo "no wheels in benchmarks/wheels: run 'make gpu-wheels' and carry benchmarks/wheels" > "$OUT/install.txt"
fi
shopt -u nullglob
export PYTHONPATH="$PWD:$GPU_SITE${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi not found" > "$OUT/nvidia-smi.txt"
"$PYTHON" -c "import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" > "$OUT/torch.txt" 2>&1
for dist in safetensors pytorch-tabnet entmax pytest hypothesis; do
    "$PYTHON" -c "import importlib.metadata as m, sys; print(sys.argv[1], m.version(sys.argv[1]))" "$dist" >> "$OUT/torch.txt" 2>/dev/null ||
        echo "$dist missing" >> "$OUT/torch.txt"
done
# CUDA tests: every test that names cuda, from the test files that mention it (other files may
# import what this machine lacks, e.g. matplotlib); all of them, not stopping at the first failure.
mapfile -t cuda_files < <(grep -li cuda tests/test_*.py)
timeout 130 "$PYTHON" -m pytest -q -p no:cacheprovider --continue-on-collection-errors -k "cuda or CUDA" "${cuda_files[@]}" > "$OUT/cuda_tests.txt" 2>&1
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
