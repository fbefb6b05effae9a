"""How long `contrib validate` takes on the real flashinfer patchset, cold and warm.

    python benchmarks/validate_bench.py ~/src/flashinfer [--python PYTHON]

The shipped ``flashinfer/sm120-trtllm-comm`` in a temporary workspace whose
upstream is the local clone (it must hold v0.6.16, 8da13a29c85f), then:

* cold: ``contrib validate`` with an empty PTX cache (the upstream cache is made
  first, so cloning is not counted), its wall time and the peak RSS of its
  largest process (contrib, nvcc or cicc);
* warm: the same again, nothing changed;
* the baseline, measured in the same run: every unit the PTX stage compiles,
  compiled alone with the same flags and headers, one after the other: the sum
  and the maximum of those times.

Targets: cold <= 1.2 x (sum / min(cores, units)), warm <= 3 s.  The PTX stage
needs nvcc and the third-party headers that flashinfer-python and
apache-tvm-ffi ship: ``--python`` names an interpreter that has them (default:
this one).  A machine without them measures a PTX stage that is skipped, and
the script says so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BASE = "8da13a29c85f7e5b1c81878d933f84ae9fc4afa9"
TARGET = "flashinfer/sm120-trtllm-comm"


def _workspace(root: Path, clone: Path, python: str) -> Path:
    ws = root / "ws"
    (ws / "patchsets" / "flashinfer").mkdir(parents=True)
    shutil.copytree(REPO / "patchsets" / TARGET, ws / "patchsets" / TARGET)
    (ws / "contrib.toml").write_text(
        f'[upstreams.flashinfer]\nurl = "{clone}"\nbranch = "main"\n'
        f'github = "flashinfer-ai/flashinfer"\nfork = "bench/flashinfer"\npython = "{python}"\n'
    )
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


def _contrib(ws: Path, env: dict[str, str], *args: str) -> tuple[float, dict[str, object], int]:
    """(wall seconds, the JSON document, exit status) of ``python -m contrib ARGS --json``."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "contrib", *args, "--json"], cwd=ws, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - started
    try:
        doc = json.loads(done.stdout or "{}")
    except ValueError:
        doc = {}
    if not doc:
        print(done.stderr[-2000:], file=sys.stderr)
    return wall, doc, done.returncode


def _ptx_stage(doc: dict[str, object]) -> dict[str, object]:
    """The ptx stage of the first run in validate's JSON (any schema that lists stages)."""
    text = json.dumps(doc)
    found = json.loads(text)
    stack = [found]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("name") == "ptx" and "status" in item:
                return item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return {}


def _single_units(clone: Path, python: str, work: Path) -> list[tuple[str, float, bool]]:
    """Each unit at stake compiled alone, sequentially: (unit, seconds, ok)."""
    from contrib.analysis import ptx
    from contrib.analysis.diffs import parse_diff
    from contrib.analysis.profiles import profile_for
    from contrib.analysis.ptxjobs import PtxRequest, prepare_headers
    from contrib.analysis.tree import GitTree
    from contrib.analysis.units import units_at_stake
    from contrib.arch import parse_arch
    from contrib.carry.series import apply_series, load_patches
    from contrib.git.repo import Git

    version = REPO / "patchsets" / TARGET / BASE
    names = [n for n in (version / "series").read_text().split() if n.endswith(".patch")]
    git = Git(clone)
    applied = apply_series(git, BASE, load_patches(git, [(n, (version / n).read_bytes()) for n in names]))
    head = applied[-1].commit
    tree = GitTree(git, head)
    changes = parse_diff(git.run("diff", BASE, head, strip=False))
    gate = [("gen_trtllm_comm_module", n) for n in ("trtllm_allreduce.cu", "trtllm_allreduce_fusion.cu",
                                                    "trtllm_moe_allreduce_fusion.cu")]
    units = units_at_stake(tree, gate, [c.path for c in changes if not c.deleted])
    profile, arch = profile_for(tree), parse_arch("sm_120a")
    request = PtxRequest(tree, arch, units, profile, python, [], [], [], work, {})
    root, dirs, _ = prepare_headers(request, [])
    flags, _ = profile.flags(tree)
    nvcc = ptx.find_nvcc()
    assert nvcc is not None
    timings = []
    for unit in units:
        started = time.monotonic()
        result = ptx.compile_ptx(nvcc, root / unit.path, profile.compute(arch), dirs, work / "out", flags)
        timings.append((unit.path, time.monotonic() - started, result.ok))
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("clone", type=Path, help="a local flashinfer clone holding v0.6.16")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with flashinfer-python and apache-tvm-ffi installed")
    args = parser.parse_args()
    clone = args.clone.resolve()
    with tempfile.TemporaryDirectory(prefix="validate-bench-") as tmp:
        root = Path(tmp)
        ws = _workspace(root, clone, args.python)
        env = {**os.environ, "CONTRIB_CACHE": str(root / "cache"),
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        _contrib(ws, env, "status", "--no-fetch")  # makes the upstream cache: not counted
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        cold, doc, rc = _contrib(ws, env, "validate", TARGET)
        peak_kib = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        warm, warm_doc, _ = _contrib(ws, env, "validate", TARGET)
        stage, warm_stage = _ptx_stage(doc), _ptx_stage(warm_doc)
        details = stage.get("details", stage)
        print(f"ptx stage: {stage.get('status')}: {stage.get('reason')}")
        if stage.get("status") != "passed":
            print("(the PTX stage did not compile everything: the figures below are not the target's)")
        singles = _single_units(clone, args.python, root / "single")
    cores, units = os.cpu_count() or 1, len(singles)
    total, longest = sum(t for _, t, _ in singles), max((t for _, t, _ in singles), default=0.0)
    target = total / max(1, min(cores, units))
    rows = [("cold validate (empty PTX cache)", f"{cold:8.1f} s", f"{cold / target:5.2f} x target" if target else ""),
            ("  peak RSS, largest process", f"{peak_kib / 1024:8.0f} MiB", ""),
            ("warm validate (nothing changed)", f"{warm:8.1f} s", "<= 3 s: " + ("yes" if warm <= 3 else "NO")),
            ("sum of single-unit nvcc times", f"{total:8.1f} s", f"{units} unit(s)"),
            ("max single-unit nvcc time", f"{longest:8.1f} s", ""),
            (f"target: sum / min({cores} cores, {units} units)", f"{target:8.1f} s",
             "cold <= 1.2 x target: " + ("yes" if cold <= 1.2 * target else "NO")),
            # no schedule beats its longest unit: the bound a parallel build can reach
            ("bound: max(longest unit, target)", f"{max(longest, target):8.1f} s",
             f"cold = {cold / max(longest, target, 1e-9):.2f} x bound")]
    for unit, seconds, ok in singles:
        print(f"  {unit:<45} {seconds:7.1f} s {'ok' if ok else 'FAILED'}")
    for label, value, note in rows:
        print(f"{label:<42} {value:>14}  {note}")
    warm_details = warm_stage.get("details", warm_stage)
    print(f"exit status {rc}; PTX units compiled cold/warm: {details.get('compiled')}/"
          f"{warm_details.get('compiled')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
