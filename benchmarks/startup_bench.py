"""Benchmark how fast contrib starts, against the interpreter and git, in one run.

Prints, each the median of ``--repeat`` runs measured in this run (the commands
taking turns, one run of each per round):

* ``contrib --version`` vs the bare interpreter start (target <= 2.5x);
* ``contrib status --no-fetch`` on a workspace of ``--patchsets`` (50)
  patchsets made against different upstream commits (target <= 0.4 s);
* a no-op ``contrib sync`` (every patchset already at the tip) vs the bare
  interpreter start plus the one ``git fetch`` it needs, the same command on
  the same cache (target <= 4x), through contrib's one command path.

The last line says whether every target was met; a missed one makes the run exit 1,
so that a script or CI running the benchmark cannot pass it by.

contrib runs as an installed console script does: a launcher file like the one
pip writes, with bytecode cached (in a temporary ``PYTHONPYCACHEPREFIX``, after
one warm-up run), since an install compiles it once; a run that compiles
every module from source measures the compiler, not contrib.

    python benchmarks/startup_bench.py [--patchsets 50] [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EPOCH = 1_700_000_000
LAUNCHER = "import sys\nfrom contrib.__main__ import main\nsys.exit(main())\n"


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GIT_", "PYTHON")) and k not in ("CI",)}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env | {"GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C", "HOME": str(root / "home"),
                  "CONTRIB_CACHE": str(root / "cache"), "PYTHONPATH": path,
                  "PYTHONPYCACHEPREFIX": str(root / "pycache"),
                  "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
                  "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def git(cwd: Path, env: dict[str, str], *args: str, input: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, input=input, text=True,
                          capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}:\n{proc.stderr}")
    return proc.stdout.strip()


def _data(text: str) -> str:
    return f"data {len(text.encode())}\n{text}\n"


def _fast_import(count: int, files: int) -> str:
    """``count`` commits on main: the first adds ``files`` modules, each rewrites pkg/log.py."""
    out = []
    for n in range(count):
        stamp = f"{EPOCH + n * 60} +0000"
        changes = [f"M 100644 inline pkg/mod{i}.py\n{_data(f'VALUE = {i}')}"
                   for i in (range(files) if n == 0 else ())]
        changes.append(f"M 100644 inline pkg/log.py\n{_data(f'VALUE = {n}')}")
        out.append(f"commit refs/heads/main\nmark :{n + 1}\n"
                   f"author Bench <bench@example.com> {stamp}\n"
                   f"committer Bench <bench@example.com> {stamp}\n{_data(f'change {n}')}"
                   + (f"from :{n}\n" if n else "") + "".join(changes) + "\n")
    return "".join(out)


def build(root: Path, env: dict[str, str], patchsets: int) -> tuple[Path, Path]:
    """An upstream, and a workspace of ``patchsets`` one-patch patchsets at spread bases."""
    upstream = root / "upstream.git"
    git(root, env, "init", "-q", "--bare", "-b", "main", str(upstream))
    git(upstream, env, "fast-import", "--quiet", input=_fast_import(patchsets * 4, patchsets))
    history = git(upstream, env, "rev-list", "--reverse", "main").split()
    scratch = root / "scratch"
    git(root, env, "clone", "-q", str(upstream), str(scratch))
    ws = root / "ws"
    (ws / "patches").mkdir(parents=True)
    (ws / "contrib.toml").write_text(f'[upstreams.up]\nurl = "{upstream}"\nbranch = "main"\n')
    news = []
    for i in range(patchsets):
        base = history[i * 2]
        git(scratch, env, "checkout", "-q", "--detach", base)
        (scratch / f"pkg/mod{i}.py").write_text(f"VALUE = {i}\nPATCHED = True\n")
        git(scratch, env, "commit", "-qam", f"mod{i}: patched")
        patch = git(scratch, env, "format-patch", "-1", "-o", str(root / "p" / str(i)))
        news.append(["new", "up", f"p{i:02d}", "--base", base, "--patch", patch])
    code = ("import sys\nfrom contrib.cli import main\n"
            f"for args in {news!r}:\n    assert main(args) == 0, args\n")
    subprocess.run([sys.executable, "-c", code], cwd=ws, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    shutil.rmtree(ws / "patches")
    return upstream, ws


Run = tuple[list[str], Path, dict[str, str]]  # a command, where, with what environment


def _once(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


def timed(runs: dict[str, Run], repeat: int) -> dict[str, float]:
    """Median seconds of each run (each must succeed), after one warm-up round.

    The runs take turns, one of each per round, so that a machine that gets
    slower or faster during the benchmark moves every figure alike and the
    ratios between them hold.
    """
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for n in range(repeat + 1):
        for name, run in runs.items():
            elapsed = _once(*run)
            if n:
                samples[name].append(elapsed)
    return {name: statistics.median(values) for name, values in samples.items()}


def line(label: str, seconds: float, against: str = "") -> None:
    print(f"{label:46s} {seconds * 1000:8.1f} ms{against}")


class Verdicts:
    """Each target's figure against it, and the ones missed."""

    def __init__(self) -> None:
        self.count = 0
        self.missed: list[str] = []

    def __call__(self, label: str, ratio: float, target: float, unit: str = "x") -> str:
        self.count += 1
        met = ratio <= target
        if not met:
            self.missed.append(f"{label.strip()} {ratio:.2f}{unit} > {target:g}{unit}")
        return f"   {ratio:.2f}{unit} (target <= {target:g}{unit}: {'met' if met else 'MISSED'})"

    def summary(self) -> str:
        if not self.missed:
            return f"all {self.count} start-up targets met"
        return (f"MISSED {len(self.missed)} of {self.count} start-up targets: "
                + "; ".join(self.missed))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patchsets", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="contrib-startup-"))
    try:
        verdicts = bench(root, args.patchsets, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(verdicts.summary())
    return 1 if verdicts.missed else 0


def bench(root: Path, patchsets: int, repeat: int) -> Verdicts:
    (root / "home").mkdir()
    env = _env(root)
    t0 = time.perf_counter()
    _, ws = build(root, env, patchsets)
    synced = root / "synced"
    shutil.copytree(ws, synced, ignore=shutil.ignore_patterns(".contrib"))
    launcher = root / "contrib"
    launcher.write_text(LAUNCHER)
    contrib = [sys.executable, str(launcher)]
    subprocess.run([*contrib, "sync"], cwd=synced, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # every patchset to the tip: later syncs are no-ops
    [cache] = (root / "cache" / "upstreams").glob("up-*.git")
    print(f"{patchsets} patchsets on a {patchsets * 4}-commit upstream (built in "
          f"{time.perf_counter() - t0:.1f}s); {sys.version.split()[0]}; median of {repeat}")

    fetch_cmd = ["git", "-C", str(cache), "fetch", "--prune", "--tags", "--force", "origin"]
    parser_cmd = [sys.executable, "-c", "import sys; from contrib.cli import main; "
                  "sys.exit(main(['--version']))"]
    got = timed({
        "bare": ([sys.executable, "-c", "pass"], root, env),
        "version": ([*contrib, "--version"], root, env),
        "parser_version": (parser_cmd, root, env),
        "status": ([*contrib, "status", "--no-fetch"], ws, env),
        "fetch": (fetch_cmd, root, env),
        "noop": ([*contrib, "sync"], synced, env),
        "noop_one": ([*contrib, "sync", "up/p00"], synced, env),
    }, repeat)
    bare, version, parser_version, status = (got[k] for k in (
        "bare", "version", "parser_version", "status"))
    fetch, noop, noop_one = (got[k] for k in ("fetch", "noop", "noop_one"))

    verdict = Verdicts()
    line("bare interpreter (python -c pass)", bare)
    line("contrib --version", version, verdict("contrib --version", version / bare, 2.5))
    line("  the same through the full parser (click)", parser_version,
         f"   {parser_version / bare:.2f}x")
    label = f"contrib status --no-fetch ({patchsets} patchsets)"
    line(label, status, verdict(label, status, 0.4, " s"))
    line("git fetch (no-op, the one sync runs)", fetch)
    line("interpreter + git fetch", bare + fetch)
    label = f"no-op contrib sync ({patchsets} patchsets)"
    line(label, noop, verdict(label, noop / (bare + fetch), 4))
    label = "no-op contrib sync up/p00 (one patchset)"
    line(label, noop_one, verdict(label, noop_one / (bare + fetch), 4))
    return verdict


if __name__ == "__main__":
    sys.exit(main())
