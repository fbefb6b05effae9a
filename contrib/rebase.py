"""Carry a patch series from its base onto another upstream commit.

Everything here runs on plumbing in the upstream cache: a temporary index
loaded with the target tree, ``git apply --cached --3way`` (git >= 2.32 tries
the 3-way merge *first*, using the pre-image blobs named in each patch's
``index`` line, and only falls back to a plain no-fuzz apply when those blobs
are missing), ``write-tree`` and ``commit-tree``.  Nothing is checked out.

Three checks keep a carry honest:

* **the moved guard** -- every hunk must still sit in the same enclosing
  function/section (the hunk header git computes) as it did at the base.  A
  plain apply may legally land a hunk at an offset, i.e. in a look-alike block
  elsewhere in the file; that is the GNU-patch fuzz disaster, and it is
  reported as ``moved``, never carried;
* **already upstream** -- a patch that applies to no effect (tree unchanged),
  or whose effect is already present at the target (its post-image lines in
  the same file and section, its removed lines gone) is ``upstream``;
* **bisection** -- :func:`first_true` finds the first commit of the
  first-parent path where a predicate holds, in ceil(log2 N) probes.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from contrib.errors import PatchError
from contrib.git import Git, Sha
from contrib.series import EXPORT_ENV, Hunk, MailPatch, apply_one, apply_series, parse_hunks

APPLIED, UPSTREAM, CONFLICT, MOVED = "applied", "upstream", "conflict", "moved"
_PR = re.compile(r"\(#(\d+)\)\s*$")
_DEF_NAME = re.compile(r"^\s*(?:async\s+)?(?:def|class|struct|union|enum|namespace)\s+(\w+)")
_CALL_NAME = re.compile(r"(\w+)\s*\(")


def pr_number(subject: str) -> int | None:
    """The PR number of a squash-merged subject like ``feat: x (#1234)``."""
    match = _PR.search(subject)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Landing:
    """An upstream commit named in a report: the one that broke or landed a patch."""

    sha: str
    subject: str
    pr: int | None
    author: str
    date: str

    @classmethod
    def of(cls, git: Git, rev: str) -> Landing:
        info = git.commit_info(rev)
        return cls(info.sha, info.subject, pr_number(info.subject),
                   f"{info.author_name} <{info.author_email}>", info.author_date)

    def as_dict(self) -> dict[str, object]:
        return {"sha": self.sha, "subject": self.subject, "pr": self.pr,
                "author": self.author, "date": self.date}

    def short(self) -> str:
        pr = f" (#{self.pr})" if self.pr and f"(#{self.pr})" not in self.subject else ""
        return f"{self.sha[:10]} {self.subject}{pr}"


@dataclass
class PatchCarry:
    """What happened to one patch at one upstream commit."""

    name: str
    state: str  # APPLIED, UPSTREAM, CONFLICT or MOVED
    commit: Sha | None = None
    how: str = ""  # for UPSTREAM: "empty" (applies to no effect) or "present" (effect found)
    files: list[str] = field(default_factory=list)
    hunks: list[str] = field(default_factory=list)


@dataclass
class Carry:
    """The series carried onto one upstream commit (stops at the first failure)."""

    onto: Sha
    patches: list[PatchCarry]
    tip: Sha

    @property
    def failed(self) -> PatchCarry | None:
        return next((p for p in self.patches if p.state in (CONFLICT, MOVED)), None)

    @property
    def failed_index(self) -> int | None:
        return next((i for i, p in enumerate(self.patches) if p.state in (CONFLICT, MOVED)),
                    None)

    def state_of(self, index: int) -> str | None:
        return self.patches[index].state if index < len(self.patches) else None


def section_key(section: str) -> str:
    """What identifies an enclosing section: its function/class name, else its text.

    A signature change (a new parameter) keeps the key, a different function does not.
    """
    for pattern in (_DEF_NAME, _CALL_NAME):
        match = pattern.search(section)
        if match:
            return match.group(1)
    return " ".join(section.split())


TOP = "<top level>"
_PY_DEF = re.compile(r"^(\s*)(?:async\s+)?(?:def|class)\s+(\w+)")
_C_TYPE = re.compile(r"^\s*(?:template\s*<.*>\s*)?(?:typedef\s+)?"
                     r"(?:struct|class|union|enum|namespace)\s+(\w+)[^;]*$")
_C_FUNC = re.compile(r"^(?!(?:if|for|while|switch|return|else|do|case|goto|sizeof)\b)"
                     r"[A-Za-z_][^;=]*?([A-Za-z_~][\w:~]*)\s*\([^;]*$")
_C_NEXT = re.compile(r"^\s+([A-Za-z_~][\w:~]*)\s*\([^;]*$")
_C_ATTR = re.compile(r"__(?:launch_bounds|attribute)__\s*\(+[^)]*\)+")


def is_python(path: str) -> bool:
    return path.endswith((".py", ".pyi"))


def definition(line: str, python: bool, following: str = "") -> str | None:
    """The name a line defines (def/class; a C/C++/CUDA function or type), else None.

    ``following`` is the next line: CUDA kernels often put the name there, after
    ``static __global__ void __launch_bounds__(1024, 1)``.
    """
    if python:
        match = _PY_DEF.match(line)
        return match.group(2) if match else None
    match = _C_TYPE.match(line)
    if match:
        return match.group(1)
    if line[:1].isspace() or not line.strip():
        return None  # C-like functions start in column 0; indented lines are bodies
    bare = _C_ATTR.sub("", line)
    match = _C_FUNC.match(bare)
    if match:
        return match.group(1)
    stripped = bare.rstrip()
    if following and not stripped.endswith((";", "{", "}", ")", ",", "\\")) \
            and not stripped.startswith(("#", "template", "//", "/*")):
        match = _C_NEXT.match(following)
        return match.group(1) if match else None
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip()) if line.strip() else 1 << 30


