"""Where a patch makes its change, and what upstream has there: the anchored count.

A hunk's *place* is its file and the definition enclosing its change at the base
(:func:`contrib.carry.scope.enclosing`: a Python ``def``/``class``, a C/CUDA
function or type); a change outside every definition is placed in its file.  At
the target the place is the definition of that name whose body is most like the
base's (two ``forward`` methods stay apart), or the whole file.  A hunk's added
line counts as present only when the target's place has more copies of it than
the base's place had, and a removed line as gone only when the place has fewer.

Why: gate fixes repeat.  flashinfer's ``flashinfer/jit/comm.py`` has
``supported_major_versions=[9, 10, 12]`` three times; a patch that widens
``gen_mixed_comm_module`` is not landed because upstream widened
``gen_trtllm_comm_module`` sixteen lines below.  A file-wide count says it is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from contrib.carry.imports import IMPORTS, block_change, imports
from contrib.carry.scope import TOP, definition, enclosing, extent, language
from contrib.carry.series import Hunk

_BARE = frozenset({"else:", "try:", "finally:", "pass", "return", "break", "continue",
                   "else", "default:", "#endif", "#else", "end", "fi", "done", "do", "then"})
_ALNUM = re.compile(r"[^\W_]")  # a letter or a digit, as str.isalnum() has it


def squash(line: str) -> str:
    """A line as compared: whitespace squashed."""
    return " ".join(line.split())


def meaningful(line: str) -> str:
    """The line as compared (whitespace squashed), or "" when it proves nothing:
    blank, brackets/punctuation only, or a bare keyword."""
    text = squash(line)
    if text in _BARE or not _ALNUM.search(text):
        return ""
    return text


@dataclass
class Place:
    """The lines one patch adds and removes at one place of one file."""

    path: str
    name: str = TOP  # the enclosing definition at the base
    start: int = -1  # the line it starts on at the base (-1: outside every definition)
    window: tuple[int, int] | None = None  # outside: the base lines it replaces [lo, hi)
    added: list[str] = field(default_factory=list)  # meaningful, squashed
    removed: list[str] = field(default_factory=list)
    raw_removed: list[str] = field(default_factory=list)  # stripped, for `git log -S`
    block: bool = False  # the file's top-level imports, matched by name (contrib.carry.imports)

    @property
    def label(self) -> str:
        if self.block:
            return f"{self.path} (imports)"
        if self.window is not None:
            return f"{self.path} (line {self.window[0] + 1})"
        return self.path if self.name == TOP else f"{self.path} ({self.name})"


class FileView:
    """One version of one file: its lines, squashed once, and its definitions by name."""

    def __init__(self, path: str, blob: bytes | None) -> None:
        self.path, self.lang = path, language(path)
        self.raw = blob.decode("utf-8", "replace").splitlines() if blob else []
        self.lines = [squash(x) for x in self.raw]
        self._defs: dict[str, list[int]] | None = None
        self._imports: list[str] | None = None

    @property
    def imports(self) -> list[str]:
        """Its top-level imports, one name each (:func:`contrib.carry.imports.imports`)."""
        if self._imports is None:
            self._imports = imports(self.raw)[0] if self.lang == "python" else []
        return self._imports

    def region(self, start: int) -> list[str]:
        """The squashed lines of the definition starting on ``start`` (-1: the file)."""
        if start < 0 or start >= len(self.raw):
            return self.lines
        return self.lines[start:extent(self.raw, start, self.lang)]

    def find(self, name: str, like: Sequence[str]) -> list[str] | None:
        """The definition called ``name`` most like ``like`` (the base's), else None."""
        if self._defs is None:
            self._defs = {}
            for i, line in enumerate(self.raw):
                found = definition(line, self.lang, self.raw[i + 1] if i + 1 < len(self.raw)
                                   else "")
                if found:
                    self._defs.setdefault(found, []).append(i)
        starts = self._defs.get(name)
        if not starts:
            return None
        want = Counter(like)

        def shared(region: list[str]) -> int:
            return sum((Counter(region) & want).values())

        return max((self.region(i) for i in starts), key=shared)


Key = tuple[str, int | str]  # a place's identity in its file: (path, anchor at the base)


def places_of(hunks: Sequence[Hunk], earlier: Sequence[Sequence[Hunk]],
              base: Mapping[str, FileView]) -> list[Place]:
    """The places of one patch's ``hunks`` (made on the base plus the ``earlier``
    patches of its series), judged alone: every line it adds or removes counts."""
    found = _placed([*earlier, hunks], base)[-1]
    return [p for p in found.values() if p.added or p.removed]


@dataclass(frozen=True)
class SeriesPlaces:
    """The places of every patch of a series, by the series' net change at each
    place; ``undone[k]``: the other patches whose lines cancel patch ``k``'s there."""

    places: list[list[Place]]
    undone: list[set[int]]


def series_places(series: Sequence[Sequence[Hunk]],
                  base: Mapping[str, FileView]) -> SeriesPlaces:
    """The places of each patch of ``series``, judged by the series' net change: a
    line one patch adds and a later one removes at the same place (or removes and a
    later one adds back) is no change of the series there, and counts in neither.
    A later hunk that changes lines an earlier patch added is placed where that
    patch placed them (at the base those lines do not exist)."""
    found = _placed(series, base)
    undone: list[set[int]] = [set() for _ in series]
    for later, mine in enumerate(found):
        for key, place in mine.items():
            for k in range(later - 1, -1, -1):
                other = found[k].get(key)
                if other is None:
                    continue
                if _cancel(place.removed, other.added) + _cancel(place.added, other.removed):
                    undone[later].add(k)
                    undone[k].add(later)
    for mine in found:
        for place in mine.values():
            left, raw = Counter(place.removed), []
            for line in place.raw_removed:
                if left[meaningful(line)] > 0:
                    left[meaningful(line)] -= 1
                    raw.append(line)
            place.raw_removed[:] = raw
    return SeriesPlaces([[p for p in mine.values() if p.added or p.removed] for mine in found],
                        undone)


def _cancel(ours: list[str], theirs: list[str]) -> int:
    """Take the lines common to both lists out of both; how many were taken."""
    common = Counter(ours) & Counter(theirs)
    if common:
        ours[:] = _minus(ours, Counter(common))
        theirs[:] = _minus(theirs, Counter(common))
    return sum(common.values())


def _placed(series: Sequence[Sequence[Hunk]],
            base: Mapping[str, FileView]) -> list[dict[Key, Place]]:
    """Each patch's places by key, with its :func:`meaningful` lines.  A line both
    removed and added in one file by one patch (moved) counts in neither."""
    out: list[dict[Key, Place]] = []
    keys: list[list[Key]] = []
    for k, hunks in enumerate(series):
        found: dict[Key, Place] = {}
        mine: list[Key] = []
        for hunk in hunks:
            inherited = _inherited(hunk, series[:k], keys)
            above = partial(_above, base.get(hunk.path), hunk, series[:k])
            if inherited is not None:
                key, was = inherited
                template = out[was][key]
                place = found.setdefault(key, Place(template.path, template.name,
                                                    template.start, template.window,
                                                    block=template.block))
            else:
                key, place = _anchored(hunk, series[:k], base, above)
                place = found.setdefault(key, place)
            mine.append(key)
            change = block_change(hunk, above()) if place.block else None
            if change is not None:  # the imports it adds and removes, by name
                place.added += change[0]
                place.removed += change[1]
                place.raw_removed += change[1]
                continue
            place.added += [m for m in map(meaningful, hunk.added) if m]
            place.removed += [m for m in map(meaningful, hunk.removed) if m]
            place.raw_removed += [r.strip() for r in hunk.removed if meaningful(r)]
        keys.append(mine)
        for path in {p.path for p in found.values()}:
            same = [p for p in found.values() if p.path == path]
            moved = Counter(a for p in same for a in p.added) & Counter(r for p in same
                                                                        for r in p.removed)
            for lines in ([p.added for p in same], [p.removed for p in same]):
                left = Counter(moved)
                for kept in lines:
                    kept[:] = _minus(kept, left)
        out.append(found)
    return out


def _above(view: FileView | None, hunk: Hunk,
           earlier: Sequence[Sequence[Hunk]]) -> Sequence[str]:
    """The base's lines above ``hunk`` (asked only of a Python file's top-level change)."""
    return view.raw[:_at_base(hunk.source_start - 1, hunk.path, earlier)] if view else []


def _anchored(hunk: Hunk, earlier: Sequence[Sequence[Hunk]],
              base: Mapping[str, FileView],
              above: Callable[[], Sequence[str]]) -> tuple[Key, Place]:
    """The place of a hunk found at the base: the definition it changes there, else
    its file's import block when it changes only top-level imports (``above``: the
    base's lines above it), else the base lines it replaces, else (a file the base
    lacks) the whole file."""
    view = base.get(hunk.path)
    raw = view.raw if view is not None else []
    # A series whose hunks do not add up at the base (edited by hand, or made on
    # another base) may map past its end: the place is then its last line.
    index = min(_at_base(hunk.source_start + hunk.lead - 2, hunk.path, earlier), len(raw) - 1)
    scope = _scope(raw, index, hunk) if raw else None
    if scope:
        return (hunk.path, scope[1]), Place(hunk.path, *scope)
    if raw and language(hunk.path) == "python" and block_change(hunk, above()) is not None:
        return (hunk.path, IMPORTS), Place(hunk.path, IMPORTS, block=True)
    if raw:  # outside every definition: the lines it replaces, and no others
        window = _widened(raw, index + 1, index + 1 + len(hunk.removed))
        return (hunk.path, -2 - window[0]), Place(hunk.path, window=window)
    return (hunk.path, -1), Place(hunk.path)


def _inherited(hunk: Hunk, earlier: Sequence[Sequence[Hunk]],
               keys: Sequence[Sequence[Key]]) -> tuple[Key, int] | None:
    """The key of the earlier hunk whose changed lines ``hunk`` changes (or inserts
    among), and that patch's index; None when it changes lines of the base."""
    at = hunk.source_start - 1 + hunk.lead  # its first change, 0-based, in its preimage
    for k in range(len(earlier) - 1, -1, -1):
        shift, inside = 0, None
        for i, h in enumerate(earlier[k]):
            if h.path != hunk.path:
                continue
            top = h.target_start - 1
            lo, hi = top + h.lead, top + h.target_length - h.trail
            # On the lines it wrote, or right against them (an insertion after them).
            if lo <= at < hi or at == lo or (at == hi and not hunk.removed):
                return keys[k][i], k
            if top + h.target_length <= at:
                shift += h.target_length - h.source_length
            elif top <= at:  # in its context: the same line of its source
                inside = _source_line(h, at)
                break
        at = inside if inside is not None else at - shift
    return None


def _scope(raw: Sequence[str], index: int, hunk: Hunk) -> tuple[str, int] | None:
    """The definition a hunk changes: the one whose first line it rewrites (a kernel's
    signature), else the one enclosing the line above its change."""
    lang, first = language(hunk.path), index + 1
    if hunk.removed and first < len(raw):
        name = definition(raw[first], lang, raw[first + 1] if first + 1 < len(raw) else "")
        if name:
            return name, first
    changed = next((x for x in (*hunk.removed, *hunk.added) if x.strip()), "")
    return enclosing(raw, index, lang, _indent(changed))


def _widened(raw: Sequence[str], lo: int, hi: int) -> tuple[int, int]:
    """[lo, hi) grown over the blank and bracket-only lines around it: where a diff puts
    an insertion among blank lines is a matter of alignment, not of place."""
    lo, hi = min(lo, len(raw)), min(max(hi, lo), len(raw))
    while lo > 0 and not meaningful(raw[lo - 1]):
        lo -= 1
    while hi < len(raw) and not meaningful(raw[hi]):
        hi += 1
    return lo, hi


def _minus(lines: list[str], left: Counter[str]) -> list[str]:
    """``lines`` without the copies ``left`` still holds (taken from it as they go)."""
    out = []
    for line in lines:
        if left[line] > 0:
            left[line] -= 1
        else:
            out.append(line)
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip()) if line.strip() else 1 << 30


