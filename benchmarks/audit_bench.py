"""How long `contrib audit` takes on a synthetic upstream, first run and repeat.

    python benchmarks/audit_bench.py [--modules 600] [--lines 300] [--compile]
    python benchmarks/audit_bench.py --gates 4000
    python benchmarks/audit_bench.py --upstream ~/mirrors/sglang.git --rev main [--baseline main]
        [--below ~/mirrors/flashinfer.git]

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

``--upstream GIT_DIR --rev REV [--baseline REF] [--below GIT_DIR]`` times the audit of a real upstream
(a bare mirror works) through the engine, first (a fresh result cache) and repeat,
wall and CPU (user + system, workers included) with the load average, for this
checkout and for ``REF`` of this repository (default ``main``) checked out as a
temporary ``git worktree`` and imported instead: the ratios are against the
previous code, measured in the same run on the same machine, and the gates of
both are compared (identical, order included, or the count of differences).
On a shared machine read CPU / cores as the idle-machine wall.  With ``--below``, each
audit is linked to that upstream at the version REV pins (sglang on flashinfer: the
stack below, as ``contrib audit`` does in a workspace carrying both), the lower
upstream's audit and the link timed with it (goal: 90 s for sglang's first).

``--compile`` (needs nvcc) then runs ``contrib audit --compile`` twice: cold
(every unit behind an excluding gate compiled, one nvcc per core) and warm
(the PTX cache has every unit: no nvcc compile at all).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from contrib.git.repo import Git  # noqa: E402
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
                   for n in range(count))
    return UTILS + "\n\n" + body


def time_one_file(count: int) -> tuple[float, float, float, int]:
    """Wall and CPU seconds to audit, and seconds to parse, a generated file of
    ``count`` gates; the gates found."""
    from contrib.arch import parse_arch
    from contrib.audit.finding.gates import gates_of_file

    text = many_gates(count)
    started = time.monotonic()
    ast.parse(text)
    parse = time.monotonic() - started
    started, cpu = time.monotonic(), time.process_time()
    found = gates_of_file("pkg/generated.py", text, parse_arch("sm_120a"))
    return time.monotonic() - started, time.process_time() - cpu, parse, len(found)


def gates_report(count: int) -> None:
    """Time linear in the gates of a file: ``count`` gates against ``count // 4``."""
    small, small_cpu, small_parse, small_found = time_one_file(count // 4)
    large, large_cpu, large_parse, large_found = time_one_file(count)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"one file, {small_found} gates: {small:6.2f} s wall, {small_cpu:6.2f} s CPU "
          f"(ast.parse {small_parse:5.2f} s)")
    print(f"one file, {large_found} gates: {large:6.2f} s wall, {large_cpu:6.2f} s CPU "
          f"(ast.parse {large_parse:5.2f} s); CPU {large_cpu / small_cpu:4.1f} x the "
          f"{small_found}-gate file (4.0 = linear)")


AUDIT_ONE = """
import hashlib, json, os, resource, sys, time
import contrib
from contrib.arch import parse_arch
from contrib.audit.engine import audit_commit
from contrib.git.repo import Git

def below(git, commit, done, lower_dir):
    # link the audit to the lower upstream at the version it pins: its mismatches
    from contrib.analysis.tree import GitTree
    try:  # the audit's stages in folders; the code before had them side by side
        from contrib.audit.stack.pins import find_pin, package_name, tag_of
        from contrib.audit.stack import link as stack
    except ImportError:
        from contrib.audit.pins import find_pin, package_name, tag_of
        from contrib.audit import stack
    lower = Git(lower_dir)
    package = package_name(GitTree(lower, lower.run("rev-parse", "HEAD").strip()))
    tree = GitTree(git, commit)
    pin = find_pin(tree, package)
    tag, at = tag_of(lower, pin.version)
    arch = parse_arch("sm_120a")
    if hasattr(stack, "audit_and_link"):
        return stack.audit_and_link(done.gates, tree, done.tree, lower, "lower", tag, at,
                                    arch).mismatches
    lower_audit = audit_commit(lower, at, arch)  # the code before the link overlapped
    return stack.link_cached(done.gates, tree, done.tree, stack.Lower(
        "lower", tag, at, lower_audit, GitTree(lower, at)), arch)

def main():
    git = Git(sys.argv[1])
    commit = git.run("rev-parse", sys.argv[2]).strip()
    started = time.monotonic()
    done = audit_commit(git, commit, parse_arch("sm_120a"))
    mismatches = below(git, commit, done, sys.argv[3]) if len(sys.argv) > 3 else []
    wall = time.monotonic() - started
    try:  # the one serialiser; the code before wrote a gate by its own to_dict()
        from contrib.audit.serial import gate_json
    except ImportError:
        gate_json = lambda g: g.to_dict()
    gates = json.dumps([gate_json(g) for g in done.gates] + done.notes + mismatches)
    print(json.dumps({"wall": wall, "gates": len(done.gates), "cached": done.cached,
                      "code": os.path.dirname(os.path.dirname(contrib.__file__)),
                      "sha": hashlib.sha256(gates.encode()).hexdigest(), "json": gates}))

if __name__ == "__main__":
    main()
"""


