"""The workspace on disk: patchsets, their versions, which ones a target names (layout:
:mod:`contrib.workspace.layout`; patchset.toml: :mod:`contrib.workspace.document`; the
lock: :mod:`contrib.workspace.locking`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrib.errors import ConfigError, PatchError, UsageError
from contrib.workspace.config import (
    BRANCH_RE,
    NAME_RULE,
    Config,
    did_you_mean,
    load_config,
    valid_name,
)
from contrib.workspace.document import Document, read_user_text
from contrib.workspace.layout import CONFIG_NAME, META_NAME, SERIES_NAME, STATE_DIR, find_root
from contrib.workspace.locking import hold
from contrib.workspace.schema import Meta, PrRecord, SyncRecord, UpstreamStatus
from contrib.workspace.table import SHA_RE, line_of
from contrib.workspace.txn import Transaction, atomic_write, check_inside
from contrib.workspace.validation import Requirement, Settings

if TYPE_CHECKING:
    from tomlkit import TOMLDocument

VALIDATION_NAME = "validation.json"
NO_PATCHSETS = "no patchsets yet: create one with `contrib new`"


@dataclass
class Version:
    """One version of a patchset: its series, made against one upstream commit."""

    patchset: Patchset
    base: str

    @property
    def dir(self) -> Path:
        return self.patchset.dir / self.base

    @property
    def validation_path(self) -> Path:
        return self.dir / VALIDATION_NAME

    def series(self) -> list[str]:
        """Patch file names in order; PatchError naming file:line on any problem."""
        path = self.dir / SERIES_NAME
        text = read_user_text(path, PatchError, "a version directory needs a series file "
                              "listing its patches in order")
        names: list[str] = []
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{path}:{number}"
            if " " in line or "/" in line or "\\" in line or line in (".", ".."):
                raise PatchError(f"{where}: {line!r} is not a plain patch file name "
                                 "(one file name a line, no options or folders)")
            if line in names:
                raise PatchError(f"{where}: {line!r} is listed twice")
            if (self.dir / line).is_symlink():
                raise PatchError(f"{where}: {line!r} is a symlink; a version holds its patch "
                                 "files themselves (replace the link with the file)")
            if not (self.dir / line).is_file():
                raise PatchError(f"{where}: names {line!r}, which is not in {self.dir}")
            names.append(line)
        if not names:
            raise PatchError(f"{path}: empty series; list at least one patch file")
        return names

    def patch_paths(self) -> list[Path]:
        return [self.dir / name for name in self.series()]

    def patch_texts(self) -> list[tuple[str, bytes]]:
        """(file name, raw bytes) of each patch in series order."""
        return [(p.name, p.read_bytes()) for p in self.patch_paths()]


class Patchset:
    """One intended upstream PR on one target branch: metadata plus versions per
    upstream commit.

    A patchset carried on several branches (``targets`` in patchset.toml) is one
    folder and one file, seen as one :class:`Patchset` per branch; the first branch
    keeps its state at the top level, the others in ``[target."BRANCH"]``.
    """

    def __init__(self, workspace: Workspace, upstream: str, name: str, *,
                 branch: str | None = None, document: Document | None = None) -> None:
        self.workspace = workspace
        self.upstream = upstream
        self.name = name
        self.dir = workspace.root / "patchsets" / upstream / name
        self.meta_path = self.dir / META_NAME
        for folder in (self.dir.parent.parent, self.dir.parent, self.dir):
            if folder.is_symlink():
                raise ConfigError(f"{folder}: is a symlink; contrib reads and writes patchsets "
                                  "only in real folders inside the workspace")
        self._doc = document or Document(self.meta_path)
        self.branches = self._doc.info.targets or (workspace.config.upstream(upstream).branch,)
        self.branch = branch or self.branches[0]
        self.primary = self.branch == self.branches[0]
        if document is None:
            self.check_current()

    def check_current(self) -> None:
        """ConfigError unless this target's ``current`` names a real version folder."""
        folder = self.dir / self.info.current
        if folder.is_symlink() or not folder.is_dir():
            what = "is a symlink" if folder.is_symlink() else "does not exist"
            raise ConfigError(f"{self.meta_path}: current = {self.info.current} but {folder} "
                              f"{what}; point current at a version folder (a real folder)")

    @property
    def targets_at(self) -> str:
        """``patchset.toml:LINE`` of ``targets`` (empty for the upstream's own branch)."""
        if not self._doc.info.targets:
            return ""
        return f"{self.meta_path}:{line_of(self._doc.text, '', 'targets')}"

    def on(self, branch: str) -> Patchset:
        """The same patchset on another of its target branches (one shared file).

        A target not carried yet starts from the first target's current version as it
        is now, before this run changes it."""
        if branch != self.branches[0]:
            self._doc.start_target(branch)
        return Patchset(self.workspace, self.upstream, self.name, branch=branch,
                        document=self._doc)

    @property
    def target(self) -> str:
        """``UPSTREAM/NAME``, and ``@BRANCH`` for every target of a patchset carried on
        several branches (the first too: a row of one target never reads like the
        patchset as a whole)."""
        base = f"{self.upstream}/{self.name}"
        return base if len(self.branches) == 1 else f"{base}@{self.branch}"

    @property
    def legacy_target(self) -> str:
        """The name 0.4 gave the first target (``UPSTREAM/NAME``), under which older
        state files may still hold its pending conflict or open edit."""
        return f"{self.upstream}/{self.name}" if self.primary else self.target

    @property
    def selector(self) -> str:
        """``UPSTREAM/NAME@BRANCH``: selects exactly this target on a command line (the
        plain ``UPSTREAM/NAME`` of the first target selects every target of it)."""
        return f"{self.upstream}/{self.name}@{self.branch}"

    @property
    def info(self) -> Meta:
        """The typed view of patchset.toml, as this target sees it (setters keep it in step)."""
        return self._doc.view(self._at)

    @property
    def _at(self) -> str | None:
        """This target in the shared document: None for the first (the top level)."""
        return None if self.primary else self.branch

    @property
    def meta(self) -> TOMLDocument:
        """patchset.toml as a tomlkit document (comments and layout kept), to change and
        write.  Parsed on first use (:mod:`contrib.workspace.document`)."""
        return self._doc.editable()

    @property
    def data(self) -> Mapping[str, Any]:
        """patchset.toml's raw values: the document once it is being changed, else as read
        (prefer the typed properties)."""
        return self._doc.toml if self._doc.toml is not None else self._doc.data

    # -- typed reads (the schema is contrib.workspace.schema) --------------------------------

    @property
    def current(self) -> Version:
        return Version(self, self.info.current)

    @property
    def title(self) -> str:
        return self.info.title

    @property
    def summary(self) -> str:
        return self.info.summary

    @property
    def arch(self) -> str:
        return self.info.arch

    @property
    def upstream_status(self) -> UpstreamStatus:
        return self.info.upstream_status

    @property
    def sync(self) -> SyncRecord | None:
        """The ``[sync]`` record of the last sync, if any."""
        return self.info.sync

    @property
    def pr(self) -> PrRecord | None:
        """The ``[pr]`` record open-pr keeps, if any."""
        return self.info.pr

    @property
    def requires(self) -> tuple[Requirement, ...]:
        return self.info.requires

    @property
    def validation(self) -> Settings:
        """``[validation]`` with its ``[[waivers]]``, as validate and the record read them."""
        return self.info.validation

    # -- typed writes: the document keeps the user's comments and layout --------

    def set_current(self, base: str) -> None:
        self._doc.state_table(self._at)["current"] = base
        self._doc.changed(self._at, current=base)

    def set_upstream_status(self, status: UpstreamStatus) -> None:
        self._doc.state_table(self._at)["upstream_status"] = str(status)
        self._doc.changed(self._at, upstream_status=status)

    def set_sync(self, record: SyncRecord | None) -> None:
        """Replace (or with None remove) this target's ``[sync]`` table."""
        table = self._doc.state_table(self._at)
        if record is None:
            table.pop("sync", None)
        else:
            table["sync"] = record.to_table()
        self._doc.changed(self._at, sync=record)

    def set_pr(self, record: PrRecord) -> None:
        """Write this target's ``[pr]`` key by key, so comments and key order survive."""
        import tomlkit

        table, values = self._doc.state_table(self._at), record.to_table()
        if "pr" not in table:
            table["pr"] = tomlkit.table()
        sub = table["pr"]
        for key in [k for k in sub if k not in values]:
            sub.pop(key)
        for key, value in values.items():
            sub[key] = value
        self._doc.changed(self._at, pr=record)

    def version(self, base: str) -> Version:
        return Version(self, base)

    def versions(self) -> list[Version]:
        """Every version folder (named by a full sha); others are reported."""
        out = []
        for child in sorted(self.dir.iterdir()):
            if child.name.startswith(".") or not (child.is_dir() or child.is_symlink()):
                continue
            if child.is_symlink():
                raise ConfigError(f"{child}: a version folder must be a real folder, not a "
                                  "symlink; replace it with a copy of its files")
            if not SHA_RE.fullmatch(child.name):
                raise ConfigError(f"{child}: version folders must be named by a full 40-hex "
                                  "upstream commit; rename or remove it")
            out.append(Version(self, child.name))
        return out

    def meta_text(self) -> str:
        """patchset.toml's text as it would be written (the file's own, while unchanged)."""
        return self._doc.current_text()

    def save_meta(self, txn: Transaction | None = None) -> None:
        """Write patchset.toml (inside ``txn`` if given, else atomically on its own)."""
        if txn is not None:
            txn.write(self.meta_path, self.meta_text())
        else:
            self.workspace.write_file(self.meta_path, self.meta_text())


