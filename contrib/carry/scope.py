"""Where a change sits: its enclosing definition, and whether it moved.

The moved guard is what keeps a carry from repeating GNU patch's fuzz
disaster: a plain apply may legally land a hunk at an offset, in a
look-alike block of another function.  Every change is scoped to the
definition enclosing it (a Python ``def``/``class``, a C/C++/CUDA function or
type), found in the pre-image file itself rather than from git's hunk header,
so an unrelated line upstream adds above (an import, a constant) never
changes the scope; only a different enclosing function does.

:func:`effect_present` answers "is this change already upstream?" by its
effect, tolerating upstream landing it with different surroundings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from contrib.carry.series import EXPORT_ENV, Hunk, parse_hunks
from contrib.git.repo import Git

_DEF_NAME = re.compile(r"^\s*(?:async\s+)?(?:def|class|struct|union|enum|namespace)\s+(\w+)")
_CALL_NAME = re.compile(r"(\w+)\s*\(")


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


_MD_HEAD = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
_C_LIKE = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cu", ".cuh", ".inl", ".inc",
           ".m", ".mm", ".java", ".go", ".rs", ".js", ".ts", ".swift", ".kt", ".cs")


def language(path: str) -> str:
    """How definitions look in ``path``: "python", "c" (C-like), "markdown" or "text"."""
    if path.endswith((".py", ".pyi")):
        return "python"
    if path.endswith(_C_LIKE):
        return "c"
    return "markdown" if path.endswith((".md", ".markdown")) else "text"


def definition(line: str, lang: str, following: str = "") -> str | None:
    """The name a line defines (def/class; a C-like function or type; a heading), else None.

    ``following`` is the next line: CUDA kernels often put the name there, after
    ``static __global__ void __launch_bounds__(1024, 1)``.  Plain text files
    have no definitions: a change in them is scoped to the whole file.
    """
    if lang == "python":
        match = _PY_DEF.match(line)
        return match.group(2) if match else None
    if lang != "c":
        match = _MD_HEAD.match(line) if lang == "markdown" else None
        return match.group(1) if match else None
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


def scope_of(lines: Sequence[str], index: int, lang: str, indent: int) -> str:
    """The definition enclosing line ``index`` (0-based; scanning upwards from it).

    Python needs a ``def``/``class`` indented less than the change (``indent``),
    so top-level code after a function is not "in" it; C-like code takes the
    nearest function or type above, as git's hunk headers do.
    """
    found = enclosing(lines, index, lang, indent)
    return found[0] if found else TOP


def enclosing(lines: Sequence[str], index: int, lang: str, indent: int
              ) -> tuple[str, int] | None:
    """:func:`scope_of` with the line the definition starts on; None at the top level."""
    for i in range(min(index, len(lines) - 1), -1, -1):
        name = definition(lines[i], lang, lines[i + 1] if i + 1 < len(lines) else "")
        if name and (lang != "python" or _indent(lines[i]) < indent):
            return name, i
    return None


def extent(lines: Sequence[str], start: int, lang: str) -> int:
    """Where the definition starting on line ``start`` ends (exclusive): the next
    definition at its level (Python: indented no deeper), else the end of the file."""
    level = _indent(lines[start])
    return next((i for i in range(start + 1, len(lines)) if _defines(lines, i, lang)
                 and (lang != "python" or _indent(lines[i]) <= level)), len(lines))


def _defines(lines: Sequence[str], i: int, lang: str) -> bool:
    return definition(lines[i], lang, lines[i + 1] if i + 1 < len(lines) else "") is not None


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
        scope = scope_of(files[hunk.path], start, language(hunk.path), _indent(changed))
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
    lang, key, head = language(path), section_key(section), section.strip()[:60]
    def name(i: int) -> str | None:
        return definition(lines[i], lang, lines[i + 1] if i + 1 < len(lines) else "")

    for start, line in enumerate(lines):
        if name(start) == key or (head and line.startswith(head)):
            return lines[start:extent(lines, start, lang)]
    return None


def _is_subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(line == h for h in it) for line in needle)


def contains_block(block: list[str], hay: list[str]) -> bool:
    size = len(block)
    return any(hay[i:i + size] == block for i in range(len(hay) - size + 1))


class _Files:
    """File lines of one tree, read once each (None: absent)."""

    def __init__(self, git: Git, tree: str) -> None:
        self.git, self.tree = git, tree
        self._lines: dict[str, list[str] | None] = {}

    def region(self, hunk: Hunk) -> list[str] | None:
        """The hunk's section in this tree, normalised, blank lines dropped."""
        if hunk.path not in self._lines:
            blob = self.git.read_blob(self.tree, hunk.path)
            self._lines[hunk.path] = (None if blob is None else
                                      blob.decode("utf-8", "replace").splitlines())
        lines = self._lines[hunk.path]
        region = None if lines is None else _section_region(lines, hunk.section, hunk.path)
        return None if region is None else [x for x in map(_norm, region) if x]

    def absent(self, path: str) -> bool:
        return self._lines.get(path) is None


def effect_present(git: Git, tree: str, hunks: Sequence[Hunk], before: str | None = None
                   ) -> bool:
    """Is every hunk's effect already in ``tree``?

    Upstream may land the same change with slightly different surroundings, so
    this compares the effect, not the text around it: in the same file and
    section, the hunk's added lines are present in order (blank lines and
    whitespace ignored) and its removed block is gone.  With ``before`` (the
    tree the patch was made on) it must also be upstream that made them so:
    each added line occurs more often than it did there, each removed line
    less -- a line that merely existed already elsewhere in the function
    proves nothing.
    """
    if not hunks:
        return False
    now, then = _Files(git, tree), _Files(git, before) if before else None
    for hunk in hunks:
        added = [_norm(x) for x in hunk.added if _norm(x)]
        removed = [_norm(x) for x in hunk.removed if _norm(x)]
        region = now.region(hunk)
        if region is None:
            if added or not now.absent(hunk.path):
                return False  # a section that is gone, or a file upstream removed
            continue
        old = then.region(hunk) if then else None
        by_line = (not added or _is_subsequence(added, region)) and (
            old is None or _grew(Counter(added), Counter(removed), Counter(old),
                                 Counter(region)))
        if not (by_line or _rewrapped(added, region, old)):
            return False
        if removed and removed != added and contains_block(removed, region):
            return False
    return True


def _squash(lines: Sequence[str]) -> str:
    return "".join("".join(line.split()) for line in lines)


def _rewrapped(added: list[str], region: list[str], old: list[str] | None) -> bool:
    """The added text is there, but wrapped differently (another formatter's line breaks)."""
    if not added:
        return False
    block, now = _squash(added), _squash(region)
    return block in now and (old is None or now.count(block) > _squash(old).count(block))


def _grew(added: Counter[str], removed: Counter[str], old: Counter[str],
          new: Counter[str]) -> bool:
    """Did the section change from ``old`` to ``new`` at least as the hunk does?"""
    net = added.copy()
    net.subtract(removed)
    return all(new[line] - old[line] >= delta if delta > 0 else
               new[line] - old[line] <= delta for line, delta in net.items() if delta)


def diff_hunks(git: Git, old: str, new: str, *, context: int = 0) -> list[Hunk]:
    """Hunks of ``git diff old new`` with ``context`` lines (0: one hunk per change)."""
    text = git.run("diff", f"-U{context}", "--no-renames", "--no-color", "--no-ext-diff",
                   old, new, "--", env=EXPORT_ENV, strip=False)
    return parse_hunks(text, f"diff {old[:10]}..{new[:10]}")
