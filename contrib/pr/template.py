"""The upstream's pull request template, read at the base, and filled by its headings.

GitHub offers a template from ``pull_request_template.md`` in ``.github/``, the root
or ``docs/`` (any case), or from a ``PULL_REQUEST_TEMPLATE/`` folder in one of them.
A template is Markdown: headings, the maintainers' hidden ``<!-- -->`` notes, and
checklists (``- [ ]``).  Each heading gets a :class:`Role` from its words, so what
contrib has to say goes where the maintainers ask for it: flashinfer's
``## 📌 Description`` and sglang's ``## Motivation`` are both a description,
``## 🧪 Tests`` and ``## Accuracy Tests`` both tests.  A checklist item gets a
:class:`Check` the same way; it is ticked only for a thing contrib ran, with the
command (:func:`fill`), and the template's text is otherwise kept as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from contrib.git.repo import Git

FOLDERS = (".github", "", "docs")
NAMES = ("pull_request_template.md", "pull_request_template.txt")


class Role(StrEnum):
    """What a template's section asks for."""

    DESCRIPTION = "description"
    CHANGES = "changes"
    ISSUES = "issues"
    TESTS = "tests"
    PERFORMANCE = "performance"
    CHECKLIST = "checklist"
    NOTES = "notes"
    OTHER = "other"


class Check(StrEnum):
    """What a checklist item says was done."""

    HOOKS = "hooks"  # the pre-commit hooks (or the formatter) were run
    TESTS_PASS = "tests-pass"  # the tests pass
    OTHER = "other"  # anything contrib does not run: left as the template has it


# Checked in order on a heading's words: "Speed Tests" is performance, not tests.
_ROLES = ((r"related|\bissues?\b|\bfix(es)?\b|\bcloses\b", Role.ISSUES),
          (r"speed|perf|benchmark|profil", Role.PERFORMANCE),
          (r"check ?list|\bchecks\b", Role.CHECKLIST),
          (r"\btest|accuracy|validation", Role.TESTS),
          (r"modification|\bchanges?\b|implementation", Role.CHANGES),
          (r"description|motivation|summary|purpose|overview|\bwhat\b|\bwhy\b", Role.DESCRIPTION),
          (r"review|\bnotes?\b", Role.NOTES))
_ITEM = re.compile(r"^(\s*[-*+]\s+)\[ \](\s+)(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def role_of(title: str) -> Role:
    text = title.lower()
    return next((role for words, role in _ROLES if re.search(words, text)), Role.OTHER)


def check_of(item: str) -> Check:
    """A setup step ("I have installed the hooks") is not a run: it stays OTHER."""
    text = item.lower()
    if re.search(r"pre-commit|\bhooks?\b|\bformat", text) and not re.search(r"\binstall", text):
        return Check.HOOKS
    if re.search(r"\btests?\b.*\b(pass|passing|passed|green)\b", text):
        return Check.TESTS_PASS
    return Check.OTHER


@dataclass(frozen=True)
class Section:
    """One heading of the template and the lines below it, up to the next heading."""

    title: str
    role: Role
    start: int  # the heading's line
    end: int  # the first line past the section
    checks: frozenset[Check]  # the kinds of checklist item in it


@dataclass(frozen=True)
class Template:
    """A pull request template at a commit, as lines and sections."""

    path: str
    lines: tuple[str, ...]
    sections: tuple[Section, ...]

    def section_for(self, place: Role | Check) -> Section | None:
        """The first section with that role, or holding such a checklist item."""
        return next((s for s in self.sections if (s.role == place if isinstance(place, Role)
                                                  else place in s.checks)), None)


def read_template(git: Git, rev: str) -> Template | None:
    """The template GitHub offers at ``rev``, or None.  A single file wins over a folder
    of templates; of a folder, the first by name (GitHub asks the author to choose)."""
    for folder in FOLDERS:
        names = _names(git, rev, folder)
        found = [n for n in names if n.lower() in NAMES]
        if found:
            return _template(git, rev, _join(folder, found[0]))
    for folder in FOLDERS:
        for name in _names(git, rev, folder):
            if name.lower() == "pull_request_template":
                inner = _join(folder, name)
                files = sorted(n for n in _names(git, rev, inner) if n.lower().endswith(".md"))
                if files:
                    return _template(git, rev, _join(inner, files[0]))
    return None


def _names(git: Git, rev: str, folder: str) -> list[str]:
    status, out, _ = git.try_run("ls-tree", "--name-only", "-z", f"{rev}:{folder}")
    return [n for n in out.split("\0") if n] if status == 0 else []


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _template(git: Git, rev: str, path: str) -> Template | None:
    data = git.read_blob(rev, path)
    return None if data is None else parse(path, data.decode("utf-8", errors="replace"))


def parse(path: str, text: str) -> Template:
    """A template's sections; a heading inside a ``<!-- -->`` note or a code fence is
    text, not a section."""
    lines = tuple(text.replace("\r\n", "\n").split("\n"))
    starts: list[tuple[int, str]] = []
    hidden = fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        found = _HEADING.match(line) if not (hidden or fenced) else None
        if found:
            starts.append((i, found[2]))
        hidden = (hidden or "<!--" in line) and "-->" not in line.split("<!--")[-1]
    sections = []
    for n, (start, title) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        checks = frozenset(check_of(m[3]) for line in lines[start + 1:end]
                           if (m := _ITEM.match(line)))
        sections.append(Section(title, role_of(title), start, end, checks))
    return Template(path, lines, tuple(sections))


def fill(template: Template, blocks: Mapping[Section, Sequence[str]],
         ticks: Mapping[Check, str]) -> str:
    """The template with each section's ``blocks`` at its end and the items of the kinds
    in ``ticks`` ticked, the note (what contrib ran) after each."""
    out: list[str] = []
    by_start = {s.start: s for s in template.sections}
    current: Section | None = None
    for i, line in enumerate(template.lines):
        if i in by_start:
            _close(out, current, blocks)
            current = by_start[i]
        item = _ITEM.match(line)
        if item and (note := ticks.get(check_of(item[3]))):
            line = f"{item[1]}[x]{item[2]}{item[3]} — {note}"
        out.append(line)
    _close(out, current, blocks)
    return "\n".join(out).strip("\n")


def _close(out: list[str], section: Section | None, blocks: Mapping[Section,
                                                                    Sequence[str]]) -> None:
    """Put ``section``'s blocks after its last non-blank line."""
    if section is None or not blocks.get(section):
        return
    blank = 0
    while out and not out[-1].strip():
        out.pop()
        blank += 1
    for block in blocks[section]:
        out += ["", block]
    out += [""] * max(blank, 1)
