"""The JIT's target on the real flashinfer history: what its compilation context builds
for a GPU with a CUDA release, and `contrib why`'s verdict of a feature loading a JIT
module, in one run.

Cases (issue 58's measured goal, then releases read beside it):

* ad893cfab (#2725): SM 12.x builds ``compute_120a`` below CUDA 13, so sm_121a with CUDA
  12.9 gets ``sm_120a``, which runs on 12.0 only: no-image, and
  ``flashinfer.cutlass_fused_moe`` crashes; sm_120a runs it; CUDA 13.0 builds
  ``sm_120f``, which sm_121a runs;
* e2f821b8c (#2839, the fix): ``120f`` from CUDA 12.9, so sm_121a runs it; below 12.9
  the choice raises;
* not tuned on: beebc6074 (#1608, the first SM121 support, an inline suffix before
  ``_normalize_cuda_arch`` existed) builds ``sm_121a``, which CUDA 12.8's nvcc does not
  know; ee3ca012e (#2927) ``sm_121f``; 04f4c0c9a (#2994) ``sm_121a`` again.

Each reading is timed; each `why` case is asked twice in one fresh cache (the first ask
of a commit audits it; later asks read the audit kept).  The last
line says whether every case held; a miss exits 1.

    python benchmarks/jit_target_bench.py [--flashinfer-git DIR] [--no-why]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.why_cases import MIRRORS, scratch_workspace  # noqa: E402
from contrib.analysis.archtoolkit import parse_cuda  # noqa: E402
from contrib.analysis.jittarget import JitReading  # noqa: E402
from contrib.analysis.tree import GitTree  # noqa: E402
from contrib.arch import parse_arch  # noqa: E402
from contrib.audit.run import audit_upstream  # noqa: E402
from contrib.errors import ContribError  # noqa: E402
from contrib.git.repo import Git  # noqa: E402

# (commit, arch, CUDA, the build's verdict, the targets built)
READINGS = [
    ("ad893cfab", "sm_121a", "12.9", "no-image", ("sm_120a",)),
    ("ad893cfab", "sm_120a", "12.9", "runs", ("sm_120a",)),
    ("ad893cfab", "sm_121a", "13.0", "runs", ("sm_120f",)),
    ("e2f821b8c", "sm_121a", "12.9", "runs", ("sm_120f",)),
    ("e2f821b8c", "sm_121a", "12.8", "refuses", ()),
    ("beebc6074", "sm_121a", "12.8", "nvcc-refuses", ("sm_121a",)),
    ("beebc6074", "sm_121a", "12.9", "runs", ("sm_121a",)),
    ("ee3ca012e", "sm_121a", "12.9", "runs", ("sm_121f",)),
    ("04f4c0c9a", "sm_121a", "12.9", "runs", ("sm_121a",)),
]
FEATURE = "flashinfer.cutlass_fused_moe"  # loads gen_cutlass_fused_moe_sm120_module on 12.x
# (commit, arch, CUDA, the chain's verdict)
WHYS = [("ad893cfab", "sm_121a", "12.9", "crash"), ("e2f821b8c", "sm_121a", "12.9", "on"),
        ("ad893cfab", "sm_121a", "13.0", "on")]


def readings(git: Git) -> int:
    misses = 0
    kept: dict[str, JitReading] = {}
    for rev, arch, cuda, verdict, targets in READINGS:
        started = time.monotonic()
        if rev not in kept:
            tree = GitTree(git, rev)
            kept[rev] = JitReading(tree.read_text, tree.paths())
        found = kept[rev].target(parse_arch(arch), parse_cuda(cuda))
        seconds = time.monotonic() - started
        got = (found.built.verdict.value, found.built.targets) if found else ("none", ())
        ok = got == (verdict, targets)
        misses += not ok
        where = f"{found.path}:{found.line} {found.function}" if found else "-"
        print(f"{'ok  ' if ok else 'MISS'} {rev} {arch} CUDA {cuda}: {got[0]} "
              f"{','.join(got[1]) or '-'} (expected {verdict}) at {where} [{seconds:.2f} s]")
    return misses


def whys() -> int:
    ws = scratch_workspace({"flashinfer": MIRRORS["flashinfer"]}, prefix="jit-target-")
    misses = 0
    for rev, arch, cuda, verdict in WHYS:
        for state in ("first", "again"):
            started = time.monotonic()
            audit = audit_upstream(ws, "flashinfer", parse_arch(arch), at=rev, since=None,
                                   fetch=False, cuda=parse_cuda(cuda),
                                   features=lambda found: [f for f in found
                                                           if f.name == FEATURE])
            seconds = time.monotonic() - started
            got = audit.features[0].verdict.value if audit.features else "absent"
            ok = got == verdict
            misses += not ok
            print(f"{'ok  ' if ok else 'MISS'} why flashinfer {FEATURE} --at {rev} --arch "
                  f"{arch} --cuda {cuda}: {got} (expected {verdict}) [{state} {seconds:.1f} s]")
    return misses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flashinfer-git", type=Path, default=MIRRORS["flashinfer"])
    parser.add_argument("--no-why", action="store_true", help="the readings only")
    args = parser.parse_args()
    MIRRORS["flashinfer"] = args.flashinfer_git
    try:
        misses = readings(Git(args.flashinfer_git))
        total = len(READINGS)
        if not args.no_why:
            misses += whys()
            total += 2 * len(WHYS)
    except (ContribError, OSError) as exc:
        print(f"jit_target_bench: {exc}", file=sys.stderr)
        return 2
    print(f"{total - misses}/{total} cases held" + ("" if misses else ": all"))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
