"""Which lines each GPU architecture compiles, and what the target loses.

For every architecture a pass walks the translation units like the
preprocessor does (following ``#include "..."``, tracking ``#define``/``#undef``,
skipping groups whose condition is false) and records, per file and line,
whether the line is compiled.  Comparing the target's pass with the passes of
the architectures a gate admitted *before* the patch gives the findings:

* ``empty-kernel`` (error): a ``__global__`` kernel whose body is entirely
  compiled out for the target but not for an already-admitted arch.  This is the
  flashinfer#3903 trap: widening a gate to SM120 while the body sits under
  ``__CUDA_ARCH__ < 1200`` launches a kernel that does nothing.
* ``dropped-statement`` (error): code compiled for the nearest lower admitted
  arch but compiled out for the target with no alternative branch (e.g. a
  ``cudaGridDependencySynchronize()`` under ``>= 900 && < 1200``).
* ``arch-difference`` (info): other code the target loses, or loses with an
  ``#else`` alternative; and guards decided by macros we could not see.

Code the target *gains* (``>= 1000`` guards) is never reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from contrib.analysis.cexpr import Evaluation, ExprError, Macro, evaluate, parse_define
from contrib.analysis.cscan import Branch, Scan, find_kernels, scan
from contrib.analysis.waivers import apply_waivers
from contrib.arch import Arch, arch_macros, nearest_lower
from contrib.record.finding import ERROR, INFO, Finding
from contrib.ui import counted
from contrib.workspace.validation import Waiver

Resolver = Callable[[str, str], "str | None"]  # (including file, include name) -> path
_IF_KINDS = ("if", "ifdef", "ifndef", "elif", "elifdef", "elifndef")


@dataclass
class Pass:
    """What one architecture's preprocessing compiled, over all files walked."""

    arch: Arch | None
    active: dict[str, set[int]] = field(default_factory=dict)  # file -> compiled lines
    taken: dict[str, set[int]] = field(default_factory=dict)  # file -> branch lines taken
    evaluations: dict[tuple[str, int], Evaluation] = field(default_factory=dict)
    errors: list[tuple[str, int, str]] = field(default_factory=list)

    def compiled(self, path: str, line: int) -> bool:
        """Whether ``path:line`` was compiled in this pass."""
        return line in self.active.get(path, set())


class _Walker:
    """Preprocess translation units for one architecture."""

    def __init__(self, scans: Callable[[str], Scan | None], resolve: Resolver | None) -> None:
        self.scans = scans
        self.resolve = resolve

    def run(self, arch: Arch | None, roots: Iterable[str]) -> Pass:
        result = Pass(arch)
        for root in roots:  # each translation unit starts with fresh macros
            macros = {k: Macro(k, v) for k, v in arch_macros(arch).items()}
            self._walk(root, macros, result, set(), 0)
        return result

    def _walk(
        self, path: str, macros: dict[str, Macro], out: Pass, once: set[str], depth: int
    ) -> None:
        scanned = self.scans(path)
        if scanned is None or path in once or depth > 64:
            return
        active_lines = out.active.setdefault(path, set())
        taken = out.taken.setdefault(path, set())
        open_: list[tuple[bool, bool]] = []  # (parent active, some branch taken) per group
        active = True
        for line in range(1, len(scanned.code) + 1):
            directive = scanned.directives.get(line)
            if directive is None:
                if active and scanned.code[line - 1].strip():
                    active_lines.add(line)
                continue
            kind = directive.kind
            if kind in ("if", "ifdef", "ifndef"):
                open_.append((active, False))
            if kind in _IF_KINDS or kind == "else":
                if not open_:
                    continue
                parent, done = open_[-1]
                active = (
                    parent and not done and self._condition(scanned, directive.line, macros, out)
                )
                open_[-1] = (parent, done or active)
                if active:
                    taken.add(line)
            elif kind == "endif":
                if open_:
                    active = open_.pop()[0]
            elif active:
                self._other(scanned, directive.kind, directive.rest, macros, out, once, depth)

    def _condition(self, scanned: Scan, line: int, macros: dict[str, Macro], out: Pass) -> bool:
        directive = scanned.directives[line]
        kind, rest = directive.kind, directive.rest
        if kind == "else":
            return True
        if kind in ("ifdef", "ifndef", "elifdef", "elifndef"):
            name = rest.split()[0] if rest.split() else ""
            expression = f"{'!' if kind.endswith('ndef') else ''}defined({name})"
        else:
            expression = rest
        try:
            evaluation = evaluate(expression, macros)
        except ExprError as exc:
            out.errors.append((scanned.path, line, str(exc)))
            return False
        out.evaluations[(scanned.path, line)] = evaluation
        return evaluation.true

    def _other(
        self, scanned: Scan, kind: str, rest: str, macros: dict[str, Macro], out: Pass,
        once: set[str], depth: int,
    ) -> None:
        if kind == "define":
            macro = parse_define(rest)
            if macro is not None:
                macros[macro.name] = macro
        elif kind == "undef" and rest.split():
            macros.pop(rest.split()[0], None)
        elif kind == "pragma" and rest.split()[:1] == ["once"]:
            once.add(scanned.path)
        elif kind == "include" and rest[:1] in ('"', "<") and self.resolve is not None:
            target = self.resolve(
                scanned.path, rest[1:].split('"' if rest[0] == '"' else ">", 1)[0]
            )
            if target is not None:
                self._walk(target, macros, out, once, depth + 1)


