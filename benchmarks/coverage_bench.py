"""Benchmark ``contrib coverage`` on real wheels and check its named cases, in one run.

Speed: sglang-kernel 0.4.10's x86_64 wheel (373 MB, 1.2 GB unpacked) read cold (a fresh
contrib cache) and then warm (the median of ``--repeat`` runs), each as a user runs it
(``python -m contrib coverage ... --json``), with the ratio of warm to cold; targets:
cold <= 30 s on 2 cores, warm <= 1 s.

Cases (the verdicts issue 58 measured, each read from the JSON):

* sglang-kernel 0.4.10, x86_64: ``sm90/`` and ``sm100/common_ops`` native on sm_120a,
  no-image on sm_121a (sm_120a SASS only);
* aarch64: both ``common_ops`` native on sm_121a; ``infllm_ops`` no-image on sm_121a
  (sm_90 and sm_120a only), native on sm_120a;
* ``flashmla_ops`` no-image on sm_120a and sm_121a on both platforms (sm_90a, sm_100,
  sm_103a);
* flashinfer-cubin 0.6.13: every trtllm-gen FMHA cubin no-image on sm_120a and sm_121a.

The wheels are found as contrib finds them: ``--find-links`` folders, pip's cache, or
with ``--download`` fetched once.  The last line says whether every target and case
held; a miss exits 1.

    python benchmarks/coverage_bench.py --find-links /tmp/h58-wheels/x86_64 \\
        --find-links /tmp/h58-wheels/aarch64 --find-links /tmp/h58-wheels/cubin [--no-cubin]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SGLANG = "sglang-kernel==0.4.10"
CUBIN = "flashinfer-cubin==0.6.13"
FMHA = "*fmha/trtllm-gen/*"
COLD_TARGET, WARM_TARGET = 30.0, 1.0
# (requirement, platform, --only, object path or None for all, arch, the verdict)
CASES = [
    *((SGLANG, "x86_64", None, f"sgl_kernel/{d}/common_ops.abi3.so", arch, verdict)
      for d in ("sm90", "sm100") for arch, verdict in (("sm_120a", "native"),
                                                       ("sm_121a", "no-image"))),
    *((SGLANG, "aarch64", None, f"sgl_kernel/{d}/common_ops.abi3.so", "sm_121a", "native")
      for d in ("sm90", "sm100")),
    (SGLANG, "aarch64", None, "sgl_kernel/infllm_ops.cpython-310-aarch64-linux-gnu.so",
     "sm_121a", "no-image"),
    (SGLANG, "aarch64", None, "sgl_kernel/infllm_ops.cpython-310-aarch64-linux-gnu.so",
     "sm_120a", "native"),
    *((SGLANG, plat, None, "sgl_kernel/flashmla_ops.abi3.so", arch, "no-image")
      for plat in ("x86_64", "aarch64") for arch in ("sm_120a", "sm_121a")),
    *((CUBIN, "x86_64", FMHA, None, arch, "no-image") for arch in ("sm_120a", "sm_121a")),
]


def coverage(env: dict[str, str], links: list[str], *args: str) -> tuple[float, dict[str, Any]]:
    """One run of ``contrib coverage ... --json``: its wall time and its document."""
    command = [sys.executable, "-m", "contrib", "coverage", *args, "--json",
               *(f"--find-links={link}" for link in links)]
    started = time.monotonic()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    took = time.monotonic() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return took, json.loads(proc.stdout)


def verdicts(doc: dict[str, Any], path: str | None, arch: str) -> set[str]:
    return {o["verdicts"][arch]["verdict"] for r in doc["readings"] for o in r["objects"]
            if o["device_code"] and (path is None or o["path"] == path)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--find-links", action="append", default=[], metavar="DIR")
    parser.add_argument("--download", action="store_true",
                        help="Let contrib fetch a wheel it does not find offline.")
    parser.add_argument("--repeat", type=int, default=3, help="Warm runs (the median counts).")
    parser.add_argument("--no-cubin", action="store_true",
                        help="Skip flashinfer-cubin (458 MB, 13,452 FMHA cubins: ~1 min cold).")
    args = parser.parse_args()
    links = list(args.find_links)
    extra = ["--download"] if args.download else []
    with tempfile.TemporaryDirectory(prefix="coverage-bench-") as scratch:
        env = {**os.environ, "CONTRIB_CACHE": scratch,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                           os.environ.get("PYTHONPATH")]))}
        speed = [SGLANG, "--platform", "x86_64", "--arch", "sm_120a,sm_121a", *extra]
        cold, doc = coverage(env, links, *speed)
        warm = statistics.median(coverage(env, links, *speed)[0] for _ in range(args.repeat))
        wheel = Path(doc["readings"][0]["source"]["path"])
        ok = [cold <= COLD_TARGET, warm <= WARM_TARGET]
        print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.0f} MB, {os.cpu_count()} cores")
        print(f"cold {cold:.1f} s (target <= {COLD_TARGET:g} s), warm {warm:.2f} s "
              f"(target <= {WARM_TARGET:g} s), warm/cold {warm / cold:.3f}")
        for requirement, platform, only, path, arch, expected in CASES:
            if args.no_cubin and requirement == CUBIN:
                continue
            _, doc = coverage(env, links, requirement, "--platform", platform, "--arch", arch,
                              *(["--only", only] if only else []), *extra)
            got = verdicts(doc, path, arch)
            ok.append(got == {expected})
            print(f"{'ok    ' if ok[-1] else 'MISSED'} {requirement} {platform} "
                  f"{path or only} {arch}: {', '.join(sorted(got)) or 'nothing read'}"
                  f" (expected {expected})")
    print("all targets and cases met" if all(ok) else "some target or case MISSED")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    raise SystemExit(main())