def _at_base(index: int, path: str, earlier: Sequence[Sequence[Hunk]]) -> int:
    """Line ``index`` (0-based) of ``path`` after the ``earlier`` patches, at the base."""
    for hunks in reversed(earlier):
        shift, inside = 0, None
        for h in hunks:
            if h.path != path:
                continue
            if h.target_start + h.target_length - 1 <= index:
                shift += h.target_length - h.source_length
            elif h.target_start - 1 <= index:
                inside = _source_line(h, index)
                break
        index = inside if inside is not None else index - shift
    return max(index, 0)


def _source_line(h: Hunk, index: int) -> int:
    """Line ``index`` of ``h``'s target, which ``h`` covers, in its source: a context
    line is the same line there; a line it wrote, as far into what it replaced."""
    top = h.target_start - 1
    if index < top + h.lead:
        return h.source_start - 1 + index - top
    if index >= top + h.target_length - h.trail:
        return h.source_start - 1 + h.source_length - (top + h.target_length - index)
    return h.source_start - 1 + min(index - top, max(h.source_length - h.trail - 1, 0))


@dataclass(frozen=True)
class Counted:
    """One place's count: its lines present and gone there."""

    present: Counter[str]
    gone: int
    changed: bool = True  # the place at the target is not as the base had it

    def accounted(self, place: Place) -> bool:
        """Whether something of the change stands at its place: one of its added lines
        present there, or one of its removed lines gone from there."""
        return bool(place.added and sum(self.present.values())) or \
            bool(place.removed and self.gone)

    def whole(self, place: Place, threshold: float) -> bool:
        """Whether the place holds the change itself: ``threshold`` of its added lines
        present there and of its removed lines gone."""
        return sum(self.present.values()) >= threshold * len(place.added) and \
            self.gone >= threshold * len(place.removed)


