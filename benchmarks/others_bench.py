"""What the ``others`` stage adds to a warm `contrib validate`, against the PTX stage.

    python benchmarks/others_bench.py                       # the mini upstream
    python benchmarks/others_bench.py --flashinfer CLONE --python PYTHON [--cache DIR]

Each case validates twice in the same run: cold (an empty PTX cache, or the one
``--cache`` names) and warm (nothing changed).  Printed per run: the ``ptx``
and ``others`` stages' own durations as validate recorded them; then the warm
``others`` stage over the warm ``ptx`` stage (the ratio, both measured here) and
whether the warm ``others`` stage stays within 2 s.

* the mini upstream (no argument): :mod:`contrib.demo.upstream` patched as the
  shipped series patches flashinfer (the gate widened, the ``< 1200`` bounds
  dropped), through the pipeline itself;
* ``--flashinfer``: the shipped ``flashinfer/sm120-trtllm-comm`` at its newest
  version on ``release-v0.6.16``, through ``contrib validate --json`` in a temporary workspace whose
  upstream is CLONE.  ``--python`` names an interpreter with flashinfer-python and
  apache-tvm-ffi installed (their headers); ``--cache`` keeps the contrib cache
  between invocations (a cold run takes several minutes of nvcc).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TARGET = "flashinfer/sm120-trtllm-comm"
LINE = "release-v0.6.16"  # the line whose series compiles (on main only a test is left)
WARM_LIMIT = 2.0  # seconds the warm others stage may add


def _mini(root: Path) -> list[dict[str, dict[str, Any]]]:
    """Two pipeline runs of the mini upstream's full fix: each run's stages by name."""
    from contrib.analysis.tree import DictTree
    from contrib.arch import parse_arch
    from contrib.demo import upstream
    from contrib.validate.stages import Inputs, run_pipeline

    repo = root / "mini"
    repo.mkdir()
    _git(repo, "init", "-q")
    for variant in ("base", "full-fix"):
        for path, text in upstream.files(variant).items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text, encoding="utf-8")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=bench", "-c", "user.email=b@example.com", "commit", "-qm", variant)
    diff = _git(repo, "diff", "HEAD~1", "HEAD")
    runs = []
    for n in range(2):
        inputs = Inputs(parse_arch("sm_120a"), DictTree(upstream.files("base")),
                        DictTree(upstream.files("full-fix")), diff, "applied",
                        workdir=root / f"work-{n}", gpus=None)
        runs.append({r.name: {"status": str(r.status), "reason": r.reason,
                              "duration_s": r.duration, "details": r.details}
                     for r in run_pipeline(inputs)})
    return runs


def _git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout


def _flashinfer(root: Path, clone: Path, python: str, env: dict[str, str]) -> list[dict[str, dict[str, Any]]]:
    """Two ``contrib validate --json`` runs of the shipped patchset: each run's stages."""
    ws = root / "ws"
    (ws / "patchsets" / "flashinfer").mkdir(parents=True)
    shutil.copytree(REPO / "patchsets" / TARGET, ws / "patchsets" / TARGET)
    (ws / "contrib.toml").write_text(f'[upstreams.flashinfer]\nurl = "{clone}"\nbranch = "main"\n'
                                     f'python = "{python}"\n', encoding="utf-8")
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "contrib", "validate", f"{TARGET}@{LINE}", "--json"],
                              cwd=ws, env=env, capture_output=True, text=True)
        runs.append({s["name"]: s for s in _stages(json.loads(done.stdout or "{}"))})
        if not runs[-1]:
            print(done.stderr[-2000:], file=sys.stderr)
    return runs


def _stages(doc: object) -> list[dict[str, Any]]:
    """The stages of the first run in validate's JSON (a list of dicts with a name and status)."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, list) and item and all(isinstance(s, dict) and "status" in s
                                                   and "name" in s for s in item):
            return item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return []


def _report(runs: list[dict[str, dict[str, Any]]], label: str) -> None:
    for name, run in zip(("cold", "warm"), runs, strict=True):
        for stage in ("ptx", "others"):
            got = run.get(stage, {})
            details = got.get("details") or {}
            print(f"{label} {name:4} {stage:6} {float(got.get('duration_s') or 0):8.2f} s  "
                  f"{got.get('status')}: {got.get('reason')}  (compiled {details.get('compiled')},"
                  f" cached {details.get('cached')})")
    warm = runs[-1]
    others = float(warm.get("others", {}).get("duration_s") or 0)
    ptx = float(warm.get("ptx", {}).get("duration_s") or 0)
    ratio = f"{others / ptx:.2f}" if ptx else "n/a"
    print(f"{label} warm others / warm ptx = {ratio} ({others:.2f} s / {ptx:.2f} s); "
          f"warm others <= {WARM_LIMIT:g} s: {'yes' if others <= WARM_LIMIT else 'NO'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flashinfer", type=Path, help="a local flashinfer clone (the mirror)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with flashinfer-python and apache-tvm-ffi installed")
    parser.add_argument("--cache", type=Path, help="the contrib cache to use (default: a new one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="others-bench-") as tmp:
        root = Path(tmp)
        cache = args.cache.resolve() if args.cache else root / "cache"
        os.environ["CONTRIB_CACHE"] = str(cache)
        started = time.monotonic()
        if args.flashinfer is None:
            _report(_mini(root), "mini")
        else:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
            _report(_flashinfer(root, args.flashinfer.resolve(), args.python, env), "flashinfer")
        print(f"total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
