"""How long `contrib audit` takes on a synthetic upstream, first run and repeat.

    python benchmarks/audit_bench.py [--modules 600] [--lines 300] [--compile]
    python benchmarks/audit_bench.py --gates 4000

Builds a flashinfer-shaped upstream in a temporary folder (``--modules``
Python files of ``--lines`` lines each, one JIT gate and one predicate gate in
each, a CUDA unit with a guarded kernel header behind every tenth JIT gate, and
as many test files), points a scratch workspace and ``CONTRIB_CACHE`` at it,
and runs ``contrib audit`` twice at the same commit.

Printed: the first run (nothing cached), the repeat (the result cache keyed by
tree sha and contrib version), and the baseline measured in the same run:
``python -c "import ast"`` over every file (parsing alone), so the first-run
figure reads as a ratio to the cost of reading the tree's Python once.
Targets: repeat <= 3 s, and repeat / first well under 0.2.

``--gates N`` times the gate finder alone on one generated file of N gates and
of N/4 (target: 4,000 gates <= 5 s, and a ratio near 4: linear), against
``ast.parse`` of the same text.

``--compile`` (needs nvcc) then runs ``contrib audit --compile`` twice: cold
(every unit behind an excluding gate compiled, one nvcc per core) and warm
(the PTX cache has every unit: no nvcc compile at all).
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.gitutil import Repo  # noqa: E402

GUARDED = """#pragma once
__global__ void k{n}(float* out) {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1200
  out[threadIdx.x] = 1.0f;
#endif
}}
"""


UTILS = """import torch


def is_sm100_supported(device=None):
    major, _ = torch.cuda.get_device_capability(device)
    return major == 10 and torch.version.cuda >= "12.8"
"""


def many_gates(count: int) -> str:
    """One generated file with ``count`` gates, each in its own function (one pass of
    the module must stay linear in them)."""
    body = "".join(f"def f{n}(x):\n    if is_sm100_supported() and x > {n}:\n"
                   f"        return fused_{n % 7}(x)\n    return x\n\n\n"
                   for n in range(count))  # fmt: skip
    return UTILS + "\n\n" + body


def time_one_file(count: int) -> tuple[float, float, int]:
    """Seconds to audit and to parse a generated file of ``count`` gates; gates found."""
    from contrib.arch import parse_arch
    from contrib.audit.find import gates_of_file

    text = many_gates(count)
    started = time.monotonic()
    ast.parse(text)
    parse = time.monotonic() - started
    started = time.monotonic()
    found = gates_of_file("pkg/generated.py", text, parse_arch("sm_120a"))
    return time.monotonic() - started, parse, len(found)


def gates_report(count: int) -> None:
    """Time linear in the gates of a file: ``count`` gates against ``count // 4``."""
    small, small_parse, small_found = time_one_file(count // 4)
    large, large_parse, large_found = time_one_file(count)
    print(f"one file, {small_found} gates: {small:6.2f} s (ast.parse {small_parse:5.2f} s)")
    print(f"one file, {large_found} gates: {large:6.2f} s (ast.parse {large_parse:5.2f} s); "
          f"{large / small:4.1f} x the {small_found}-gate file (4.0 = linear)")


def module(n: int, lines: int) -> str:
    """One runtime module: a JIT gate, a predicate gate, and filler code."""
    head = ("from pkg.utils import is_sm100_supported\n\n\n"
            f"def gen_m{n}_module():\n"
            f"    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])\n"
            f"    return build('m{n}', ['m{n}.cu'], flags)\n\n\n"
            f"def run_{n}(x):\n    out = x\n    if is_sm100_supported() and x:\n"
            f"        out = get_m{n}_module()(x)\n    return out\n\n\n")  # fmt: skip
    filler = "".join(f"def f{n}_{i}(a, b):\n    return a * {i} + b\n\n\n"
                     for i in range(max(1, lines // 4)))  # fmt: skip
    return head + filler


def build(root: Path, modules: int, lines: int) -> Repo:
    files: dict[str, str] = {"pkg/__init__.py": "", "pkg/utils.py": UTILS}
    for n in range(modules):
        files[f"pkg/mods/m{n}.py"] = module(n, lines)
        files[f"tests/test_m{n}.py"] = ("import pytest\n\n\n@pytest.mark.skipif(not "
                                        "__import__('torch').cuda.get_device_capability()[0] "
                                        f"== 9, reason='x')\ndef test_{n}():\n"
                                        "    assert True\n")  # fmt: skip
        header = f"m{n}.cuh" if n % 10 == 0 else None
        files[f"csrc/m{n}.cu"] = (f'#include "{header}"\n' if header else
                                  f"__global__ void k{n}(float* o) {{ o[0] = 1.0f; }}\n")
        if header:
            files[f"csrc/{header}"] = GUARDED.format(n=n)
    repo = Repo(root / "upstream")
    repo.commit("synthetic upstream", files)
    return repo


def run(workspace: Path, env: dict[str, str], *extra: str) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "contrib", "audit", "up", "--arch", "sm_120a",
                           "--no-fetch", "--json", *extra], cwd=workspace, env=env,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"contrib audit failed: {done.stderr.strip()}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=600)
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--compile", action="store_true", help="also time audit --compile")
    parser.add_argument("--gates", type=int, default=0,
                        help="only time one generated file of this many gates (e.g. 4000)")
    args = parser.parse_args()
    if args.gates:
        gates_report(args.gates)
        return
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        root = Path(tmp)
        repo = build(root, args.modules, args.lines)
        workspace = root / "ws"
        workspace.mkdir()
        (workspace / "contrib.toml").write_text(
            f'[upstreams.up]\nurl = "{repo.path}"\nbranch = "main"\n', encoding="utf-8")
        env = {**os.environ, "CONTRIB_CACHE": str(root / "cache"), "PYTHONPATH": str(REPO)}
        subprocess.run([sys.executable, "-m", "contrib", "status"], cwd=workspace, env=env,
                       capture_output=True)  # makes the upstream cache: cloning is not timed
        started = time.monotonic()
        for path in sorted(repo.path.rglob("*.py")):
            ast.parse(path.read_text(encoding="utf-8"))
        baseline = time.monotonic() - started
        first = run(workspace, env)
        repeat = run(workspace, env)
        built = (run(workspace, env, "--compile"), run(workspace, env, "--compile")) \
            if args.compile else None
    print(f"synthetic upstream: {args.modules} modules x {args.lines} lines, "
          f"{args.modules} test files, {os.cpu_count()} cores")
    print(f"baseline (ast.parse of every .py): {baseline:6.2f} s")
    print(f"first run:                          {first:6.2f} s  ({first / baseline:5.1f} x baseline)")
    print(f"repeat run (cached):                {repeat:6.2f} s  ({repeat / first:5.3f} x first)")
    if built is not None:
        print(f"--compile, cold ({args.modules} units):   {built[0]:6.2f} s")
        print(f"--compile, warm (PTX cache):        {built[1]:6.2f} s")


if __name__ == "__main__":
    main()