Span = tuple[int, int, int, int]  # one hunk of upstream's -U0 diff: start, length at base, at target


def count(place: Place, now: FileView, then: FileView,
          upstream: Callable[[], Sequence[Span]]) -> Counted:
    """What stands at ``place`` at the target (``now``) against the base (``then``);
    ``upstream`` gives upstream's own diff of the file, base to target: for a place
    outside every definition, or a definition the target has under no such name, the
    place at the target is where upstream's diff puts the base's lines."""
    if place.block:
        had, here = then.imports, now.imports
    elif place.window is not None:
        had, here = _through(place.window, then, now, upstream())
    else:
        had = then.region(place.start)
        found = now.lines if place.start < 0 else now.find(place.name, had)
        if found is None:  # renamed, or its first line rewritten past recognition
            end = place.start + len(had)
            had, here = _through((place.start, end), then, now, upstream())
        else:
            here = found
    have, before = Counter(here), Counter(had)
    # A line counts when the place has more of it than the base had: one that merely
    # existed there already proves nothing.
    present = Counter({line: min(n, have[line] - before[line])
                       for line, n in Counter(place.added).items()
                       if have[line] > before[line]})
    gone = sum(min(n, max(0, before[line] - have[line]))
               for line, n in Counter(place.removed).items())
    return Counted(present, gone, have != before)


