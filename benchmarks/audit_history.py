"""How `contrib audit` reads the gates the upstreams opened to SM12x themselves.

    python benchmarks/audit_history.py [--upstream flashinfer|sglang] [--limit N]
        [--since DATE] [--json OUT] [--mine] [--write-corpus] [--cache DIR] [--no-stack]
        [--commit PREFIX ...] [--no-main]

The corpus: commits of flashinfer's and sglang's own main that opened a gate
to SM12x (see ``history_mine``), pinned in ``audit_history_corpus.toml`` (shas,
paths, lines; no upstream text).  ``--mine`` mines the mirrors again (cached
per tip sha), ``--write-corpus`` pins what was mined.  For every opening the
parent and the opening commit are audited for sm_120a with the audit's engine
(``contrib.audit.engine.audit_commit``, the code path of ``contrib audit``),
then both mains.  Printed per upstream: openings read as excluding at the
parent (goal >= 90%), class agreement with what the commit had to do (goal
>= 70%), opened gates still read as excluding at the opening (goal 0; the
opening commit is audited only when one of its gates was read as excluding at
the parent), and the
``unknown`` share of the runtime excluding gates at main (goal <= 25%); then
the misses.  sglang's audits are linked to flashinfer at the version each commit pins (the
stack below, as ``contrib audit`` does in a workspace carrying both), so an
excluding gate can take its class from the flashinfer path it reaches;
``--no-stack`` audits sglang alone.  ``contrib`` is whichever the interpreter imports, so
``PYTHONPATH=OTHER_CHECKOUT`` measures another tree; the audit's result cache
lives under ``--cache`` in a folder keyed by that tree's source, so two trees
never share answers.  ``--limit N`` keeps N opening commits per upstream,
spread evenly over time (default 12; 0: all).  ``--commit PREFIX`` (repeatable) keeps
the openings of those commits only and ``--no-main`` skips the mains: one miss
measured again in a minute, not the whole corpus in half an hour.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import history_corpus  # noqa: E402
from history_match import Row, measure  # noqa: E402
from history_mine import Opening, defined_names, parse  # noqa: E402

import contrib  # noqa: E402
from contrib.arch import parse_arch  # noqa: E402
from contrib.audit.model import AuditGate  # noqa: E402
from contrib.errors import ContribError  # noqa: E402
from contrib.git.repo import Git  # noqa: E402

MIRRORS = {
    "flashinfer": Path("/work/.mirror/flashinfer-ai+flashinfer/repo"),
    "sglang": Path("/work/.mirror/mmangkad-dev+sglang/repo"),
}
STACKED = {"sglang": "flashinfer"}  # the upstream each one runs on (its pin is followed)
# Commits per upstream of a default run: two audits each (parent, opening) at 17-40 s
# a tree on 2 cores keep the run near a quarter of an hour.
DEFAULT_LIMIT = 12


def contrib_source_key() -> str:
    """A hash of the imported contrib package's sources: the audit cache's folder."""
    root = Path(contrib.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


class Auditor:
    """Audits of one upstream's commits through the audit's engine, counted and timed;
    with ``below`` (the lower upstream's name and mirror), each audit is linked to the
    lower upstream at the version the commit pins, as ``contrib audit`` does in a
    workspace that carries both (the stack below)."""

    def __init__(self, git: Git, arch: str, below: tuple[str, Git] | None = None) -> None:
        from contrib.audit.engine import audit_commit

        self.git, self.arch, self._audit = git, parse_arch(arch), audit_commit
        self.below = below
        self.count, self.fresh, self.seconds = 0, 0, 0.0
        self.stacked, self.mismatches = 0, 0
        self.notes: list[str] = []

    def gates(self, commit: str) -> list[AuditGate]:
        result = self._audit(self.git, commit, self.arch)
        self.count += 1
        self.fresh += 0 if result.cached else 1
        self.seconds += result.seconds
        if self.below is None:
            return result.gates
        started = time.monotonic()
        gates = self._stack(commit, result.tree, result.gates)
        self.seconds += time.monotonic() - started
        return gates

    def _stack(self, commit: str, tree_sha: str, gates: list[AuditGate]) -> list[AuditGate]:
        """``gates`` linked to the stack below, at the version ``commit`` pins."""
        from contrib.analysis.tree import GitTree
        from contrib.audit.stack.link import audit_and_link
        from contrib.audit.stack.pins import find_pin, package_name, tag_of

        assert self.below is not None
        name, lower = self.below
        package = package_name(GitTree(lower, lower.run("rev-parse", "main").strip()))
        tree = GitTree(self.git, commit)
        pin = find_pin(tree, package) if package else None
        tag = tag_of(lower, pin.version) if pin and pin.version else None
        if pin is None or tag is None:
            self.notes.append(f"{commit[:10]}: no {name} pin it can follow"
                              + (f" ({pin.where}: {pin.requirement})" if pin else ""))
            return gates
        # its time counts in the caller's
        linked = audit_and_link(gates, tree, tree_sha, lower, name, *tag, self.arch)
        self.stacked += 1
        self.mismatches += len(linked.mismatches)
        return linked.gates


def opened_names(git: Git, opening: Opening) -> list[str]:
    """What the code an opening changed defines for other code to test (at the parent)."""
    if not opening.file.endswith(".py"):
        return []
    status, text, _ = git.try_run("show", f"{opening.parent}:{opening.file}")
    return defined_names(parse(text) if status == 0 else None, opening.function, opening.lines)


def spread(openings: Sequence[Opening], limit: int) -> list[Opening]:
    """The openings of ``limit`` commits spread evenly over the corpus (0: all)."""
    commits = list(dict.fromkeys(o.commit for o in openings))
    if limit <= 0 or limit >= len(commits):
        return list(openings)
    step = len(commits) / limit
    keep = {commits[int(i * step)] for i in range(limit)}
    return [o for o in openings if o.commit in keep]


def run_upstream(name: str, openings: Sequence[Opening], git: Git, arch: str,
                 progress: bool, below: tuple[str, Git] | None = None,
                 with_main: bool = True) -> tuple[list[Row], dict[str, object]]:
    """The rows of one upstream's openings and the audit of its main (each audit linked
    to ``below`` at the version it pins, when given)."""
    auditor = Auditor(git, arch, below)
    commits = list(dict.fromkeys(o.commit for o in openings))
    rows: list[Row] = []
    for n, commit in enumerate(commits, 1):
        mine = [o for o in openings if o.commit == commit]
        if progress:
            print(f"  {name} {n}/{len(commits)} {commit[:10]} ({len(mine)} opening(s))",
                  file=sys.stderr, flush=True)
        before = auditor.gates(mine[0].parent)
        names = [opened_names(git, o) for o in mine]
        found = [measure(o, before, [], n) for o, n in zip(mine, names, strict=True)]
        if any(r.excluding for r in found):  # only a gate read as excluding can stay so
            later = auditor.gates(commit)
            found = [measure(o, before, later, n) for o, n in zip(mine, names, strict=True)]
        rows += found
    tip = git.run("rev-parse", "main")
    if not with_main:
        return rows, {"commit": tip, "runtime_excluding": 0, "unknown": 0,
                      "audits": auditor.count, "fresh_audits": auditor.fresh,
                      "audit_seconds": round(auditor.seconds, 1)}
    excluding = [g for g in auditor.gates(tip) if g.excludes_target and g.scope == "runtime"]
    main = {"commit": tip, "runtime_excluding": len(excluding),
            "unknown": sum(1 for g in excluding if g.class_ == "unknown"),
            "audits": auditor.count, "fresh_audits": auditor.fresh,
            "audit_seconds": round(auditor.seconds, 1)}
    if below is not None:
        main |= {"stacked": auditor.stacked, "mismatches": auditor.mismatches,
                 "stack_notes": auditor.notes}
    return rows, main


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} {100 * part / whole:.0f}%" if whole else "0/0 -"


def summary(name: str, rows: Sequence[Row], main: Mapping[str, object]) -> list[str]:
    n = len(rows)
    runtime = int(str(main.get("runtime_excluding", 0)))
    unknown = int(str(main.get("unknown", 0)))
    as_mined = sum(r.excluding and r.got_class == (r.opening.mined_as or r.opening.expected)
                   for r in rows)
    return [name, str(n), str(len({r.opening.commit for r in rows})),
            share(sum(r.excluding for r in rows), n), share(sum(r.class_agrees for r in rows), n),
            share(as_mined, n), str(sum(r.still_excluding for r in rows)),
            share(unknown, runtime)]


def by_mechanism(mechanism: str, rows: Sequence[Row]) -> list[str]:
    n = len(rows)
    return [mechanism, str(n), share(sum(r.found for r in rows), n),
            share(sum(r.excluding for r in rows), n), share(sum(r.class_agrees for r in rows), n)]


def print_report(results: dict[str, tuple[list[Row], dict[str, object]]], arch: str) -> None:
    print(f"contrib {contrib.__version__} from {Path(contrib.__file__).resolve().parent} "
          f"(source {contrib_source_key()}), arch {arch}")
    head = ["upstream", "openings", "commits", "excluding@parent", "class agrees",
            "(as mined)", "still excluding after", "unknown@main (runtime)"]
    table = [summary(name, rows, main) for name, (rows, main) in results.items()]
    every = [r for rows, _ in results.values() for r in rows]
    mains = [m for _, m in results.values()]
    total = {"runtime_excluding": sum(int(str(m["runtime_excluding"])) for m in mains),
             "unknown": sum(int(str(m["unknown"])) for m in mains)}
    if len(results) > 1:
        table.append(summary("all", every, total))
    table.append(["goal", "", "", ">= 90%", ">= 70%", "", "0", "<= 25%"])
    print_table(head, table)
    relabelled = [r for r in every if r.opening.mined_as]
    if relabelled:
        print(f"\nrelabelled by hand ({len(relabelled)}; 'class agrees' reads the hand's class, "
              "'(as mined)' the miner's):")
        print_table(["commit", "file:function", "mined", "relabelled", "got"],
                    [[r.opening.commit[:10], f"{r.opening.file}:{r.opening.function}",
                      r.opening.mined_as, r.opening.expected, r.got] for r in relabelled])
    print("\nby mechanism (all upstreams):")
    mechanisms = sorted({r.opening.mechanism for r in every})
    print_table(["mechanism", "openings", "found", "excluding@parent", "class agrees"],
                [by_mechanism(m, [r for r in every if r.opening.mechanism == m])
                 for m in mechanisms])
    misses = sorted((r for r in every if not r.class_agrees or r.still_excluding),
                    key=lambda r: (r.opening.mechanism, r.got, r.opening.upstream))
    print(f"\nmisses ({len(misses)} of {len(every)}):")
    print_table(["commit", "file:function", "mechanism", "via", "expected", "got", "reason"],
                [[r.opening.commit[:10], f"{r.opening.file}:{r.opening.function}",
                  r.opening.mechanism, r.via, r.opening.expected,
                  r.got + (" (still excluding after)" if r.still_excluding else ""),
                  r.why()[:110]] for r in misses])


def print_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", choices=sorted(MIRRORS), action="append")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT,
                        help="opening commits per upstream, spread over time (0: all)")
    parser.add_argument("--since", help="only openings committed on or after this date")
    parser.add_argument("--commit", action="append", default=[], metavar="PREFIX",
                        help="only the openings of this commit (a sha prefix; repeatable): "
                        "a miss measured again without the whole corpus")
    parser.add_argument("--no-main", action="store_true",
                        help="do not audit the mains (no unknown@main figure)")
    parser.add_argument("--json", type=Path, help="write the raw rows here")
    parser.add_argument("--arch", default="sm_120a")
    parser.add_argument("--corpus", type=Path, default=history_corpus.PINNED)
    parser.add_argument("--mine", action="store_true", help="mine the mirrors again")
    parser.add_argument("--write-corpus", action="store_true", help="pin what was mined")
    parser.add_argument("--cache", type=Path, default=history_corpus.default_cache())
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--no-stack", action="store_true",
                        help="audit sglang alone, not linked to flashinfer at its pin")
    for name, path in MIRRORS.items():
        parser.add_argument(f"--{name}-git", type=Path, default=path, dest=f"{name}_git")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measure; a mirror, corpus or cache that cannot be used is one line, exit 2."""
    args = parse_args(argv)
    try:
        return measure_all(args)
    except (ContribError, OSError, ValueError) as exc:
        print(f"audit_history: {exc}", file=sys.stderr)
        return 2


