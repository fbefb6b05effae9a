"""What the landed-then-changed look costs a real sync: ``plan_sync`` with and without it.

For each single-author, merge-free branch of a real fork's bare clone ``REPO``
(the same branches ``fork_trial.py`` carries), the branch's commits since its
merge base with ``--main`` are made into patches (``git format-patch``) and
carried onto main's tip in-process by :func:`contrib.carry.plan.plan_sync`,
once as ``contrib sync`` does (``landed_share`` at its default) and once with
the look skipped (``landed_share=None``), taking turns, ``--repeat`` times.
Printed per branch: both medians, their ratio, and the outcome of each; then
the ratio of the totals.  The whole-process ``fork_trial.py`` figures are
dominated by checking out the conflict worktree (7,000 files in sglang), which
both sides pay and which swings by seconds on a busy machine; this isolates
what the look adds.

Objects written while carrying go to a ``--shared`` scratch clone under a
temporary folder, never into ``REPO``.

    python benchmarks/landed_cost.py /path/to/fork.git [--main main] [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fork_trial import GIT_ENV, candidates  # noqa: E402

from contrib.carry.plan import plan_sync  # noqa: E402
from contrib.carry.series import split_mail  # noqa: E402
from contrib.git.repo import Git, Sha  # noqa: E402


def patches_of(git: Git, repo: Path, base: str, branch: str, folder: Path) -> list:
    folder.mkdir(parents=True)
    subprocess.run(["git", "format-patch", "-q", "-o", str(folder), f"{base}..{branch}"],
                   cwd=repo, env=GIT_ENV, check=True)
    return [split_mail(git, f.name, f.read_bytes()) for f in sorted(folder.glob("*.patch"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--main", default="main")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    repo = args.repo.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="contrib-landed-cost-"))
    try:
        scratch = tmp / "scratch.git"
        subprocess.run(["git", "clone", "-q", "--bare", "--shared", str(repo), str(scratch)],
                       env=GIT_ENV, check=True)
        target = Sha(Git(scratch).run("rev-parse", args.main))
        totals = {"on": 0.0, "off": 0.0}
        print(f"{'branch':50} {'off s':>6} {'on s':>6} {'ratio':>5}  outcome (on / off)")
        for branch, _, _ in candidates(repo, args.main):
            base = Sha(Git(scratch).run("merge-base", args.main, branch))
            patches = patches_of(Git(scratch), repo, base, branch,
                                 tmp / branch.replace("/", "-"))
            times: dict[str, list[float]] = {"on": [], "off": []}
            results: dict[str, str] = {}
            for turn in range(args.repeat):
                for side in ("on", "off") if turn % 2 == 0 else ("off", "on"):
                    git = Git(scratch)  # a fresh one: no reader or cache carried over
                    start = time.perf_counter()
                    plan = plan_sync(git, patches, base, target,
                                     **({} if side == "on" else {"landed_share": None}))
                    times[side].append(time.perf_counter() - start)
                    results[side] = str(plan.result.value if hasattr(plan.result, "value")
                                        else plan.result)
            on, off = statistics.median(times["on"]), statistics.median(times["off"])
            totals["on"] += on
            totals["off"] += off
            print(f"{branch[:50]:50} {off:6.2f} {on:6.2f} {on / off:5.2f}  "
                  f"{results['on']} / {results['off']}", flush=True)
        print(f"{'total':50} {totals['off']:6.2f} {totals['on']:6.2f} "
              f"{totals['on'] / totals['off']:5.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
