"""Patch files: check, apply (git am semantics, no fuzz) and export.

Applying happens on plumbing -- a temporary index loaded with the base tree,
``git apply --cached``, ``write-tree``, ``commit-tree`` -- never in a
checkout (b4 applies series the same way).  ``git apply`` never fuzzes: every
context line must match, only the position may move.  ``git mailinfo`` splits
each mbox exactly as ``git am`` would (author, date, subject, body, diff).
"""

from __future__ import annotations

import posixpath
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from contrib.errors import PatchError
from contrib.git.repo import Git, Identity, Sha, Tree

# format-patch output must not depend on the user's ~/.gitconfig (signature,
# prefixes, renames...): it is the on-disk format.
EXPORT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
EXPORT_ARGS = ["--zero-commit", "--no-signature", "--full-index", "--binary", "--no-renames"]


@dataclass(frozen=True)
class MailPatch:
    """One patch split as ``git am`` sees it."""

    name: str
    author: Identity
    subject: str
    body: str
    diff: str

    @property
    def message(self) -> str:
        return f"{self.subject}\n\n{self.body}".rstrip() + "\n"


@dataclass(frozen=True)
class Hunk:
    """Where one hunk sits: file, line range in the source, enclosing section."""

    path: str
    source_start: int
    source_length: int
    target_start: int
    target_length: int
    section: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    lead: int = 0  # context lines before its first change (0 in a -U0 diff)
    trail: int = 0  # context lines after its last change
    body: tuple[str, ...] = field(default=(), compare=False, repr=False)  # " "/+/- and the line


@dataclass(frozen=True)
class Applied:
    """One patch applied on top of the previous: the commit and its tree."""

    name: str
    commit: Sha
    tree: Tree
    patch: MailPatch = field(compare=False)


def decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


def parse_hunks(diff_text: str, where: str = "patch") -> list[Hunk]:
    """Hunks of a unified diff (unidiff); PatchError naming ``where`` if malformed."""
    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError as exc:
        raise PatchError(f"{where}: malformed diff: {exc}") from None
    hunks: list[Hunk] = []
    for pfile in patch:
        for h in pfile:
            hunks.append(Hunk(
                path=pfile.path, source_start=h.source_start, source_length=h.source_length,
                target_start=h.target_start, target_length=h.target_length,
                section=h.section_header.strip(),
                added=tuple(line.value for line in h if line.is_added),
                removed=tuple(line.value for line in h if line.is_removed),
                lead=next((i for i, line in enumerate(h) if not line.is_context), 0),
                trail=next((i for i, line in enumerate(reversed(h)) if not line.is_context), 0),
                body=tuple(line.line_type + line.value.rstrip("\r\n") for line in h
                           if line.line_type in "+- ")))
    return hunks


_DIFF_PATH = re.compile(r"^(?:diff --git a/(\S+) b/(\S+)|(?:---|\+\+\+) (?:[ab]/)?(\S+)"
                        r"|rename (?:from|to) (\S+)|copy (?:from|to) (\S+))", re.M)


def check_paths(diff_text: str, where: str) -> None:
    """Refuse paths outside the repository: absolute, ``..``, or inside ``.git``."""
    for match in _DIFF_PATH.finditer(diff_text):
        for path in (g for g in match.groups() if g):
            if path == "/dev/null":
                continue
            parts = PurePosixPath(path).parts
            if path.startswith("/") or ".." in parts or (parts and parts[0] == ".git"):
                raise PatchError(f"{where}: touches {path!r}, outside the repository; "
                                 "patch paths must be relative and stay inside it")


def check_symlinks(diff_text: str, where: str) -> None:
    """Refuse symlinks whose target leaves the repository (absolute or via ``..``)."""
    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError:
        return  # reported by parse_hunks
    for pfile in patch:
        if getattr(pfile, "target_mode", None) != "120000":
            continue
        target = "".join(line.value for hunk in pfile for line in hunk if line.is_added).strip()
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(pfile.path), target))
        if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
            raise PatchError(f"{where}: makes {pfile.path!r} a symlink to {target!r}, outside "
                             "the repository; such a link could redirect later writes")


_MAX_LINKS = 40  # POSIX systems give up (ELOOP) after about this many links in one lookup


def check_tree_links(git: Git, base: str, tree: str, where: str) -> None:
    """Refuse a patched ``tree`` in which a symlink the patches made leaves the repository.

    Text checks of each patch cannot see a chain (``d1/link -> ..`` then
    ``d1/d2/l2 -> ../link/..``) nor a link written as a GIT binary patch, so the
    result is checked as git stores it: every symlink added or changed against
    ``base`` is resolved through all the tree's symlinks, as the kernel would.
    """
    out = git.run("diff-tree", "-r", "-z", "--no-renames", f"{base}^{{tree}}", tree, strip=False)
    fields = out.split("\0")
    changed = [fields[i + 1] for i in range(0, len(fields) - 1, 2)
               if fields[i].split(" ")[1:2] == ["120000"]]
    if not changed:
        return
    listing = git.run("ls-tree", "-r", "-z", "--full-tree", tree, strip=False)
    link_paths = [entry.split("\t", 1)[1] for entry in listing.split("\0")
                  if entry.startswith("120000 ")]
    links = {path: decode(data or b"") for path, data in git.read_blobs(tree, link_paths).items()}
    for path in changed:
        if _escapes(path, links):
            raise PatchError(f"{where}: makes {path!r} a symlink to {links.get(path, '')!r}, "
                             "which leads outside the repository (through the links of the "
                             "patched tree); such a link could redirect later writes")