def scope_of(lines: Sequence[str], index: int, python: bool, indent: int) -> str:
    """The definition enclosing line ``index`` (0-based; scanning upwards from it).

    Python needs a ``def``/``class`` indented less than the change (``indent``),
    so top-level code after a function is not "in" it; C-like code takes the
    nearest function or type above, as git's hunk headers do.
    """
    for i in range(min(index, len(lines) - 1), -1, -1):
        name = definition(lines[i], python, lines[i + 1] if i + 1 < len(lines) else "")
        if name and (not python or _indent(lines[i]) < indent):
            return name
    return TOP


def scoped_hunks(git: Git, old: str, new: str) -> list[Hunk]:
    """The changes between two commits, one hunk each, ``section`` = enclosing definition.

    The scope is found in the pre-image file itself, not from git's hunk header,
    so an unrelated line upstream adds above (an import, a constant) never
    changes it; only a different enclosing function or class does.
    """
    out = []
    files: dict[str, list[str]] = {}
    for hunk in diff_hunks(git, old, new):
        if hunk.path not in files:
            blob = git.read_blob(old, hunk.path)
            files[hunk.path] = blob.decode("utf-8", "replace").splitlines() if blob else []
        changed = next((x for x in (*hunk.removed, *hunk.added) if x.strip()), "")
        # A removal starts at its first removed line (look above it); an
        # insertion follows line source_start (look from there).
        start = hunk.source_start - (2 if hunk.source_length else 1)
        scope = scope_of(files[hunk.path], start, is_python(hunk.path), _indent(changed))
        out.append(replace(hunk, section=scope))
    return out


def moved_hunks(before: Sequence[Hunk], after: Sequence[Hunk]) -> list[str]:
    """Hunks whose change now sits in a different section than at the base.

    Hunks are matched on (file, removed lines, added lines); a hunk that no
    longer appears verbatim was merged with upstream's edits and is not judged.
    """
    def grouped(hunks: Sequence[Hunk]) -> dict[tuple[str, tuple[str, ...], tuple[str, ...]],
                                               Counter[str]]:
        out: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Counter[str]] = {}
        for h in hunks:
            out.setdefault((h.path, h.removed, h.added), Counter())[section_key(h.section)] += 1
        return out

    old, new = grouped(before), grouped(after)
    moved = []
    for key, sections in new.items():
        if key in old and sections != old[key]:
            want = ", ".join(sorted(old[key]))
            got = ", ".join(sorted(sections))
            moved.append(f"{key[0]}: hunk belongs in `{want}` but landed in `{got}`")
    return moved


def _norm(line: str) -> str:
    return " ".join(line.split())