def _through(window: tuple[int, int], then: FileView, now: FileView,
             upstream: Sequence[Span]) -> tuple[list[str], list[str]]:
    """The base's lines of ``window`` and the target's lines upstream's diff maps them to."""
    lo, hi = window
    a, b = _mapped(lo, hi, upstream)
    return then.lines[lo:hi], now.lines[a:b]


def _mapped(lo: int, hi: int, upstream: Sequence[Span]) -> tuple[int, int]:
    """Base lines [lo, hi) at the target: shifted by upstream's hunks above them, and
    widened to cover the hunks upstream made on them (for an insertion: right there)."""
    shift = grown = 0
    ends: list[int] = []
    for s, sl, t, tl in upstream:
        start, end = (s - 1, s - 1 + sl) if sl else (s, s)  # 0-based, end exclusive
        on = start <= hi and lo <= end  # on the lines, or right against them
        if on:
            tstart = t - 1 if tl else t
            ends += [tstart, tstart + tl]
            grown += tl - sl
        elif end <= lo:
            shift += tl - sl
    first, last = lo + shift, hi + shift + grown
    return min([first, *ends]), max([last, *ends])


def upstream_spans(diff: str) -> list[Span]:
    """The hunks of a ``git diff -U0``: (start, length) at the base and at the target."""
    return [(int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1)) for m in _SPAN.finditer(diff)]


_SPAN = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)
