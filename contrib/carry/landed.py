"""Has upstream already landed a patch in its own form?  The one rule, with its evidence.

A PR often lands squashed, with review changes, and upstream keeps editing the
same file afterwards: the patch then neither applies, nor reverse-applies, nor
matches by effect in its definitions, yet nearly every line it adds is at the
tip.  This module measures that from the lines themselves, each counted only at
the place its hunk makes it (:mod:`contrib.carry.places`: its file, the
definition enclosing it at the base):

* **share** -- of the patch's meaningful added lines (see :func:`meaningful`),
  how many the target's place has more often than the base's place (renames of
  the file followed); blobs come through the one batch reader, so this pre-check
  costs no process per file;
* **by** -- which commits of base..target brought those present lines, each by
  its own diff (``git log -p`` of the patch's files): a line belongs to the last
  commit whose diff added it, unless a later one removed it again (a revert), so a
  landing, its revert and the reland credit the reland; a later commit that only
  moves or re-indents a line takes no credit from it (blame would give it all);
* **gone** -- of its meaningful removed lines, how many occur less often at their
  place at the target than at the base.

THE RULE (:func:`decide`): the patch is landed when every place shows upstream
made the change there (some of its added lines present, some of its removed
lines gone), at least ``threshold`` of its added lines are present (default
:data:`LANDED_SHARE`, 80%), at least that share of its removed lines are gone,
and one commit brought most of the present lines (or its own diff wrote the
share): that commit landed it, the later ones that touched its files are
``changed_by``.  Why by place: gate fixes repeat a line across a file, and
upstream widening the gate next door does not widen this one.  Why 80%: review
rewords a few lines of a PR and later commits rewrite a few more.  Why one
commit bringing most of them: upstream writing the same thing independently
spreads it over commits.  A place where the tip has nothing of it is accounted for
when a commit of the same walk wrote its lines there and the place was rewritten
since (landed, then changed); a series is judged by its net change
(:func:`contrib.carry.places.series_places`), and a patch that does not land alone
lands with its series when the series does.  A patch that only removes lines is landed when every
removed line is gone from its place; the oldest commit of base..target that
changed the count of its longest one (``git log -S``) landed it.  The sync asks
this only of a patch that no longer carries: one that still changes the tree is
never dropped (:mod:`contrib.carry.plan`).  ``[sync_rules] landed_share`` in
patchset.toml tunes the threshold per patchset.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from contrib.carry.places import (
    FileView,
    Place,
    Span,
    count,
    meaningful,
    series_places,
    upstream_spans,
)
from contrib.carry.series import parse_hunks
from contrib.git.repo import Git
from contrib.ui import counted

__all__ = ["FLOOR", "LANDED_SHARE", "Evidence", "Look", "meaningful", "measure", "same_subject"]

LANDED_SHARE = 0.8  # the default threshold; see the module docstring for why
FLOOR = 0.3  # below this share present, nothing upstream is worth blaming
_SHOWN = 5  # at most this many commits named as "by" or "changed by"
_CANDIDATES = 8  # at most this many commits asked whether they held a missing place


@dataclass(frozen=True)
class Evidence:
    """What the tip says about one patch; :attr:`landed_by` is set when the rule holds."""

    threshold: float
    lines: int = 0  # meaningful added lines
    present: int = 0  # of them found at the target
    by: tuple[tuple[str, int], ...] = ()  # (commit, added lines its own diff brought), most first
    removed: int = 0  # meaningful removed lines
    gone: int = 0  # of them gone at the target
    landed_by: str | None = None
    changed_by: tuple[str, ...] = ()  # later commits that touched its files, oldest first
    paths: tuple[str, ...] = field(default=(), compare=False)  # its files at the target
    missing: tuple[str, ...] = ()  # places where upstream has nothing of its change
    whole: bool = False  # every place holds the change itself (the threshold of each)
    rewritten: tuple[str, ...] = ()  # places that once held it upstream, rewritten since
    undone: bool = False  # its whole change is undone within its series
    with_series: bool = False  # landed as part of its series' net change
    rewriters: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def share(self) -> float:
        """Share of the patch found at the target: added lines, else removed lines gone."""
        if self.lines:
            return self.present / self.lines
        return self.gone / self.removed if self.removed else 0.0

    def summary(self) -> str:
        """One line for a person, e.g. "62% of its added lines are upstream, most from X"."""
        if self.undone:
            text = "its change is undone by another patch of its series"
            return text + (", which upstream landed" if self.landed_by else "")
        if not self.lines and not self.removed:
            return "it adds or removes no meaningful line to look for upstream"
        if not self.lines:
            return f"{self.gone} of its {counted(self.removed, 'removed line')} are gone upstream"
        text = f"{round(self.share * 100)}% of its added lines are upstream"
        if self.by:
            sha, count = self.by[0]
            text += f", {round(count / self.lines * 100)}% from {sha[:10]}"
            if len(self.by) > 1:
                text += f" and the rest from {counted(len(self.by) - 1, 'other commit')}"
        if self.rewritten:
            text += f"; {counted(len(self.rewritten), 'place')} held it once and were rewritten since"
        if self.with_series:
            text += "; landed with its series"
        return text

    def why_not(self) -> str:
        """Why the rule did not call it landed (for a note): the reason that holds."""
        if self.landed_by is not None:
            return ""
        if self.missing:
            more = f" and {counted(len(self.missing) - 1, 'other place')}" \
                if len(self.missing) > 1 else ""
            return f"upstream has nothing of it where it makes its change in {self.missing[0]}{more}"
        if self.lines and self.present < self.threshold * self.lines:
            return f"below the landed_share of {self.threshold:.0%}"
        if self.removed and self.gone < self.threshold * self.removed:
            return f"only {self.gone} of its {counted(self.removed, 'removed line')} are gone"
        return "no single upstream commit brought more than half of them; several did"


_SUBJECT_NOISE = re.compile(r"^\[[^]]*\]\s*|\s*\(#\d+\)\s*$|^\w+(?:\([^)]*\))?!?:\s*")
_WORD = re.compile(r"[a-z0-9_]+")


def same_subject(ours: str, theirs: str) -> bool:
    """Whether upstream's subject tells of the same change (it corroborates the lines;
    it never decides: review often retitles a PR).  ``[PATCH]``/``[Feature]`` tags, a
    conventional ``type(scope):`` prefix and a trailing ``(#123)`` are ignored; then
    one's words contain the other's, or they share at least half of all their words."""
    def words(subject: str) -> set[str]:
        for _ in range(3):
            subject = _SUBJECT_NOISE.sub("", subject.strip())
        return set(_WORD.findall(subject.lower()))

    a, b = words(ours), words(theirs)
    if not a or not b:
        return False
    return a <= b or b <= a or len(a & b) >= len(a | b) / 2


def measure(git: Git, diff: str, name: str, base: str | None, target: str,
            threshold: float = LANDED_SHARE) -> Evidence:
    """The evidence for one patch (its ``diff``) made at ``base``, looked for at ``target``;
    its commits are asked for from a share of :data:`FLOOR` (a conflict's partial evidence)."""
    return Look(git, [(name, diff)], base, target, threshold).evidence(0, FLOOR)


class Look:
    """The tip's view of a series: every file the series touches read once (one batch
    per commit, renames asked once) and squashed once, each patch's places found
    once (:mod:`contrib.carry.places`); each patch's evidence is counted on demand
    and kept, so asking again with a lower ``blame_from`` (the conflicting patch's
    partial evidence) costs only the history walk."""

    def __init__(self, git: Git, patches: Sequence[tuple[str, str]], base: str | None,
                 target: str, threshold: float = LANDED_SHARE) -> None:
        self.git, self.base, self.target, self.threshold = git, base, target, threshold
        hunks = [parse_hunks(diff, name) for name, diff in patches]
        paths = list(dict.fromkeys(h.path for series in hunks for h in series))
        now = git.read_blobs(target, paths) if paths else {}
        then = git.read_blobs(base, paths) if base and paths else {}
        # Only a file the base had can have been renamed (not one the patch creates).
        missing = [p for p in paths if now[p] is None and then.get(p) is not None]
        renamed = _renames(git, base, target, missing) if base and missing else {}
        self._where = {p: renamed.get(p, p) if now[p] is None else p for p in paths}
        if renamed:
            now |= git.read_blobs(target, [self._where[p] for p in paths
                                           if self._where[p] != p])
        self._now = {p: FileView(p, now.get(self._where[p])) for p in paths}
        self._then = {p: FileView(p, then.get(p)) for p in paths}
        placed = series_places(hunks, self._then)
        self._places, self._undone = placed.places, placed.undone
        self._done: dict[int, tuple[float, Evidence, Brought]] = {}
        self._whole: dict[float, Evidence] = {}
        self._upstream: dict[tuple[str, str | None], list[Span]] = {}

    def evidence(self, index: int, blame_from: float | None = None) -> Evidence:
        """Patch ``index``'s evidence; the history of its files is read only when the
        tip has ``blame_from`` (default: the threshold) of its added lines: below
        that, nothing can land it, and the pre-check stays cheap.  A patch the rule
        does not land alone (its removed lines still stand, or several commits brought
        its lines) lands with its series when the series' net change does (upstream
        lands a branch squashed: its review commits are no unit upstream), provided
        its own share is at the threshold and none of its places is missing."""
        bar = self.threshold if blame_from is None else blame_from
        ev = self._own(index, bar)
        if ev.landed_by is None and not ev.missing and len(self._places) > 1 \
                and (ev.undone or ev.share >= ev.threshold):
            series = self._series(bar)
            if series.landed_by is not None:
                ev = replace(ev, landed_by=series.landed_by, changed_by=series.changed_by,
                             with_series=True)
        return ev

    def _own(self, index: int, bar: float) -> Evidence:
        """Patch ``index``'s evidence by its own places."""
        done = self._done.get(index)
        if done is not None and (done[0] <= bar or done[1].share < bar):
            return done[1]  # blamed already, or below the bar: nothing more to ask
        places = self._places[index]
        if not places:
            return Evidence(self.threshold, undone=bool(self._undone[index]))
        ev, present, missing = self._count(places)
        by = Brought()
        if self.base is not None:
            longest = max(((len(r), r, self._where[p.path]) for p in places
                           for r in p.raw_removed), default=None)
            if ev.lines and ev.share >= bar:
                by = _brought(self.git, self.base, self.target, present,
                              {p.path for p in places}, self._where, self._then,
                              Counter(line for p in missing for line in p.added))
                ev = self._rewritten(ev, missing, by)
            ev = decide(self.git, ev, self.base, self.target, by,
                        longest[1:] if longest else None)
        self._done[index] = (bar, ev, by)
        return ev

    def _series(self, bar: float) -> Evidence:
        """The series' net change judged as one patch, from each patch's own count and
        the commits that brought its lines (no history is read twice)."""
        if bar not in self._whole:
            evs = [self._own(k, bar) for k in range(len(self._places))]
            credit: Counter[str] = Counter()
            wrote: Counter[str] = Counter()
            for k in range(len(evs)):
                brought = self._done[k][2] if k in self._done else Brought()
                credit.update(dict(brought.by))
                wrote.update(brought.wrote)
            ev = Evidence(self.threshold, sum(e.lines for e in evs),
                          sum(e.present for e in evs), (), sum(e.removed for e in evs),
                          sum(e.gone for e in evs),
                          paths=tuple(dict.fromkeys(p for e in evs for p in e.paths)),
                          missing=tuple(m for e in evs for m in e.missing),
                          whole=all(e.whole or e.undone for e in evs),
                          rewritten=tuple(r for e in evs for r in e.rewritten),
                          rewriters=frozenset(r for e in evs for r in e.rewriters))
            by = Brought(sorted(credit.items(), key=lambda kv: (-kv[1], kv[0])), dict(wrote))
            self._whole[bar] = decide(self.git, ev, self.base, self.target, by, None) \
                if self.base is not None and ev.lines else ev
        return self._whole[bar]

    def _rewritten(self, ev: Evidence, missing: list[Place], by: Brought) -> Evidence:
        """``ev`` with the places that upstream once held and rewrote since taken from its
        missing ones: a commit of base..target whose own diff added lines of the place
        held the change there (the threshold of it, at that place, in that commit's
        tree), and the place at the target is no longer as the base had it."""
        held, rewriters = [], set()
        for place in missing:
            if not self._changed_here(place):
                continue  # upstream went back to the base there: nothing of it stands
            wanted = set(place.added)
            # The commits that wrote most of its lines first, and only a few: each asks
            # for a blob (and, off a definition, a diff).
            wrote = sorted(range(len(by.order)), key=lambda k: (
                -len(wanted & by.adds.get(by.order[k], set())), k))[:_CANDIDATES]
            for at in wrote:
                if wanted & by.adds.get(by.order[at], set()) and self._held_at(place, by.order[at]):
                    held.append(place)
                    rewriters |= {s for s in by.order[at + 1:] if wanted & by.drops.get(s, set())}
                    break
        if not held:
            return ev
        return replace(ev, missing=tuple(p.label for p in missing if p not in held),
                       rewritten=tuple(p.label for p in held), rewriters=frozenset(rewriters))

    def _changed_here(self, place: Place) -> bool:
        found = count(place, self._now[place.path], self._then[place.path],
                      partial(self._spans, place.path))
        return found.changed

    def _held_at(self, place: Place, sha: str) -> bool:
        """Whether upstream's tree at ``sha`` holds the change at ``place``."""
        path = self._where[place.path]
        blob = self.git.read_blobs(sha, [path])[path]
        if blob is None and path != place.path:
            path = place.path
            blob = self.git.read_blobs(sha, [path])[path]
        if blob is None:
            return False
        found = count(place, FileView(path, blob), self._then[place.path],
                      partial(self._spans, place.path, sha, path))
        return found.whole(place, self.threshold)

    def _spans(self, path: str, at: str | None = None, there: str | None = None) -> list[Span]:
        """Upstream's own -U0 diff of ``path``, base to the target (or to ``at``, where
        the file is ``there``), asked once per file and commit."""
        key = (path, at)
        if key not in self._upstream:
            status, out = 1, ""
            if self.base is not None and self._then[path].raw and (at or self._now[path].raw):
                status, out, _ = self.git.try_run(
                    "diff", "-U0", "--no-color", "--no-ext-diff", "--no-renames",
                    f"{self.base}:{path}", f"{at or self.target}:{there or self._where[path]}")
            self._upstream[key] = upstream_spans(out) if status == 0 else []
        return self._upstream[key]

    def _count(self, places: list[Place]) -> tuple[Evidence, Counter[str], list[Place]]:
        """The anchored counts of one patch, its added lines present at their places, and
        the places where upstream has nothing of it."""
        present: Counter[str] = Counter()
        gone, missing, whole = 0, [], True
        for place in places:
            found = count(place, self._now[place.path], self._then[place.path],
                          partial(self._spans, place.path))
            present += found.present
            gone += found.gone
            whole = whole and found.whole(place, self.threshold)
            if not found.accounted(place):
                missing.append(place)
        ev = Evidence(self.threshold, sum(len(p.added) for p in places),
                      sum(present.values()), (), sum(len(p.removed) for p in places), gone,
                      paths=tuple(dict.fromkeys(self._where[p.path] for p in places)),
                      missing=tuple(p.label for p in missing), whole=whole)
        return ev, present, missing


def decide(git: Git, ev: Evidence, base: str, target: str, brought: Brought,
           longest: tuple[str, str] | None) -> Evidence:
    """Apply THE RULE to the counted evidence and the commits that brought the lines."""
    landed, by = None, brought.by
    if ev.missing:
        pass  # a place where upstream has nothing of it: never landed
    elif ev.lines:
        present = ev.present >= ev.threshold * ev.lines
        gone_ok = not ev.removed or ev.gone >= ev.threshold * ev.removed
        # One commit brought most of its lines (a reland edited in place since),
        # or its own diff wrote the share when it was made: no coincidence of several.
        carried = bool(by) and (2 * by[0][1] > ev.lines
                                or brought.wrote.get(by[0][0], 0) >= ev.threshold * ev.lines)
        landed = by[0][0] if present and gone_ok and carried else None
    elif longest and ev.gone == ev.removed:
        landed = _remover(git, base, target, *longest)
    changed: tuple[str, ...] = ()
    if landed is not None:
        later = git.run("rev-list", "--reverse", f"{landed}..{target}", "--", *ev.paths).split()
        # The commits that rewrote a place it once held are named first.
        shown = [c for c in later if c in ev.rewriters][:_SHOWN]
        shown += [c for c in later if c not in ev.rewriters][:_SHOWN - len(shown)]
        changed = tuple(c for c in later if c in shown)
    return replace(ev, by=tuple(by[:_SHOWN]), landed_by=landed, changed_by=changed)


# -- asking git which commits brought them ---------------------------------------------------

def _brought(git: Git, base: str, target: str, need: Counter[str], files: set[str],
             where: dict[str, str], then: dict[str, FileView],
             extra: Counter[str] | None = None) -> Brought:
    """Commits of base..target whose own diffs brought the patch's added lines present
    at its places (``need``) to the tip: (sha, lines), most first, and how many each
    diff wrote when it was made.
    Each wanted line keeps a stack of who added its copies (the base's at the
    bottom): a commit's net additions of the line push it, net removals pop the
    newest, so a revert takes the landing's credit away and a move changes nothing.
    The same walk notes which commits' diffs added any line of ``extra`` (the lines
    of places the tip has nothing of: did upstream once write them there?)."""
    stacks = {line: [""] * sum(Counter(then[p].lines)[line] for p in files) for line in need}
    paths = sorted({*files, *(where[p] for p in files)})
    status, out, _ = git.try_run("log", "--reverse", "--no-merges", "--no-renames", "--no-color",
                                 "--no-ext-diff", "-p", "-U0", "--format=%x00%H",
                                 f"{base}..{target}", "--", *paths)
    wrote: Counter[str] = Counter()
    wanted = need | (extra or Counter())
    order: list[str] = []
    adds: dict[str, set[str]] = {}
    drops: dict[str, set[str]] = {}
    for chunk in out.split("\0")[1:] if status == 0 else []:
        sha, _, diff = chunk.partition("\n")
        order.append(sha)
        for line, n in _net(diff, wanted).items():
            if extra and line in extra:
                (adds if n > 0 else drops).setdefault(sha, set()).add(line)
            if line not in need:
                continue
            stack = stacks[line]
            if n > 0:
                stack += [sha] * n
                wrote[sha] += min(n, need[line])
            else:
                del stack[max(0, len(stack) + n):]
    credit: Counter[str] = Counter()
    for line, stack in stacks.items():
        credit.update(s for s in [s for s in stack if s][:need[line]])
    return Brought(sorted(credit.items(), key=lambda kv: (-kv[1], kv[0])), dict(wrote),
                   order, adds, drops)


@dataclass(frozen=True)
class Brought:
    """Who brought a patch's lines: ``by`` as the tip has them (most first), and how
    many of them each commit's own diff wrote."""

    by: list[tuple[str, int]] = field(default_factory=list)
    wrote: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # the commits walked, oldest first
    adds: dict[str, set[str]] = field(default_factory=dict)  # commit -> extra lines it added
    drops: dict[str, set[str]] = field(default_factory=dict)  # commit -> extra lines it removed


def _net(diff: str, wanted: Counter[str]) -> Counter[str]:
    """Per wanted line: how many more copies one commit's diff added than it removed."""
    net: Counter[str] = Counter()
    for raw in diff.splitlines():
        if raw.startswith(("+++ ", "--- ")) or raw[:1] not in ("+", "-"):
            continue
        line = " ".join(raw[1:].split())
        if line in wanted:
            net[line] += 1 if raw[0] == "+" else -1
    return Counter({k: v for k, v in net.items() if v})


def _renames(git: Git, base: str, target: str, gone: Sequence[str]) -> dict[str, str]:
    """Old path -> new path for the files of ``gone`` renamed between base and target.

    Rename detection is asked first only among paths ending in the same file name as
    one of ``gone`` (a moved file usually keeps it): over thousands of upstream
    commits a whole-tree ``diff -M`` costs a second, this a few milliseconds.  A file
    still unaccounted for is paired only with the files upstream added since.
    """
    names = sorted({f":(glob)**/{path.rsplit('/', 1)[-1]}" for path in gone})
    found = _renamed(git, base, target, names)
    left = [path for path in gone if path not in found]
    if left:
        # Renamed to another name: rename detection between the files still missing and
        # the files base..target added with the same extension (a whole-tree -M costs
        # half a second in sglang; the added list, 30 ms, the restricted -M 10 ms).
        status, out, _ = git.try_run("diff", "--name-only", "-z", "--no-renames",
                                     "--diff-filter=A", base, target)
        kinds = {_extension(path) for path in left}
        added = [p for p in out.split("\0") if p and _extension(p) in kinds] if status == 0 else []
        if added:
            found |= _renamed(git, base, target, [*left, *added], literal=True)
    return {old: new for old, new in found.items() if old in gone}


def _extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1] if "." in name else ""


def _renamed(git: Git, base: str, target: str, pathspec: list[str],
             literal: bool = False) -> dict[str, str]:
    status, out, _ = git.try_run(*(["--literal-pathspecs"] if literal else []), "diff",
                                 "--name-status", "-z", "-M", "--diff-filter=R",
                                 base, target, "--", *pathspec)
    if status != 0:
        return {}
    parts = out.split("\0")
    return {parts[i + 1]: parts[i + 2] for i in range(0, len(parts) - 2, 3)
            if parts[i].startswith("R")}


def _remover(git: Git, base: str, target: str, line: str, path: str) -> str | None:
    """The oldest commit of base..target that changed how often ``line`` occurs in ``path``
    (for a patch that only removes lines: its longest removed line)."""
    status, out, _ = git.try_run("log", "--format=%H", "--reverse", f"-S{line}",
                                 f"{base}..{target}", "--", path)
    shas = out.split() if status == 0 else []
    return shas[0] if shas else None
