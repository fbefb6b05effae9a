#!/bin/bash
# A repeat `contrib validate` of the shipped flashinfer/sm120-trtllm-comm on a machine
# with one GPU: the bench (world size 2) must be skipped for "fewer GPUs than the bench
# needs (2)" and build nothing, so the whole validate takes seconds, not the 13+ minutes
# it took when every run waited for a rank that could not start.  Nothing is downloaded;
# the bundle folder ($1) holds:
#   wheels/*.whl    click, tomlkit, platformdirs, unidiff (pure Python)
#   flashinfer.git  a bare clone of flashinfer (git fetch --depth 1) at the patchset's
#                   two bases, 79b8ad8058cf (release-v0.6.16) and fb28d7242b35 (main)
#   src/            this repository's tracked files (the workspace and contrib)
# Run from the repository root: bash benchmarks/device/bench_skip.sh BUNDLE
# Measured on one H200 (2026-12-01, harden-b): run 1 3.35 s, run 2 2.88 s, exit 0; bench
# "regression run on sm_90a: skipped (fewer GPUs than the bench needs (2): 1 of sm_90a
# here; nothing built)"; ptx skipped there for missing tvm-ffi headers, and the shipped
# record's run with ptx passed is kept beside the new one ("kept run run-a25bbd598fc3b43a
# ... this run has less evidence (ptx passed there, skipped now)").
# Make the bundle: git init --bare B/flashinfer.git; git -C B/flashinfer.git fetch --depth 1
#   MIRROR SHA (each base); pip download --no-deps -d B/wheels click tomlkit platformdirs
#   unidiff; git ls-files | grep -v ^tests/ | xargs cp --parents -t B/src
set -u
H=$(cd "$1" && pwd)
export OUT=${OUT:-/tmp/out} PYTHONUNBUFFERED=1 CONTRIB_CACHE=/tmp/contrib-cache
mkdir -p "$OUT" "$CONTRIB_CACHE/upstreams"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    "$H"/wheels/*.whl || exit 1
export PYTHONPATH="$H/src:/tmp/site"
# the cache's folder name is the upstream's name and the sha256 of its url (contrib.toml)
key=$(python3 -c 'import hashlib;print(hashlib.sha256(b"https://github.com/flashinfer-ai/flashinfer.git").hexdigest()[:10])')
cp -r "$H/flashinfer.git" "$CONTRIB_CACHE/upstreams/flashinfer-$key.git"
W=/tmp/ws; rm -rf "$W"; cp -r "$H/src" "$W"; cd "$W" || exit 1
git init -q && git add -A && git -c user.name=bench -c user.email=bench@example.com commit -qm ws
nvidia-smi -L; python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count())'
for i in 1 2; do
    start=$(date +%s.%N)
    python3 -m contrib validate flashinfer/sm120-trtllm-comm --no-progress > "$OUT/validate-$i.txt" 2>&1
    rc=$?
    end=$(date +%s.%N)
    echo "run $i: rc=$rc wall=$(python3 -c "print(round($end - $start, 2))")s"
    grep -E "^  (bench|tests|ptx) " "$OUT/validate-$i.txt" | head -6
done