def _section_region(lines: list[str], section: str, path: str) -> list[str] | None:
    """The lines of ``section``: from its definition to the next one at its level.

    None when the file has no such section any more (renamed or removed).
    """
    if section in ("", TOP):
        return lines
    python, key, head = is_python(path), section_key(section), section.strip()[:60]
    def name(i: int) -> str | None:
        return definition(lines[i], python, lines[i + 1] if i + 1 < len(lines) else "")

    for start, line in enumerate(lines):
        if name(start) == key or (head and line.startswith(head)):
            level = _indent(line)
            end = next((i for i in range(start + 1, len(lines))
                        if name(i) and (not python or _indent(lines[i]) <= level)), len(lines))
            return lines[start:end]
    return None


def _is_subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(line == h for h in it) for line in needle)


def _contains_block(block: list[str], hay: list[str]) -> bool:
    size = len(block)
    return any(hay[i:i + size] == block for i in range(len(hay) - size + 1))


def effect_present(git: Git, tree: str, hunks: Sequence[Hunk]) -> bool:
    """Is every hunk's effect already in ``tree``?

    Upstream may land the same change with slightly different surroundings, so
    this compares the effect, not the text around it: in the same file and
    section, the hunk's added lines are present in order (blank lines and
    whitespace ignored) and its removed block is gone.
    """
    if not hunks:
        return False
    contents: dict[str, list[str] | None] = {}
    for hunk in hunks:
        if hunk.path not in contents:
            blob = git.read_blob(tree, hunk.path)
            contents[hunk.path] = (None if blob is None else
                                   blob.decode("utf-8", "replace").splitlines())
        lines = contents[hunk.path]
        added = [_norm(x) for x in hunk.added if _norm(x)]
        removed = [_norm(x) for x in hunk.removed if _norm(x)]
        if lines is None:
            if added:
                return False
            continue
        region = _section_region(lines, hunk.section, hunk.path)
        if region is None:
            return False
        region = [x for x in map(_norm, region) if x]
        if added and not _is_subsequence(added, region):
            return False
        if removed and removed != added and _contains_block(removed, region):
            return False
    return True


def diff_hunks(git: Git, old: str, new: str, *, context: int = 0) -> list[Hunk]:
    """Hunks of ``git diff old new`` with ``context`` lines (0: one hunk per change)."""
    text = git.run("diff", f"-U{context}", "--no-renames", "--no-color", "--no-ext-diff",
                   old, new, "--", env=EXPORT_ENV, strip=False)
    return parse_hunks(text, f"diff {old[:10]}..{new[:10]}")


class Carrier:
    """Carries one series onto upstream commits, remembering every probe.

    ``base`` is the commit the series was made against; when it is in the
    cache the series is first applied there exactly (this also writes every
    pre-image blob the later 3-way merges need) and the per-change sections
    come from those commits.  Without it, the hunks of the patch files are the
    reference.
    """

    def __init__(self, git: Git, patches: list[MailPatch], base: Sha | None) -> None:
        self.git = git
        self.patches = patches
        self.base = base
        self.probes = 0
        self._seen: dict[tuple[str, int], Carry] = {}
        if base is not None:
            applied = apply_series(git, base, patches)
            parents = [base] + [a.commit for a in applied[:-1]]
            self.reference = [scoped_hunks(git, p, a.commit)
                              for p, a in zip(parents, applied, strict=True)]
        else:
            self.reference = [parse_hunks(p.diff, p.name) for p in patches]

    def carry(self, onto: str, *, start: int = 0) -> Carry:
        """Apply patches[start:] on ``onto`` (a commit); cached per commit."""
        key = (onto, start)
        if key not in self._seen:
            self.probes += 1
            self._seen[key] = self._carry(Sha(onto), start)
        return self._seen[key]

    def _carry(self, onto: Sha, start: int) -> Carry:
        git = self.git
        results: list[PatchCarry] = []
        parent = onto
        with git.temp_index(onto) as env:
            tree = Sha(git.run("write-tree", env=env))
            for index in range(start, len(self.patches)):
                patch = self.patches[index]
                outcome = self._one(env, index, patch, parent, tree)
                results.append(outcome)
                if outcome.state in (CONFLICT, MOVED):
                    break
                if outcome.state == APPLIED and outcome.commit is not None:
                    parent = outcome.commit
                    tree = Sha(git.run("rev-parse", f"{parent}^{{tree}}"))
        return Carry(onto, results, parent)

    def _one(self, env: dict[str, str], index: int, patch: MailPatch, parent: Sha,
             tree: Sha) -> PatchCarry:
        git = self.git
        ok, err = apply_one(git, env, patch, three_way=True)
        if not ok:
            files = _unmerged(git, env) or _failed_files(err)
            git.run("read-tree", tree, env=env)  # drop the conflict stages
            if effect_present(git, tree, self.reference[index]):
                return PatchCarry(patch.name, UPSTREAM, how="present")
            hunks = _stale_hunks(git, tree, patch, files)
            return PatchCarry(patch.name, CONFLICT, files=files, hunks=hunks)
        new_tree = Sha(git.run("write-tree", env=env))
        if new_tree == tree:
            return PatchCarry(patch.name, UPSTREAM, how="empty")
        commit = git.commit_tree(new_tree, [parent], patch.message, patch.author)
        carried = (scoped_hunks(git, parent, commit) if self.base is not None
                   else diff_hunks(git, parent, commit, context=3))
        moved = moved_hunks(self.reference[index], carried)
        if moved:
            git.run("read-tree", tree, env=env)
            return PatchCarry(patch.name, MOVED, files=sorted({m.split(":")[0] for m in moved}),
                              hunks=moved)
        return PatchCarry(patch.name, APPLIED, commit=commit)


