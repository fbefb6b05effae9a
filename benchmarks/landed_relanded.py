"""The landed rule on a real PR that landed, was reverted and relanded: what it finds.

Takes the diff of one upstream commit ``PR`` (the first landing, as a patch made
at its parent) and measures it at ``--at`` (default: the upstream's main) with
:func:`contrib.carry.landed.measure`, as ``contrib sync`` would for a patchset
carrying that change: the share present, the commits whose own diffs brought
the lines, the landing commit the rule names, the later commits that changed
its files, and the time the look took.  flashinfer's SM107 support: #4122
(290c09186), reverted by #4171, relanded as #4280 (5b1af9724) and changed since:

    python benchmarks/landed_relanded.py /work/.mirror/flashinfer-ai+flashinfer/repo 290c09186
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contrib.carry.landed import measure
from contrib.git.repo import Git


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", type=Path, help="a bare clone of the upstream")
    parser.add_argument("pr", help="the commit of the first landing")
    parser.add_argument("--at", default="main", help="where to look (default: main)")
    args = parser.parse_args()
    git = Git(args.repo)
    pr = git.rev_parse(args.pr)
    base, target = git.rev_parse(f"{pr}^"), git.rev_parse(args.at)
    diff = subprocess.run(["git", "--git-dir", str(args.repo), "diff", "--no-color",
                           "--no-ext-diff", base, pr], capture_output=True, text=True,
                          check=True).stdout
    started = time.monotonic()
    ev = measure(git, diff, "pr.patch", base, target)
    took = time.monotonic() - started
    print(f"{ev.summary()}; {ev.present}/{ev.lines} added lines present, "
          f"{ev.gone}/{ev.removed} removed lines gone; look took {took:.1f} s")
    for sha, count in ev.by:
        print(f"  brought {count:5d}: {sha[:10]} {git.run('log', '-1', '--format=%s', sha)}")
    print(f"landed_by: {ev.landed_by[:10] if ev.landed_by else None} ({ev.why_not() or 'the rule holds'})")
    print(f"changed_by: {', '.join(c[:10] for c in ev.changed_by) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
