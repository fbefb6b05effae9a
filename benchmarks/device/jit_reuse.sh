#!/bin/bash
# Cold vs warm JIT builds of flashinfer's trtllm_comm through contrib's build slots, on
# one GPU machine with nothing to download.  The bundle folder ($1) holds:
#   whl/*.whl   cp312 wheels: flashinfer-python==0.6.16, apache-tvm-ffi, nccl4py, cuda-tile,
#               nvidia-cudnn-frontend, einops, nvidia-ml-py, tabulate, cuda-python,
#               cuda-bindings, cuda-pathfinder, ninja, tomlkit, platformdirs, click, unidiff
#   fi.git      a bare clone of flashinfer's release-v0.6.16 (depth 2) with three branches:
#               patched (the shipped series applied at its tip), hdr (patched + a comment
#               in include/flashinfer/comm/trtllm_allreduce.cuh), other (patched + a
#               comment in a header no trtllm_comm unit includes)
# Run from the repository root: bash benchmarks/device/jit_reuse.sh BUNDLE
set -u
BUNDLE=$(cd "$1" && pwd)
export PYTHONUNBUFFERED=1 OUT=${OUT:-/tmp/out} CONTRIB_CACHE=/tmp/contrib-cache
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$BUNDLE"/whl/*.whl > "$OUT/pip.log" 2>&1 || { tail "$OUT/pip.log"; exit 1; }
export PYTHONPATH="$PWD:/tmp/site"
nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader; nproc; nvcc --version | tail -1
python3 -c 'import flashinfer, tvm_ffi; print("flashinfer", flashinfer.__version__)' 2>&1 | tail -2
timeout 570 python3 benchmarks/device/jit_reuse.py "$BUNDLE/fi.git" 2>&1 | tee "$OUT/jit_reuse.log"
