"""Whether `contrib why` reads real SM12x fixes right: before the fix and at it.

    python benchmarks/fixes_history.py [--corpus FILE] [--fix PREFIX ...] [--scope gates|below]
        [--json OUT] [--cache DIR] [--quiet]

The corpus (``fixes_corpus.toml``): fixes of 2026 in flashinfer and sglang that made a
feature run on SM12x (a gate opened, a check made minor-precise, a dispatch widened,
kernels written, shared memory fitted), each with the feature as `contrib why` names
it, the arch, what `why` should say at the commit before the fix (``before``: by what
the fix did) and at the fix (``at``: on), and its scope: ``gates`` when the fix lies
within contrib's vocabulary today (a Python or C++ gate it reads), ``below`` when it
lies under the gates (binaries, JIT targets, shared memory: another issue).

Printed: a line per fix and point (OK or MISS), then the agreement (both points read
as expected) within the vocabulary and overall.  Exit 1 when a fix within the
vocabulary is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from why_cases import (  # noqa: E402
    MIRRORS,
    VERDICTS,
    Answer,
    ask,
    check_arch,
    common_options,
    field_of,
    needed,
    read_tables,
    run_measure,
    scratch_workspace,
    share,
)

from contrib.workspace.model import Workspace  # noqa: E402

CORPUS = HERE / "fixes_corpus.toml"
SCOPES = ("gates", "below")


@dataclass(frozen=True)
class Fix:
    upstream: str
    commit: str
    pr: int
    feature: str
    arch: str
    before: str
    at: str
    scope: str
    reason: str
    number: int  # its place in the corpus, from 1


def load(path: Path) -> list[Fix]:
    """The corpus's fixes; one that cannot be read is a ValueError naming it."""
    fixes = []
    for n, table in enumerate(read_tables(path, "fix"), 1):
        def get(key: str, kind: type = str, choices: Sequence[Any] = (),
                table: dict[str, Any] = table, n: int = n) -> Any:
            return field_of(path, "fix", n, table, key, kind, choices)

        fixes.append(Fix(get("upstream", str, sorted(MIRRORS)), get("commit"), get("pr", int),
                         get("feature"), check_arch(path, "fix", n, get("arch")),
                         get("before", str, VERDICTS), get("at", str, VERDICTS),
                         get("scope", str, SCOPES), get("reason"), n))
    return fixes


@dataclass(frozen=True)
class Row:
    fix: Fix
    before: Answer
    at: Answer

    @property
    def ok(self) -> bool:
        return self.before.verdict == self.fix.before and self.at.verdict == self.fix.at

    def lines(self) -> list[str]:
        f = self.fix
        head = f"{f.number:>3} {f.upstream} #{f.pr} {f.commit:<10} {f.arch} {f.feature} [{f.scope}]"
        out = [f"{'OK  ' if self.ok else 'MISS'} {head}"]
        for label, rev, answer, expected in (("before", f"{f.commit}^", self.before, f.before),
                                             ("at", f.commit, self.at, f.at)):
            mark = "ok" if answer.verdict == expected else "miss"
            why = "" if mark == "ok" else f"  {answer.reason[:140]}"
            out.append(f"       {label:<6} {rev:<11} {answer.verdict} (expected {expected}) "
                       f"{mark}{why}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"fix": asdict(self.fix), "ok": self.ok, "before": self.before.to_dict(),
                "at": self.at.to_dict()}


def run(ws: Workspace, fixes: Sequence[Fix], progress: bool) -> list[Row]:
    rows = []
    for n, fix in enumerate(fixes, 1):
        if progress:
            print(f"  {n}/{len(fixes)} {fix.upstream} {fix.commit} {fix.arch} {fix.feature}",
                  file=sys.stderr, flush=True)
        before = ask(ws, fix.upstream, f"{fix.commit}^", fix.arch, [fix.feature])[fix.feature]
        at = ask(ws, fix.upstream, fix.commit, fix.arch, [fix.feature])[fix.feature]
        rows.append(Row(fix, before, at))
        if progress:  # each answer as it comes: a long run read before its end
            print("\n".join(rows[-1].lines()), file=sys.stderr, flush=True)
    return rows


def report(rows: Sequence[Row]) -> tuple[list[str], dict[str, Any]]:
    within = [r for r in rows if r.fix.scope == "gates"]
    lines = [line for r in rows for line in r.lines()]
    lines += ["", f"agreement within the vocabulary (scope gates): "
              f"{share(sum(r.ok for r in within), len(within))}",
              f"agreement overall: {share(sum(r.ok for r in rows), len(rows))}",
              f"points read as expected: before {share(sum(r.before.verdict == r.fix.before for r in rows), len(rows))}, "
              f"at {share(sum(r.at.verdict == r.fix.at for r in rows), len(rows))}"]
    summary = {"fixes": len(rows), "ok": sum(r.ok for r in rows), "within": len(within),
               "within_ok": sum(r.ok for r in within)}
    return lines, summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--fix", action="append", default=[], metavar="PREFIX",
                        help="only the fixes of this commit (a sha prefix; repeatable)")
    parser.add_argument("--scope", choices=SCOPES, help="only the fixes of this scope")
    common_options(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measure; a corpus, mirror or revision that cannot be used is one line,
    exit 2."""
    return run_measure("fixes_history", measure, parse_args(argv))


def measure(args: argparse.Namespace) -> int:
    fixes = [f for f in load(args.corpus)
             if (not args.fix or any(f.commit.startswith(p) for p in args.fix))
             and (not args.scope or f.scope == args.scope)]
    if not fixes:
        raise ValueError(f"{args.corpus}: no fix is left by --fix and --scope")
    mirrors = {name: getattr(args, f"{name}_git") for name in MIRRORS}
    ws = scratch_workspace(needed(mirrors, [f.upstream for f in fixes]), args.cache,
                           "fixes-history-")
    rows = run(ws, fixes, not args.quiet)
    lines, summary = report(rows)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary,
                                         "rows": [r.to_dict() for r in rows]}, indent=1),
                             encoding="utf-8")
    return 0 if summary["within_ok"] == summary["within"] else 1


if __name__ == "__main__":
    sys.exit(main())
