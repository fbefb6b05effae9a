"""How close `contrib enable`'s drafts come to upstream's own gate-only openings.

    python benchmarks/enable_history.py --upstream flashinfer=/path/to/flashinfer.git
        [--arch sm_120a] [--limit 20] [--workspace /tmp/en-hist]

Mines the upstream's first-parent history for commits that open a gate to the
target's family (a ``supported_major_versions=[...]`` or
``supported_compute_capability([...])`` line, or a condition on ``is_smNN``
predicates, replaced in its hunk by one admitting the family) and change Python
only (gate-only: no device code moved).
For each, it runs ``contrib enable`` at the commit's parent on every gate line
upstream changed (``FILE:LINE`` at the parent) and compares:

* drafted: the draft was written (the audit reports a gate there, its form is one
  contrib widens, it is not needs-kernel-work);
* static stages: the draft's validate run passed apply, syntax and gates;
* same gates: the gate lines the draft changes are exactly the gate lines upstream
  changed (upstream's other edits, tests and docs, are not counted against it).

Printed: one line per opening, then the three counts over the openings found.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.workspace import run_contrib  # noqa: E402

_LIST_LINE = re.compile(r"supported_major_versions\s*=\s*\[|supported_compute_capability\(\s*\[")
_PREDICATE = re.compile(r"\b_*is_sm_?\d{2,3}\w*\b")
_GATE_LINE = re.compile(_LIST_LINE.pattern + r"|" + _PREDICATE.pattern)
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")
STATIC = ("apply", "syntax", "gates")


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", *args], check=True, text=True,
                          capture_output=True).stdout


def family(line: str, major: int) -> bool:
    """Whether an arch-list line admits ``major`` (``12`` or ``120``..``129``), or a
    predicate line names it (``is_sm120_supported``)."""
    if _LIST_LINE.search(line) and "[" in line:
        values = [int(v) for v in re.findall(r"\d+", line.split("[", 1)[1].split("]", 1)[0])]
        return any(v == major or v // 10 == major for v in values)
    return any(re.search(rf"sm_?{major}\d", p, re.I) for p in _PREDICATE.findall(line))


def removed_gate_lines(diff: str, major: int) -> set[tuple[str, int]]:
    """(file, old line) of each arch-list line without ``major`` that a hunk replaces
    with one admitting it (a hunk that only drops a version is no opening)."""
    found: set[tuple[str, int]] = set()
    path, old = "", 0
    hunk: list[tuple[str, int]] = []
    opens = False
    for line in diff.splitlines() + ["@@ -0 +0 @@"]:
        if line.startswith("--- "):
            path = line[6:] if line.startswith("--- a/") else ""
        elif (m := _HUNK.match(line)) is not None:
            found |= set(hunk) if opens else set()
            hunk, opens, old = [], False, int(m[1])
        elif line.startswith("+") and not line.startswith("+++"):
            opens = opens or bool(_GATE_LINE.search(line) and family(line, major))
        elif line.startswith("-") and not line.startswith("---"):
            if _GATE_LINE.search(line) and not family(line, major) and not line[1:].lstrip(
                    ).startswith(("from ", "import ")):
                hunk.append((path, old))
            old += 1
        else:
            old += 1
    return found


def openings(repo: str, branch: str, major: int, limit: int) -> list[tuple[str, set[tuple[str, int]]]]:
    """Gate-only openings: (commit, the gate lines it opened at its parent)."""
    shas = git(repo, "log", "--first-parent", "--format=%H", branch, "-G",
               rf"supported_major_versions|supported_compute_capability|is_sm_?{major}",
               "--", "*.py").split()
    out = []
    for sha in shas:
        files = git(repo, "diff", "--name-only", f"{sha}^", sha).split()
        if any(not f.endswith(".py") for f in files):
            continue
        diff = git(repo, "diff", "-U0", f"{sha}^", sha, "--", "*.py")
        lines = removed_gate_lines(diff, major)
        if lines:
            out.append((sha, lines))
        if len(out) >= limit:
            break
    return out


def draft(ws: Path, name: str, sha: str, lines: set[tuple[str, int]],
          arch: str) -> dict[str, object]:
    specs = [f"{path}:{line}" for path, line in sorted(lines)]
    while True:  # a line the audit reports no gate at is left out, and said so
        result = run_contrib("enable", name, "--arch", arch, "--at", f"{sha}^", *specs,
                             "--name", f"h-{sha[:10]}", "--no-fetch", "--json", cwd=ws)
        bad = result.err.strip().removeprefix("contrib: error: ").split(":", 2)
        spec = ":".join(bad[:2])
        if result.code != 2 or spec not in specs or len(specs) == 1:
            break
        specs.remove(spec)
    if result.code == 2 or not result.out:
        return {"drafted": False, "why": result.err.strip()[:120]}
    doc = result.json
    assert isinstance(doc, dict)
    if not doc["drafted"]:
        return {"drafted": False, "why": "; ".join(s["why"] for s in doc["skipped"])[:120]}
    (made,) = doc["drafted"][:1]
    folder = ws / "patchsets" / made["patchset"] / made["version"]
    patches = "".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.patch")))
    record = json.loads((folder / "validation.json").read_text(encoding="utf-8"))
    stages = {s["name"]: s["status"] for s in record["runs"][0]["stages"]}
    changed = removed_gate_lines(patches, int(arch[3:5]))
    return {"drafted": True, "static": all(stages.get(s) == "passed" for s in STATIC),
            "same": changed == lines, "changed": sorted(changed), "upstream": sorted(lines)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True, help="NAME=PATH of a bare mirror")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--arch", default="sm_120a")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--workspace", type=Path)
    args = parser.parse_args()
    name, _, path = args.upstream.partition("=")
    ws = args.workspace or Path(tempfile.mkdtemp(prefix="enable-history-"))
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "contrib.toml").write_text(f'[upstreams.{name}]\nurl = "{path}"\n'
                                     f'branch = "{args.branch}"\n', encoding="utf-8")
    os.environ.setdefault("CONTRIB_CACHE", str(ws / ".cache"))
    found = openings(path, args.branch, int(args.arch[3:5]), args.limit)
    counts = {"drafted": 0, "static": 0, "same": 0}
    for sha, lines in found:
        outcome = draft(ws, name, sha, lines, args.arch)
        for key in counts:
            counts[key] += bool(outcome.get(key))
        subject = git(path, "log", "-1", "--format=%s", sha).strip()[:60]
        print(f"{sha[:10]} {subject}: {json.dumps(outcome)}", flush=True)
    total = len(found)
    print(f"openings: {total}; drafted {counts['drafted']}/{total}; static stages passed "
          f"{counts['static']}/{total}; same gates as upstream {counts['same']}/{total}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