class Workspace:
    """A folder with contrib.toml and patchsets/."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.config: Config = load_config(self.root)
        self.state_dir = self.root / STATE_DIR

    @classmethod
    def find(cls, start: Path | None = None) -> Workspace:
        """The workspace containing ``start`` (default: cwd), found by contrib.toml."""
        root = find_root(start)
        if root is None:
            here = (start or Path.cwd()).resolve()
            raise UsageError(f"no {CONFIG_NAME} in {here} or any parent folder: run contrib in "
                             "a workspace, pass -C DIR, or see the README to create one")
        return cls(Path(root))

    def lock(self, on_wait: Callable[[str], None] | None = None
             ) -> AbstractContextManager[None]:
        """Hold the workspace lock (:mod:`contrib.workspace.locking`); a second contrib
        waits, then refuses (exit 2).  ``on_wait`` hears at once, once, who holds it."""
        return hold(self.root, self.state_dir, on_wait)

    def write_file(self, path: Path, data: bytes | str) -> None:
        """Atomically replace one workspace file; a kill mid-write leaves no temp file."""
        check_inside(self.root, path)
        atomic_write(path, data, scratch=self.state_dir / "txn")

    def folder_of(self, target: str) -> Path:
        """The folder of the patchset a target names (``@BRANCH`` dropped: every target
        of a patchset shares its folder)."""
        return self.root / "patchsets" / target.partition("@")[0]

    def transaction(self) -> Transaction:
        return Transaction(self.root, self.state_dir)

    def all_patchsets(self) -> list[Patchset]:
        """Every patchset on every target branch (a folder patchsets/UPSTREAM/NAME/ holding
        a patchset.toml is one patchset per branch in its ``targets``)."""
        return [ps for upstream, name in self._names() for ps in _on_each(
            Patchset(self, upstream, name))]

    def _names(self) -> list[tuple[str, str]]:
        """(upstream, name) of every patchset folder, nothing read yet: a command on one
        patchset parses only its patchset.toml."""
        base = self.root / "patchsets"
        found = []
        if base.is_dir():
            for up in sorted(p for p in base.iterdir() if p.is_dir()):
                for ps in sorted(p for p in up.iterdir() if p.is_dir()):
                    meta = ps / META_NAME
                    if meta.is_symlink() and not meta.exists():
                        raise ConfigError(f"{meta}: a symlink to a file that does not exist; "
                                          "restore the file or remove the folder")
                    if meta.exists() and not meta.is_file():
                        raise ConfigError(f"{meta}: not a file; a patchset folder holds its "
                                          "patchset.toml itself (or remove the folder)")
                    if meta.is_file():
                        for part, what in ((up.name, "upstream name"), (ps.name, "patchset name")):
                            if not valid_name(part):
                                raise ConfigError(f"{ps}: {what} {part!r} is invalid (use "
                                                  f"{NAME_RULE}); rename the folder")
                        found.append((up.name, ps.name))
        return found

    def empty_message(self, targets: list[str] | tuple[str, ...] = ()) -> str:
        """What every command says when there is nothing to work on."""
        if targets:
            return f"no patchsets under {', '.join(targets)} yet: create one with `contrib new`"
        return NO_PATCHSETS

    def patchsets(self, targets: list[str] | tuple[str, ...] = ()) -> list[Patchset]:
        """Patchsets selected by ``UPSTREAM``, ``UPSTREAM/NAME`` (every target branch of
        it) or ``UPSTREAM/NAME@BRANCH`` (that one) targets (none = all)."""
        every = self._names()
        if not targets:
            return self.all_patchsets()
        chosen: list[tuple[str, str]] = []
        branches: dict[tuple[str, str], set[str] | None] = {}
        for target in targets:
            upstream, name = parse_target(target)
            _, _, branch = target.partition("@")
            if upstream not in self.config.upstreams:
                known = ", ".join(sorted(self.config.upstreams)) or "none"
                hint = did_you_mean(upstream, self.config.upstreams)
                raise UsageError(f"unknown target {target!r}: no upstream {upstream!r} in "
                                 f"{self.config.path}{hint} (known: {known})")
            hits = [(u, n) for u, n in every if u == upstream and (not name or n == name)]
            if name and not hits:
                names = ", ".join(f"{u}/{n}" for u, n in every if u == upstream) or "none"
                hint = did_you_mean(name, [n for u, n in every if u == upstream])
                raise UsageError(f"unknown target {target!r}: no patchset {name!r} under "
                                 f"patchsets/{upstream}/{hint} (have: {names})")
            chosen += [hit for hit in hits if hit not in chosen]
            for hit in hits:
                wanted = branches.get(hit, set())
                branches[hit] = None if not branch or wanted is None else {*wanted, branch}
        out = []
        for upstream, name in chosen:
            found = _on_each(Patchset(self, upstream, name))
            wanted = branches[(upstream, name)]
            for branch in sorted(wanted or ()):
                if branch not in found[0].branches:
                    raise UsageError(f"unknown target {upstream}/{name}@{branch}: its targets "
                                     f"are {', '.join(found[0].branches)}")
            out += [ps for ps in found if wanted is None or ps.branch in wanted]
        return out

    def patchset(self, target: str) -> Patchset:
        """Exactly one patchset: ``UPSTREAM/NAME`` (on its first target branch) or
        ``UPSTREAM/NAME@BRANCH``."""
        upstream, _, name = target.partition("/")
        if not name:
            raise UsageError(f"{target!r}: name one patchset as UPSTREAM/NAME")
        return self.patchsets([target])[0]


def _on_each(ps: Patchset) -> list[Patchset]:
    """``ps`` on each of its target branches, the first first (each current checked)."""
    others = [ps.on(branch) for branch in ps.branches[1:]]
    for other in others:
        other.check_current()
    return [ps, *others]


def parse_target(target: str) -> tuple[str, str]:
    """``UPSTREAM``, ``UPSTREAM/NAME`` or ``UPSTREAM/NAME@BRANCH`` -> (upstream, name or "");
    UsageError if malformed (``UP//`` or ``UP/@BRANCH`` name no patchset: refused, not
    widened to every patchset of UP)."""
    given = target
    target, at, branch = target.partition("@")
    if at and (not branch or not BRANCH_RE.fullmatch(branch) or ".." in branch):
        raise UsageError(f"{target}@{branch!r}: not a git branch name after the @")
    if target.endswith("/") and not target.endswith("//") and not at:
        target = target[:-1]  # a folder the shell completed: UP/ or UP/NAME/
    upstream, _, name = target.partition("/")
    if "/" in name or (at and not name):
        raise UsageError(f"target {given!r}: give UPSTREAM, UPSTREAM/NAME or "
                         "UPSTREAM/NAME@BRANCH")
    check_name(upstream, "upstream name", target)
    if name:
        check_name(name, "patchset name", target)
    return upstream, name


def check_name(name: str, what: str = "patchset name", target: str | None = None) -> None:
    """UsageError unless ``name`` is a valid upstream or patchset name."""
    if not valid_name(name):
        where = f"target {target!r}: " if target is not None else ""
        raise UsageError(f"{where}invalid {what} {name!r}: use {NAME_RULE}")