def measure_all(args: argparse.Namespace) -> int:
    names = args.upstream or sorted(MIRRORS)
    gits = {n: Git(getattr(args, f"{n}_git")) for n in names}
    corpus = history_corpus.load(args, gits)
    os.environ["CONTRIB_CACHE"] = str(args.cache / f"audit-{contrib_source_key()}")
    started = time.monotonic()
    results = {}
    for name in names:
        openings = [o for o in corpus if o.upstream == name
                    and (not args.since or o.date >= args.since)
                    and (not args.commit or any(o.commit.startswith(c) for c in args.commit))]
        if not openings and args.commit:
            continue
        below = STACKED.get(name) if not args.no_stack else None
        lower = (below, Git(getattr(args, f"{below}_git"))) if below else None
        results[name] = run_upstream(name, spread(openings, args.limit), gits[name], args.arch,
                                     not args.quiet, lower, not args.no_main)
    print_report(results, args.arch)
    for name, (_, main) in results.items():
        if "stacked" in main:
            print(f"\n{name}: {main['stacked']} audits linked to the stack below, "
                  f"{main['mismatches']} mismatches; "
                  + ("; ".join(map(str, main["stack_notes"])) or "every pin followed"))
    print(f"\n{time.monotonic() - started:.0f} s; audits: "
          + ", ".join(f"{n} {m['audits']} ({m['fresh_audits']} fresh, {m['audit_seconds']} s)"
                      for n, (_, m) in results.items()))
    if args.json:
        args.json.write_text(json.dumps({n: {"main": m, "rows": [r.to_dict() for r in rows]}
                                         for n, (rows, m) in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
