"""Whether `contrib why` reads as on what works on SM12x, at real commits of the mirrors.

    python benchmarks/works_history.py [--corpus FILE] [--case N ...] [--kind KIND ...]
        [--kept-out | --tuned-only] [--json OUT] [--cache DIR] [--quiet]
    python benchmarks/works_history.py --invariants REV --upstream NAME [--arch A ...]

The corpus (``works_corpus.toml``): features upstream's own tests, CI, docs or commits
say run on SM12x (defaults, FA2 attention, norms, activations, sampling, the SM120
GEMMs, sglang's attention backends, and each gate an upstream opened, at its own
commit), each asked of `contrib why` at its commit for its arch.  Printed: a line per
case (OK or MISS, what `why` said, the kind, tuned or kept out), then the share read as
expected (goal >= 95%), for all cases, the tuned and the kept out, and the misses by
kind and by what was said.  Exit 1 under the goal.  ``tuned = false`` marks the cases
kept out: the rules must not be tuned on them.

``--invariants REV --upstream NAME``: every default of the upstream at REV (a setting's
default choice, a function's default backend; see ``why_defaults``) must read as on for
each arch (sm_90a, sm_100a, sm_120a, sm_121a by default) unless the upstream refuses the
arch as a whole (read here: no default on at all); prints the violations, exit 1 when
any.  Cases of one commit and arch share one audit; a cold one costs about a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
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
from why_defaults import defaults  # noqa: E402

from contrib.arch import parse_arch  # noqa: E402
from contrib.git.repo import Git  # noqa: E402
from contrib.workspace.model import Workspace  # noqa: E402

CORPUS = HERE / "works_corpus.toml"
GOAL = 95  # percent of the cases read as expected
ARCHS = ("sm_90a", "sm_100a", "sm_120a", "sm_121a")


@dataclass(frozen=True)
class Case:
    upstream: str
    rev: str
    feature: str
    arch: str
    expected: str
    kind: str
    source: str
    tuned: bool
    number: int  # its place in the corpus, from 1


def load(path: Path) -> list[Case]:
    """The corpus's cases; a case that cannot be read is a ValueError naming it."""
    cases = []
    for n, table in enumerate(read_tables(path, "case"), 1):
        def get(key: str, kind: type = str, choices: Sequence[Any] = (),
                table: dict[str, Any] = table, n: int = n) -> Any:
            return field_of(path, "case", n, table, key, kind, choices)

        cases.append(Case(get("upstream", str, sorted(MIRRORS)), get("rev"), get("feature"),
                          check_arch(path, "case", n, get("arch")),
                          get("expected", str, VERDICTS), get("kind"), get("source"),
                          get("tuned", bool), n))
    return cases


@dataclass(frozen=True)
class Row:
    case: Case
    answer: Answer

    @property
    def ok(self) -> bool:
        return self.answer.verdict == self.case.expected

    def line(self) -> str:
        c, a = self.case, self.answer
        mark = "OK  " if self.ok else "MISS"
        why = "" if self.ok else f"  {a.reason[:150]}"
        return (f"{mark} {c.number:>3} {c.upstream} {c.rev:<10} {c.arch} {c.feature}: "
                f"{a.verdict} (expected {c.expected}) [{c.kind}, "
                f"{'tuned' if c.tuned else 'kept out'}]{why}")

    def to_dict(self) -> dict[str, Any]:
        return {"case": asdict(self.case), "ok": self.ok, "answer": self.answer.to_dict()}


def run(ws: Workspace, cases: Sequence[Case], progress: bool) -> list[Row]:
    """Each case's answer; the cases of one upstream, commit and arch in one audit."""
    groups: dict[tuple[str, str, str], list[Case]] = {}
    for case in cases:
        groups.setdefault((case.upstream, case.rev, case.arch), []).append(case)
    rows: dict[int, Row] = {}
    for n, ((upstream, rev, arch), mine) in enumerate(groups.items(), 1):
        if progress:
            print(f"  {n}/{len(groups)} {upstream} {rev} {arch}: {len(mine)} feature(s)",
                  file=sys.stderr, flush=True)
        answers = ask(ws, upstream, rev, arch, [c.feature for c in mine])
        rows |= {c.number: Row(c, answers[c.feature]) for c in mine}
        if progress:  # each answer as it comes: a long run read before its end
            print("\n".join(rows[c.number].line() for c in mine), file=sys.stderr, flush=True)
    return [rows[c.number] for c in cases]


