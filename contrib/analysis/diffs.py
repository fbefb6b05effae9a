"""A patch's diff read per file: the lines it adds, removes and touches on each side."""

from __future__ import annotations

from dataclasses import dataclass, field

from unidiff.patch import PatchSet

from contrib.errors import PatchError


@dataclass
class FileChange:
    """What a patch does to one file (after-side path; line numbers per side)."""

    path: str
    old_path: str | None
    added: set[int] = field(default_factory=set)  # after-side lines added
    removed: set[int] = field(default_factory=set)  # before-side lines removed
    touched: set[int] = field(default_factory=set)  # after-side lines at or next to a change
    sections: list[str] = field(default_factory=list)
    deleted: bool = False


def _strip_prefix(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_diff(text: str) -> list[FileChange]:
    """Parse a unified diff (``git diff`` or format-patch output) into FileChanges."""
    try:
        patch = PatchSet(text)
    except Exception as exc:  # unidiff raises its own UnidiffParseError and friends
        raise PatchError(f"cannot parse the patch's diff: {exc}") from exc
    changes = []
    for pf in patch:
        after = _strip_prefix(pf.target_file)
        before = _strip_prefix(pf.source_file)
        change = FileChange(after or before or pf.path, before, deleted=pf.is_removed_file)
        for hunk in pf:
            if hunk.section_header:
                change.sections.append(hunk.section_header.strip())
            _hunk_lines(hunk, change)
        changes.append(change)
    return changes


def _hunk_lines(hunk: object, change: FileChange) -> None:
    pending_removal = False
    for line in hunk:  # type: ignore[attr-defined]
        if line.is_added:
            change.added.add(line.target_line_no)
            change.touched.add(line.target_line_no)
            pending_removal = False  # a replacement touches only its new lines
        elif line.is_removed:
            change.removed.add(line.source_line_no)
            pending_removal = True
        elif line.is_context and pending_removal:
            # A pure deletion touches the lines around it in the new file.
            change.touched.update({line.target_line_no - 1, line.target_line_no})
            pending_removal = False
    if pending_removal:
        change.touched.add(hunk.target_start + max(hunk.target_length - 1, 0))  # type: ignore[attr-defined]