def _escapes(path: str, links: dict[str, str]) -> bool:
    """Whether resolving the symlink ``path`` (inside the tree) ever leaves the tree."""
    current = path.split("/")[:-1]
    pending = list(reversed(links.get(path, "").split("/")))
    if links.get(path, "").startswith("/"):
        return True
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return True
            current.pop()
            continue
        current.append(part)
        target = links.get("/".join(current))
        if target is None:
            continue
        hops += 1
        if hops > _MAX_LINKS or target.startswith("/"):
            return True
        current.pop()
        pending.extend(reversed(target.split("/")))
    return False


def split_mail(git: Git, name: str, raw: bytes) -> MailPatch:
    """Split an mbox patch like ``git am``; PatchError if it is not one."""
    if b"\0" in raw:
        raise PatchError(f"{name}: contains NUL bytes; not a git format-patch file")
    if b"\r\n" in raw and raw.count(b"\n") == raw.count(b"\r\n"):
        # Every line ends in CRLF, headers too: a mail client or a Windows checkout
        # converted the file (format-patch never writes CRLF headers).  Undo it as
        # `git am` does (mailsplit strips the CR); CRLF content (\r\r\n) stays CRLF.
        raw = raw.replace(b"\r\n", b"\n")
    with tempfile.TemporaryDirectory(prefix="contrib-mail-") as tmp:
        msg, diff = Path(tmp) / "msg", Path(tmp) / "patch"
        status, out, err = git.try_run("mailinfo", "-u", str(msg), str(diff), input=raw)
        if status != 0:
            raise PatchError(f"{name}: not a mail-formatted patch ({err.strip()}); "
                             "create patches with `git format-patch`")
        info = dict(_header(line) for line in out.splitlines() if ": " in line)
        body = decode(msg.read_bytes()) if msg.exists() else ""
        diff_text = decode(diff.read_bytes()) if diff.exists() else ""
    if not info.get("Author") or not info.get("Date"):
        raise PatchError(f"{name}: no From:/Date: header; this is not `git format-patch` "
                         "output (write the patch with `git format-patch`, or commit it and "
                         "use --commits A..B --repo PATH)")
    if not diff_text.strip():
        raise PatchError(f"{name}: contains no diff")
    check_paths(diff_text, name)
    if not re.search(r"^(?:@@ |GIT binary patch|Binary files |old mode |deleted file mode |"
                     r"new file mode |rename from )", diff_text, re.M):
        raise PatchError(f"{name}: has no hunks; truncated or not a diff")
    parse_hunks(diff_text, name)
    check_symlinks(diff_text, name)
    author = Identity(info["Author"], info.get("Email", ""), info["Date"])
    return MailPatch(name, author, info.get("Subject", name).strip(), body.strip(), diff_text)


def load_patches(git: Git, files: list[tuple[str, bytes]]) -> list[MailPatch]:
    """Split stored patch files (name, bytes) as ``git am`` would."""
    if not files:
        raise PatchError("empty series: nothing to carry")
    return [split_mail(git, name, raw) for name, raw in files]


def _header(line: str) -> tuple[str, str]:
    key, _, value = line.partition(": ")
    return key.strip(), value.strip()


def apply_one(git: Git, env: dict[str, str], patch: MailPatch, *,
              three_way: bool = False) -> tuple[bool, str]:
    """``git apply --cached`` one patch onto the temp index in ``env``; (ok, stderr)."""
    args = ["apply", "--cached", "--whitespace=nowarn"]
    if three_way:
        args.append("--3way")
    status, _, err = git.try_run(*args, "-", env=env, input=patch.diff)
    return status == 0, err.strip()


def apply_series(git: Git, base: str, patches: list[MailPatch], *,
                 three_way: bool = False) -> list[Applied]:
    """Apply ``patches`` in order on ``base`` as commits; PatchError on the first failure."""
    applied: list[Applied] = []
    parent = git.rev_parse(base)
    with git.temp_index(parent) as env:
        for patch in patches:
            ok, err = apply_one(git, env, patch, three_way=three_way)
            if not ok:
                raise PatchError(f"{patch.name}: does not apply at {parent[:12]} without fuzz:\n"
                                 f"{_first_lines(err)}", exit_code=2)
            tree = git.write_tree(env)
            check_tree_links(git, base, tree, patch.name)
            parent = git.commit_tree(tree, [parent], patch.message, patch.author)
            applied.append(Applied(patch.name, parent, tree, patch))
    return applied


def _first_lines(text: str, count: int = 6) -> str:
    lines = text.splitlines()
    more = f"\n  ... ({len(lines) - count} more lines)" if len(lines) > count else ""
    return "\n".join("  " + line for line in lines[:count]) + more


def export_series(git: Git, base: str, tip: str) -> list[tuple[str, bytes]]:
    """``git format-patch base..tip`` as (file name, bytes), in order."""
    with tempfile.TemporaryDirectory(prefix="contrib-export-") as tmp:
        git.run("format-patch", *EXPORT_ARGS, "-o", tmp, f"{base}..{tip}", env=EXPORT_ENV)
        files = sorted(Path(tmp).iterdir())
        return [(f.name, f.read_bytes()) for f in files]


def series_file(names: list[str]) -> str:
    return "".join(f"{name}\n" for name in names)