@dataclass
class GuardAnalysis:
    """The passes and findings of one arch-guard analysis."""

    target: Arch
    compared: list[Arch]
    files: list[str]
    findings: list[Finding]
    passes: dict[str, Pass]


def compute_passes(
    files: Mapping[str, str], roots: Iterable[str], archs: Iterable[Arch | None],
    resolve: Resolver | None = None,
) -> tuple[dict[str, Scan], dict[str, Pass]]:
    """Scan ``files`` and preprocess ``roots`` once per arch (None: the host pass)."""
    scans: dict[str, Scan] = {}

    def get(path: str) -> Scan | None:
        if path not in scans and path in files:
            scans[path] = scan(path, files[path])
        return scans.get(path)

    walker = _Walker(get, resolve)
    roots = list(roots)
    passes = {(a.name if a else "host"): walker.run(a, roots) for a in archs}
    return scans, passes


def analyze(
    files: Mapping[str, str],
    roots: Iterable[str],
    target: Arch,
    admitted_before: Iterable[Arch],
    resolve: Resolver | None = None,
    waivers: Iterable[Waiver] = (),
) -> GuardAnalysis:
    """Compare the target's pass with each previously admitted arch's; see module doc."""
    compared = sorted(
        {a for a in admitted_before if a.cuda_arch != target.cuda_arch}, key=lambda a: a.cuda_arch
    )
    scans, passes = compute_passes(files, roots, [target, *compared], resolve)
    findings: list[Finding] = []
    nearest = nearest_lower(target, compared)
    if nearest is not None and nearest.cuda_arch > target.cuda_arch:
        # Code that only a NEWER arch compiles (`>= 1000` seen from sm_90a) is a
        # feature of that arch, not something the target lost: info, not error.
        nearest = None
    for path in sorted(scans):
        findings.extend(_file_findings(scans[path], passes, target, compared, nearest))
    findings.extend(_evaluation_findings(passes[target.name], scans))
    return GuardAnalysis(target, compared, sorted(scans), apply_waivers(findings, waivers), passes)


def _guard_of(scanned: Scan, line: int, target_pass: Pass) -> Branch | None:
    """The outermost branch around ``line`` the target did not take."""
    taken = target_pass.taken.get(scanned.path, set())
    for branch_line in scanned.chain[line - 1]:
        if branch_line not in taken:
            return scanned.branches[branch_line]
    return None


def _describe(scanned: Scan, branch: Branch) -> str:
    d = branch.directive
    text = f"#{d.kind} {d.rest}".strip()
    where = f"line {branch.line}"
    if branch.head != branch.line:
        where += f", of the #if at line {branch.head}"
    return f"`{text}` ({where})"