def _unmerged(git: Git, env: dict[str, str]) -> list[str]:
    out = git.run("ls-files", "-u", "-z", env=env, strip=False)
    return sorted({entry.split("\t", 1)[1] for entry in out.split("\0") if "\t" in entry})


_FAILED = re.compile(r"^error: (?:patch failed: |)([^:\n]+?)(?::\d+| does not exist in index"
                     r"|: does not exist in index|: already exists in index)", re.M)


def _failed_files(err: str) -> list[str]:
    return sorted({m.group(1).strip() for m in _FAILED.finditer(err)})


def _stale_hunks(git: Git, tree: str, patch: MailPatch, files: list[str]) -> list[str]:
    """The patch's hunks in ``files`` whose pre-image text is no longer in ``tree``."""
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    out: list[str] = []
    try:
        parsed = PatchSet(patch.diff)
    except UnidiffParseError:  # split_mail parsed it already; a description only
        return out
    for pfile in parsed:
        if files and pfile.path not in files:
            continue
        blob = git.read_blob(tree, pfile.path)
        text = blob.decode("utf-8", "replace").splitlines() if blob is not None else []
        for hunk in pfile:
            pre = [line.value.rstrip("\n") for line in hunk if line.is_context or line.is_removed]
            if blob is None or not _contains_block(pre, text):
                header = f"@@ -{hunk.source_start},{hunk.source_length} " \
                         f"+{hunk.target_start},{hunk.target_length} @@"
                out.append(f"{pfile.path} {header} {hunk.section_header.strip()}".rstrip())
    return out


def first_parent_path(git: Git, base: str, target: str) -> list[Sha]:
    """Commits on target's first-parent line that base lacks, oldest first."""
    out = git.run("rev-list", "--first-parent", "--reverse", f"{base}..{target}")
    return [Sha(s) for s in out.split()]