def audit_once(code: Path, upstream: str, rev: str, cache: Path,
               lower: str | None = None) -> dict[str, object]:
    """One audit in a fresh interpreter importing contrib from ``code`` (with ``lower``,
    linked to that upstream at the version ``rev`` pins): its result, wall seconds and
    CPU seconds (the process and its workers)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", AUDIT_ONE, upstream, rev,
                           *([lower] if lower else [])], capture_output=True,
                          text=True, cwd=code, env={**os.environ, "PYTHONPATH": str(code),
                                                    "CONTRIB_CACHE": str(cache)})
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"audit with {code} failed: {done.stderr.strip()[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(str(result["code"])).resolve() != code.resolve():  # an editable install won
        raise SystemExit(f"the audit imported contrib from {result['code']}, not {code}")
    result["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["process_wall"] = wall
    return result


def upstream_report(upstream: str, rev: str, baseline: str, lower: str | None = None) -> None:
    """First audit and repeat of ``rev``, with this checkout and with ``baseline``; with
    ``lower``, each linked to that upstream at the version ``rev`` pins (the stack below)."""
    git = Git(REPO)
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        old = Path(tmp) / "baseline"
        git.run("worktree", "add", "--detach", str(old), baseline)
        try:
            rows = {name: _first_and_repeat(code, upstream, rev, Path(tmp) / name, lower)
                    for name, code in (("baseline", old), ("this", REPO))}
        finally:
            git.run("worktree", "remove", "--force", str(old))
    print(f"{upstream} at {rev}" + (f" with {lower} below" if lower else "")
          + f"; {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, (first, repeat) in rows.items():
        print(f"{name:>8}: first {first['wall']:6.1f} s wall, {first['cpu']:6.1f} s CPU "
              f"({first['gates']} gates); repeat {repeat['wall']:5.2f} s in the engine, "
              f"{repeat['process_wall']:5.2f} s with Python's start")
    (base, _), (this, again) = rows["baseline"], rows["this"]
    print(f"   ratio: first wall {this['wall'] / base['wall']:4.2f}, CPU "  # type: ignore[operator]
          f"{this['cpu'] / base['cpu']:4.2f} x baseline; repeat / first "  # type: ignore[operator]
          f"{again['wall'] / this['wall']:5.3f}")  # type: ignore[operator]
    print("   gates: " + ("identical to the baseline's, order included" if base["sha"] == this["sha"]
                         else f"DIFFER: {_differences(base, this)}"))


def _first_and_repeat(code: Path, upstream: str, rev: str, cache: Path,
                      lower: str | None) -> tuple[dict[str, object], dict[str, object]]:
    first = audit_once(code, upstream, rev, cache, lower)
    return first, audit_once(code, upstream, rev, cache, lower)


def _differences(base: dict[str, object], this: dict[str, object]) -> str:
    old, new = json.loads(str(base["json"])), json.loads(str(this["json"]))
    changed = sum(a != b for a, b in zip(old, new, strict=False)) + abs(len(old) - len(new))
    return f"{changed} of {len(old)} entries (gates and notes) changed"


def module(n: int, lines: int) -> str:
    """One runtime module: a JIT gate, a predicate gate, and filler code."""
    head = ("from pkg.utils import is_sm100_supported\n\n\n"
            f"def gen_m{n}_module():\n"
            f"    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])\n"
            f"    return build('m{n}', ['m{n}.cu'], flags)\n\n\n"
            f"def run_{n}(x):\n    out = x\n    if is_sm100_supported() and x:\n"
            f"        out = get_m{n}_module()(x)\n    return out\n\n\n")
    filler = "".join(f"def f{n}_{i}(a, b):\n    return a * {i} + b\n\n\n"
                     for i in range(max(1, lines // 4)))
    return head + filler


def build(root: Path, modules: int, lines: int) -> Repo:
    files: dict[str, str] = {"pkg/__init__.py": "", "pkg/utils.py": UTILS}
    for n in range(modules):
        files[f"pkg/mods/m{n}.py"] = module(n, lines)
        files[f"tests/test_m{n}.py"] = ("import pytest\n\n\n@pytest.mark.skipif(not "
                                        "__import__('torch').cuda.get_device_capability()[0] "
                                        f"== 9, reason='x')\ndef test_{n}():\n"
                                        "    assert True\n")
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
                          capture_output=True, text=True)
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
    parser.add_argument("--upstream", help="a git directory of a real upstream (bare or not)")
    parser.add_argument("--rev", default="HEAD", help="the commit of --upstream to audit")
    parser.add_argument("--below", metavar="GIT_DIR",
                        help="with --upstream: link to this upstream at the version --rev pins")
    parser.add_argument("--baseline", default="main",
                        help="the commit of this repository to compare with (default main)")
    args = parser.parse_args()
    if args.upstream:
        upstream_report(args.upstream, args.rev, args.baseline, args.below)
        return
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