def _file_findings(
    scanned: Scan, passes: dict[str, Pass], target: Arch, compared: list[Arch], nearest: Arch | None
) -> list[Finding]:
    tp = passes[target.name]
    findings: list[Finding] = []
    covered: set[int] = set()
    for kernel in find_kernels(scanned):
        if not tp.compiled(scanned.path, kernel.line) or not kernel.body_lines:
            continue
        if any(tp.compiled(scanned.path, b) for b in kernel.body_lines):
            continue
        keeper = next(
            (a for a in reversed(compared) if _any(passes[a.name], scanned, kernel.body_lines)),
            None,
        )
        if keeper is None:
            continue
        covered.update(kernel.body_lines)
        first = next(b for b in kernel.body_lines if passes[keeper.name].compiled(scanned.path, b))
        guard = _guard_of(scanned, first, tp)
        why = f" by {_describe(scanned, guard)}" if guard else ""
        findings.append(Finding(
            "empty-kernel", ERROR, scanned.path, kernel.line,
            f"empty kernel {kernel.name} on {target.name}: its whole body is compiled out{why}; "
            f"{keeper.name} compiles it",
            f"{scanned.path}:{guard.line}" if guard else None,
        ))
    for other in ([nearest] if nearest else []) + [a for a in reversed(compared) if a != nearest]:
        lost = [
            line for line in scanned.statement_lines()
            if line not in covered and passes[other.name].compiled(scanned.path, line)
            and not tp.compiled(scanned.path, line)
        ]
        findings.extend(_lost_findings(scanned, tp, target, other, lost, other == nearest, covered))
    return findings


def _any(p: Pass, scanned: Scan, lines: Iterable[int]) -> bool:
    return any(p.compiled(scanned.path, line) for line in lines)


def _lost_findings(
    scanned: Scan, tp: Pass, target: Arch, other: Arch, lost: list[int], nearest: bool,
    covered: set[int],
) -> list[Finding]:
    """Group lines the target loses by the guard that drops them; one finding per group."""
    groups: dict[int, list[int]] = {}
    for line in lost:
        guard = _guard_of(scanned, line, tp)
        groups.setdefault(guard.line if guard else 0, []).append(line)
    findings = []
    for guard_line, lines in sorted(groups.items()):
        covered.update(lines)
        branch = scanned.branches.get(guard_line)
        alternative = branch is not None and _has_alternative(scanned, tp, branch)
        snippet = scanned.code[lines[0] - 1].strip()
        more = f" (and {counted(len(lines) - 1, 'more line')})" if len(lines) > 1 else ""
        guard_text = f" by {_describe(scanned, branch)}" if branch else ""
        if nearest and not alternative:
            severity, kind = ERROR, "dropped-statement"
            tail = f"; {other.name} compiles it and there is no alternative for {target.name}"
        else:
            severity, kind = INFO, "arch-difference"
            tail = f"; {other.name} compiles it" + (
                f" ({target.name} takes another branch)" if alternative else ""
            )
        findings.append(Finding(
            kind, severity, scanned.path, lines[0],
            f"`{snippet}`{more} is compiled out on {target.name}{guard_text}{tail}",
            f"{scanned.path}:{guard_line}" if branch else None,
        ))
    return findings


def _has_alternative(scanned: Scan, tp: Pass, branch: Branch) -> bool:
    """Whether the target takes a sibling branch of ``branch``'s group that holds code."""
    taken = tp.taken.get(scanned.path, set())
    siblings = [b for b in scanned.branches.values() if b.head == branch.head and b.line in taken]
    for sibling in siblings:
        for index, chain in enumerate(scanned.chain):
            if sibling.line in chain and scanned.code[index].strip():
                return True
    return False


def _evaluation_findings(tp: Pass, scans: Mapping[str, Scan]) -> list[Finding]:
    """Guards over __CUDA_ARCH__ that unknown macros decided, and malformed guards."""
    findings = []
    for (path, line), evaluation in sorted(tp.evaluations.items()):
        unknown = sorted(evaluation.unknown)
        if evaluation.mentions_arch and unknown:
            text = _describe(scans[path], scans[path].branches[line])
            findings.append(Finding(
                "unknown-macro", INFO, path, line,
                f"{text} also depends on {', '.join(unknown)}, not defined in the files "
                "walked (taken as 0, as the preprocessor would)",
            ))
    for path, line, message in tp.errors:
        findings.append(Finding("bad-guard", INFO, path, line, f"cannot evaluate: {message}"))
    return findings