def first_true(items: Sequence[str], pred: Callable[[str], bool]) -> int:
    """Index of the first item where ``pred`` holds, by bisection.

    ``pred`` is known to hold for the last item and assumed monotone (false,
    then true); it is probed at most ceil(log2 len(items)) times.
    """
    lo, hi = 0, len(items) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(items[mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo


def probe_budget(commits: int) -> int:
    """The most apply probes a sync over ``commits`` commits may spend on one bisection."""
    return math.ceil(math.log2(max(commits, 1))) + 2


def load_patches(git: Git, files: list[tuple[str, bytes]]) -> list[MailPatch]:
    """Split stored patch files (name, bytes) as ``git am`` would."""
    from contrib.series import split_mail

    if not files:
        raise PatchError("empty series: nothing to carry")
    return [split_mail(git, name, raw) for name, raw in files]


# -- one sync decision ------------------------------------------------------

UNCHANGED, REBASED, UPSTREAMED = "unchanged", "rebased", "upstreamed"
PARTIAL, ERROR = "partially-upstreamed", "error"


@dataclass
class Breakage:
    """Where a series stops carrying: the first upstream commit that breaks it."""

    commit: Landing
    index: int  # position of the failing patch in the series
    patch: PatchCarry
    head: Sha  # the earlier patches carried onto ``commit``
    probes: int  # apply probes the search spent (the probe at the target included)
    upstream_before: list[str] = field(default_factory=list)  # emptied at ``commit``

    @property
    def reason(self) -> str:
        return self.patch.state


@dataclass
class Plan:
    """What syncing one series from ``base`` to ``target`` comes to (nothing written)."""

    result: str
    base: Sha
    target: Sha
    commits: int = 0
    probes: int = 0
    files: list[tuple[str, bytes]] = field(default_factory=list)
    landed: list[tuple[str, Landing | None]] = field(default_factory=list)
    breakage: Breakage | None = None
    notes: list[str] = field(default_factory=list)


def plan_sync(git: Git, patches: list[MailPatch], base: Sha, target: Sha) -> Plan:
    """Carry ``patches`` (made at ``base``) onto ``target``; decide the result.

    Walks the first-parent path base..target only by bisection: the carry at
    the target is one probe, finding the breaking commit ceil(log2 N) more,
    and each already-upstream patch's landing commit its own bisection.
    """
    if base == target:
        return Plan(UNCHANGED, base, target)
    plan = Plan(REBASED, base, target)
    have_base = git.try_rev_parse(base) is not None
    path = _path(git, base, target, have_base, plan)
    bisect = bool(path)
    path = path or [target]
    carrier = Carrier(git, patches, base if have_base else None)
    final = carrier.carry(target)
    if final.failed is not None:
        index = first_true(path, lambda c: carrier.carry(c).failed is not None)
        at = carrier.carry(path[index])
        failed_index = at.failed_index
        assert failed_index is not None and at.failed is not None
        plan.breakage = Breakage(Landing.of(git, path[index]), failed_index, at.failed, at.tip,
                                 carrier.probes,
                                 [p.name for p in at.patches if p.state == UPSTREAM])
        plan.result = CONFLICT
    for index, outcome in enumerate(final.patches):
        if outcome.state != UPSTREAM:
            continue
        landing = None
        if bisect:
            landing = Landing.of(git, path[_landed_at(carrier, path, index)])
        plan.landed.append((outcome.name, landing))
    plan.probes = carrier.probes
    if plan.breakage is None:
        if len(plan.landed) == len(patches):
            plan.result = UPSTREAMED
        else:
            plan.result = PARTIAL if plan.landed else REBASED
            from contrib.series import export_series

            plan.files = export_series(git, target, final.tip)
    return plan


def _landed_at(carrier: Carrier, path: list[Sha], index: int) -> int:
    """First commit of ``path`` at which patch ``index`` is already upstream."""
    def upstream_at(commit: str) -> bool:
        return carrier.carry(commit).state_of(index) == UPSTREAM

    return first_true(path, upstream_at)


def _path(git: Git, base: str, target: str, have_base: bool, plan: Plan) -> list[Sha]:
    """The commits to bisect over: target's first-parent line since the base (empty: none).

    When the base is not an ancestor of the target (a release branch, or a
    rewritten history) the line starts after their merge base; with no merge
    base at all there is nothing to bisect and the carry happens at the
    target only.
    """
    if have_base and git.is_ancestor(base, target):
        plan.commits = git.count(f"{base}..{target}")
        return first_parent_path(git, base, target)
    status, out, _ = git.try_run("merge-base", base, target) if have_base else (1, "", "")
    if status == 0 and out.strip():
        fork = out.strip()
        path = first_parent_path(git, base, target)
        plan.commits = len(path)
        if path:
            plan.notes.append(f"base {base[:12]} is not an ancestor of {target[:12]} (upstream "
                              f"rewrote its history, or the base is on a release branch); "
                              f"carried 3-way, bisecting from their merge base {fork[:12]}")
            return path
        plan.notes.append(f"target {target[:12]} is behind base {base[:12]}; applied 3-way "
                          "directly at the target")
        return []
    if not have_base:
        plan.notes.append(f"base {base[:12]} is no longer in the upstream cache (history "
                          f"rewritten?); applied directly at {target[:12]}")
    else:
        plan.notes.append(f"base {base[:12]} is not an ancestor of {target[:12]} and shares "
                          "no history with it (upstream rewrote its history); applied 3-way "
                          "directly at the target, no bisection")
    return []