def report(rows: Sequence[Row]) -> tuple[list[str], dict[str, Any]]:
    """The printed lines and the JSON summary of the rows."""
    def figure(part: Sequence[Row]) -> str:
        return share(sum(r.ok for r in part), len(part))

    tuned = [r for r in rows if r.case.tuned]
    kept = [r for r in rows if not r.case.tuned]
    misses = [r for r in rows if not r.ok]
    lines = [r.line() for r in rows]
    lines += ["", f"read as expected: {figure(rows)} (goal >= {GOAL}%); "
              f"tuned {figure(tuned)}, kept out {figure(kept)}"]
    by_kind = Counter((r.case.kind, r.answer.verdict) for r in misses)
    if misses:
        lines.append(f"misses ({len(misses)}) by kind and what was said:")
        lines += [f"  {kind:<14} {said:<18} {count}"
                  for (kind, said), count in sorted(by_kind.items())]
    ok = sum(r.ok for r in rows)
    summary = {"cases": len(rows), "ok": ok, "tuned": [len(tuned), sum(r.ok for r in tuned)],
               "kept_out": [len(kept), sum(r.ok for r in kept)],
               "share": round(100 * ok / len(rows), 1) if rows else None, "goal": GOAL,
               "misses_by_kind": [[k, v, c] for (k, v), c in sorted(by_kind.items())]}
    return lines, summary


def met(summary: dict[str, Any]) -> bool:
    return summary["share"] is not None and summary["share"] >= GOAL


def invariants(ws: Workspace, git: Git, upstream: str, rev: str, archs: Sequence[str],
               progress: bool) -> tuple[list[str], dict[str, Any]]:
    """The defaults of ``upstream`` at ``rev`` that do not read as on, per arch."""
    found = defaults(git, rev, ws.config.upstream(upstream).settings_class)
    lines = [f"{upstream} at {rev}: {len(found.features)} defaults named as features; "
             f"{len(found.unnamed)} settings or functions whose default names none"]
    result: dict[str, Any] = {"upstream": upstream, "rev": rev, "defaults": found.features,
                              "unnamed": found.unnamed, "archs": {}}
    for arch in archs:
        if progress:
            print(f"  {upstream} {rev} {arch}: {len(found.features)} defaults",
                  file=sys.stderr, flush=True)
        answers = ask(ws, upstream, rev, arch, found.features)
        off = [a for name, a in answers.items() if name in found.features and a.verdict != "on"]
        whole = bool(found.features) and len(off) == len(found.features)
        result["archs"][arch] = {"refused_as_a_whole": whole,
                                 "violations": [] if whole else [a.to_dict() for a in off]}
        if whole:
            lines.append(f"{arch}: no default reads as on: the arch is taken as refused as "
                         "a whole, not counted")
            continue
        lines.append(f"{arch}: {len(off)} of {len(found.features)} defaults not on")
        lines += [f"  {a.feature}: {a.verdict}  {a.reason[:150]}" for a in off]
    return lines, result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--case", type=int, action="append", default=[], metavar="N",
                        help="only case N (its place in the corpus, from 1; repeatable)")
    parser.add_argument("--kind", action="append", default=[], help="only cases of this kind")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--kept-out", action="store_true", help="only the tuned = false cases")
    which.add_argument("--tuned-only", action="store_true", help="only the tuned cases")
    parser.add_argument("--invariants", metavar="REV",
                        help="check the defaults of --upstream at REV instead of the corpus")
    parser.add_argument("--upstream", choices=sorted(MIRRORS))
    parser.add_argument("--arch", action="append", default=[],
                        help=f"with --invariants (default: {', '.join(ARCHS)})")
    common_options(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measure; a corpus, mirror or revision that cannot be used is one line,
    exit 2."""
    return run_measure("works_history", measure, parse_args(argv))


def measure(args: argparse.Namespace) -> int:
    mirrors = {name: getattr(args, f"{name}_git") for name in MIRRORS}
    if args.invariants:
        if not args.upstream:
            raise ValueError("--invariants needs --upstream (flashinfer or sglang)")
        ws = scratch_workspace(needed(mirrors, [args.upstream]), args.cache, "works-history-")
        archs = [parse_arch(a).name for a in args.arch]
        lines, result = invariants(ws, Git(mirrors[args.upstream]), args.upstream,
                                   args.invariants, archs or ARCHS, not args.quiet)
        print("\n".join(lines))
        if args.json:
            args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
        return 1 if any(a["violations"] for a in result["archs"].values()) else 0
    cases = [c for c in load(args.corpus)
             if (not args.case or c.number in args.case)
             and (not args.kind or c.kind in args.kind)
             and not (args.kept_out and c.tuned) and not (args.tuned_only and not c.tuned)]
    if not cases:
        raise ValueError(f"{args.corpus}: no case is left by --case, --kind and the marks")
    ws = scratch_workspace(needed(mirrors, [c.upstream for c in cases]), args.cache,
                           "works-history-")
    rows = run(ws, cases, not args.quiet)
    lines, summary = report(rows)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary,
                                         "rows": [r.to_dict() for r in rows]}, indent=1),
                             encoding="utf-8")
    return 0 if met(summary) else 1


if __name__ == "__main__":
    sys.exit(main())
