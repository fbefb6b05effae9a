"""Carry every single-author PR branch of a real fork onto its main, with contrib and git.

For each branch of the bare clone ``REPO`` (other than ``--main``) that has one
author and no merge commit since its merge base with main, this makes a
patchset with ``contrib new UPSTREAM NAME --from-branch REPO BRANCH``, times
``contrib sync`` of it onto main, and compares the outcome with a plain
``git rebase main`` of the branch in a scratch clone:

* ``rebased`` -- the tree of contrib's carried series equals git's rebased tree;
* ``conflict`` -- both stop (contrib names the breaking commit);
* ``upstreamed`` / ``partially-upstreamed`` -- contrib found (some of) the
  patches upstream; the evidence (landed by, share) is printed.

Everything is written under a fresh temporary folder (workspace, cache, clone);
nothing is ever committed.  Not part of CI: it needs a real fork's clone.

    python benchmarks/fork_trial.py /path/to/fork.git [--main main] [--json out.json] \
        [--baseline /tmp/contrib-main] [--branch NAME]   # e.g. `git archive main | tar -x -C /tmp/contrib-main`
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GIT_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {
    "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C", "GIT_AUTHOR_NAME": "Trial",
    "GIT_AUTHOR_EMAIL": "trial@example.com", "GIT_COMMITTER_NAME": "Trial",
    "GIT_COMMITTER_EMAIL": "trial@example.com"}


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, text=True,
                          capture_output=True, check=False)
    if check and proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}:\n{proc.stderr}")
    return proc.stdout.strip()


def candidates(repo: Path, main: str, only: list[str]) -> list[tuple[str, int, int]]:
    """(branch, commits, behind) of each branch with one author and no merges, or of
    each branch of ``only`` (whoever wrote it)."""
    out = []
    for branch in only or git(repo, "for-each-ref", "--format=%(refname:short)",
                              "refs/heads").split():
        if branch == main:
            continue
        base = git(repo, "merge-base", main, branch, check=False)
        if not base:
            continue
        authors = set(git(repo, "log", "--format=%ae", f"{base}..{branch}").split())
        merges = git(repo, "rev-list", "--merges", f"{base}..{branch}")
        commits = len(git(repo, "rev-list", f"{base}..{branch}").split())
        if (only or len(authors) == 1 and not merges) and commits:
            behind = len(git(repo, "rev-list", f"{base}..{main}").split())
            out.append((branch, commits, behind))
    return out


def contrib(ws: Path, env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "contrib", *args, "--json"], cwd=ws, env=env,
                          text=True, capture_output=True, check=False)
    took = time.perf_counter() - start
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        doc = {"raw": proc.stdout[-500:], "stderr": proc.stderr[-500:]}
    if proc.returncode not in (0, 1):
        doc.setdefault("stderr", proc.stderr[-500:])
    return proc.returncode, doc, took


def rebase(clone: Path, branch: str, main: str) -> tuple[str, str | None]:
    """git's outcome: ("rebased", tree) or ("conflict", None)."""
    git(clone, "checkout", "-q", "-f", "-B", "trial", f"origin/{branch}")
    proc = subprocess.run(["git", "rebase", "-q", f"origin/{main}"], cwd=clone, env=GIT_ENV,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        git(clone, "rebase", "--abort", check=False)
        return "conflict", None
    return "rebased", git(clone, "rev-parse", "HEAD^{tree}")


def describe(result: dict[str, Any]) -> str:
    state = result.get("result", "?")
    if state == "conflict" and result.get("conflict"):
        c = result["conflict"]
        text = f"{c.get('patch', '?')[:40]} breaks at {c['commit']['sha'][:10]}"
        evidence = c.get("evidence")
        if evidence and evidence.get("share"):
            text += f"; {round(evidence['share'] * 100)}% of its lines upstream"
        return text
    landed = [u for u in result.get("upstreamed", []) if u.get("commit")]
    if landed:
        u = landed[0]
        text = f"landed by {u['commit']['sha'][:10]}"
        if u.get("share") is not None:
            text += f" ({round(u['share'] * 100)}%)"
        if u.get("changed_by"):
            text += f", then changed by {', '.join(c['sha'][:10] for c in u['changed_by'])}"
        return text
    return result.get("error") or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--main", default="main")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    parser.add_argument("--branch", action="append", default=[],
                        help="this branch, whoever wrote it (repeatable; default: every "
                             "single-author branch without merges)")
    parser.add_argument("--baseline", type=Path,
                        help="another contrib source tree (e.g. `git archive` of main): each "
                             "branch is also synced with it, in turn, and both times printed")
    args = parser.parse_args()
    repo = args.repo.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="contrib-fork-trial-"))
    ws, clone = tmp / "ws", tmp / "clone"
    ws.mkdir()
    (ws / "contrib.toml").write_text(
        f'[upstreams.sglang]\nurl = "{repo}"\nbranch = "{args.main}"\n')
    env = os.environ | {"CONTRIB_CACHE": str(tmp / "cache"), "PYTHONPATH": str(ROOT),
                        "NO_COLOR": "1"}
    old_ws = tmp / "baseline-ws"
    if args.baseline:
        old_ws.mkdir()
        (old_ws / "contrib.toml").write_text((ws / "contrib.toml").read_text())
    old_env = env | {"CONTRIB_CACHE": str(tmp / "baseline-cache"),
                     "PYTHONPATH": str((args.baseline or ROOT).resolve())}
    git(tmp, "clone", "-q", "--no-checkout", str(repo), str(clone))
    main_tip = git(repo, "rev-parse", args.main)
    rows = []
    for branch, commits, behind in candidates(repo, args.main, args.branch):
        name = branch.replace("/", "-").lower()[:60]
        rc, made, _ = contrib(ws, env, "new", "sglang", name, "--from-branch", str(repo), branch)
        if rc != 0:
            rows.append({"branch": branch, "error": made})
            continue
        before = None
        if args.baseline:
            contrib(old_ws, old_env, "new", "sglang", name, "--from-branch", str(repo), branch)
        # The two take turns going first: the second finds the upstream's pages warm.
        first = len(rows) % 2 == 0
        if not first:
            rc, doc, took = contrib(ws, env, "sync", f"sglang/{name}")
        if args.baseline:
            old = contrib(old_ws, old_env, "sync", f"sglang/{name}")
            before = ((old[1].get("results") or [{}])[0].get("result"), round(old[2], 2))
        if first:
            rc, doc, took = contrib(ws, env, "sync", f"sglang/{name}")
        result = (doc.get("results") or [{}])[0]
        git_state, git_tree = rebase(clone, branch, args.main)
        same = None
        if result.get("version"):
            patches = sorted((ws / "patchsets" / "sglang" / name / result["version"]).glob("*.patch"))
            git(clone, "checkout", "-q", "-f", "-B", "carried", main_tip)
            if patches:
                git(clone, "am", "-q", "--3way", *map(str, patches), check=False)
            same = git(clone, "rev-parse", "HEAD^{tree}") == git_tree
        rows.append({"branch": branch, "commits": commits, "behind": behind,
                     "contrib": result.get("result"), "git": git_state, "same_tree": same,
                     "seconds": round(took, 2), "detail": describe(result),
                     "baseline": before})
        was = f" (was {before[0]}, {before[1]:.2f}s)" if before else ""
        print(f"{branch:55} {commits:3} {behind:5} {result.get('result', '?'):21} "
              f"{git_state:9} {'' if same is None else ('same' if same else 'DIFF'):5} "
              f"{took:5.2f}s{was}  {describe(result)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"workspace and cache left in {tmp}")


if __name__ == "__main__":
    main()
