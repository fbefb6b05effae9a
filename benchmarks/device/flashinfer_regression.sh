#!/bin/bash
# The regression run of the shipped flashinfer/sm120-trtllm-comm on a machine with
# two (or more) GPUs that the gate admitted before the patch (e.g. 2x H200, sm_90a),
# with nothing to download: everything comes from the bundle folder ($1).
#
#   bundle/
#     whl/*.whl            cp312 wheels: flashinfer-python==0.6.16, apache-tvm-ffi,
#                          nccl4py, cuda-tile, nvidia-cudnn-frontend, contrib's own deps
#     fi.git               a bare clone of flashinfer holding v0.6.16 (8da13a29c85f)
#     src/                 contrib (its package folder and patchsets/)
#
# Two jobs run side by side, each building flashinfer's trtllm_comm JIT module for
# sm_90a from its own tree into its own JIT cache:
#   plain    v0.6.16 with only the patchset's test added (patch 4): pytest directly
#   patched  `contrib validate flashinfer/sm120-trtllm-comm --arch sm_120a --out FILE`
# and results land in $OUT (the device tool brings that folder back) and in
# /tmp/results.  `flashinfer_regression.sh BUNDLE wait` waits for jobs started earlier.
set -u
BUNDLE=$(cd "$1" && pwd)
RES=/tmp/results
OUT=${OUT:-/tmp/out}
mkdir -p "$RES" "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=/tmp/site CONTRIB_CACHE=/tmp/contrib-cache
PLAIN_K="paths or (dtype0 and 1024 and True and 0.0)"
BASE=8da13a29c85f7e5b1c81878d933f84ae9fc4afa9
VERSION="$BUNDLE/src/patchsets/flashinfer/sm120-trtllm-comm/$BASE"

collect() {
    cp -f "$RES"/*.log "$RES"/*.xml "$RES"/*.json "$OUT"/ 2>/dev/null
    ls -la "$RES"
}

wait_jobs() {  # until both jobs wrote their exit status, or $1 seconds passed
    local deadline=$((SECONDS + $1))
    while [ $SECONDS -lt $deadline ]; do
        [ -f "$RES/plain.rc" ] && [ -f "$RES/patched.rc" ] && break
        sleep 10
        echo "$(date -u +%T) plain=$(cat "$RES/plain.rc" 2>/dev/null || echo running)" \
             "patched=$(cat "$RES/patched.rc" 2>/dev/null || echo running)" \
             "| $(tail -c 160 "$RES/patched.err" 2>/dev/null | tr '\n' ' ')"
    done
}

if [ "${2:-}" = "wait" ]; then
    wait_jobs "${3:-540}"
    collect
    exit 0
fi

date -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$BUNDLE"/whl/*.whl || exit 1
nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader
command -v nvcc cuobjdump; nvcc --version | tail -1; nproc
python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())'
python3 -c 'import flashinfer.comm, tvm_ffi; print("flashinfer", flashinfer.__version__)' || exit 1

# The workspace: this patchset only, its upstream the carried bare clone.
WS=/tmp/ws
mkdir -p "$WS/patchsets/flashinfer"
cp -r "$BUNDLE/src/patchsets/flashinfer/sm120-trtllm-comm" "$WS/patchsets/flashinfer/"
cat > "$WS/contrib.toml" <<EOF
[upstreams.flashinfer]
url = "$BUNDLE/fi.git"
branch = "main"
github = "flashinfer-ai/flashinfer"
fork = "contrib-bot/flashinfer"
EOF
git -C "$WS" init -q .

# plain: v0.6.16 plus the test file alone (patch 4 adds only tests/comm/...).
git clone -q "$BUNDLE/fi.git" /tmp/plain && git -C /tmp/plain checkout -q "$BASE" &&
    git -C /tmp/plain -c user.name=x -c user.email=x@x am -q "$VERSION"/0004-*.patch || exit 1
# from /tmp: in the repository root `import contrib` would find that checkout's copy
(cd /tmp && PYTHONPATH="$BUNDLE/src:/tmp/site" python3 -c "
from pathlib import Path
from contrib.analysis.profiles import FLASHINFER, prepare_worktree
from contrib.validate.gputests import install_probe
print(prepare_worktree(FLASHINFER, Path('/tmp/plain'), 'python3'))
print(install_probe(Path('/tmp/plain-run')))") || exit 1

export RES WS BUNDLE PLAIN_K VERSION
# setsid: the jobs outlive this command, so a later `... wait` call can collect them.
setsid bash -c '
    cd /tmp/plain && CUDA_VISIBLE_DEVICES=0,1 FLASHINFER_CUDA_ARCH_LIST=9.0a \
    FLASHINFER_WORKSPACE_BASE=/tmp/jit-plain CONTRIB_KERNEL_LOG=/tmp/plain-run/kernels \
    PYTHONPATH="/tmp/plain-run/probe:/tmp/plain:/tmp/site" \
    timeout 1500 python3 -m pytest -q -p no:cacheprovider -rA \
        --junitxml="$RES/plain.xml" -k "$PLAIN_K" \
        tests/comm/test_trtllm_allreduce_lamport.py tests/comm/test_trtllm_allreduce_fusion.py \
        > "$RES/plain.log" 2>&1
    echo $? > "$RES/plain.rc"
    cat /tmp/plain-run/kernels/*.txt 2>/dev/null | sort -u > "$RES/plain-kernels.log"' < /dev/null &
setsid bash -c '
    cd "$WS" && export PYTHONPATH="$BUNDLE/src:/tmp/site"
    out=(--out "$RES/run-h200x2.json")
    python3 -m contrib validate --help | grep -q -- "--out" || out=()
    timeout 1500 python3 -m contrib validate flashinfer/sm120-trtllm-comm --arch sm_120a \
        "${out[@]}" > "$RES/patched.log" 2> "$RES/patched.err"
    echo $? > "$RES/patched.rc"
    cp -f "$WS/patchsets/flashinfer/sm120-trtllm-comm/'"$BASE"'/validation.json" \
        "$RES/workspace-validation.json" 2>/dev/null' < /dev/null &
wait_jobs "${2:-500}"
collect
