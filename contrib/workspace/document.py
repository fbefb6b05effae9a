"""patchset.toml as read and as changed: one file, shared by a patchset's targets.

Read with tomllib into the typed :class:`~contrib.workspace.schema.Meta`; changed
through a tomlkit document that keeps the user's comments and layout, parsed only
when something is written (tomlkit takes ten times tomllib's time, and most runs
only read: ``status`` of fifty patchsets, a no-op ``sync``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrib.errors import ConfigError, ContribError
from contrib.workspace.schema import Meta, TargetState, UpstreamStatus, read_meta
from contrib.workspace.table import parse_toml_text

if TYPE_CHECKING:
    from tomlkit import TOMLDocument


class Document:
    """One patchset.toml as read, and as changed: shared by a patchset's targets, so
    the changes of one target's sync and another's land in the same file.

    A target is named by its branch; ``None`` is the first target, whose state sits
    at the top level (the others' in ``[target."BRANCH"]``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.text = read_user_text(path, ConfigError, "every patchset folder needs "
                                   "patchset.toml (create patchsets with `contrib new`)")
        self.data = parse_toml_text(path, self.text)
        self.info: Meta = read_meta(path, self.text, self.data)
        self.toml: TOMLDocument | None = None

    def editable(self) -> TOMLDocument:
        """The tomlkit document to change and write (parsed on first use)."""
        if self.toml is None:
            import tomlkit

            self.toml = tomlkit.parse(self.text)
        return self.toml

    def current_text(self) -> str:
        """The text as it would be written (the file's own, while unchanged)."""
        if self.toml is None:
            return self.text
        import tomlkit

        return tomlkit.dumps(self.toml)

    def view(self, branch: str | None) -> Meta:
        """The typed view of the file, as the target on ``branch`` sees it."""
        meta = self.info
        if branch is None:
            return meta
        state = meta.target_states.get(branch) or TargetState()
        return replace(meta, current=state.current or meta.current, sync=state.sync,
                       title=state.title or meta.title,
                       pr=state.pr, upstream_status=state.upstream_status or (
                           UpstreamStatus.PENDING if meta.upstream_status ==
                           UpstreamStatus.UPSTREAMED else meta.upstream_status))

    def start_target(self, branch: str) -> None:
        """A target not carried yet starts from the first target's current version as
        it is now, before this run changes it."""
        if branch not in self.info.target_states:
            self.info = replace(self.info, target_states={
                **self.info.target_states, branch: TargetState(current=self.info.current)})

    def state_table(self, branch: str | None) -> Any:
        """Where the state of the target on ``branch`` is written: the top level, or
        ``[target."BRANCH"]`` (made, with its ``current``, on first write)."""
        doc = self.editable()
        if branch is None:
            return doc
        import tomlkit

        if "target" not in doc:
            doc["target"] = tomlkit.table(is_super_table=True)
        outer = doc["target"]
        if branch not in outer:  # type: ignore[operator]
            outer[branch] = tomlkit.table()  # type: ignore[index]
            outer[branch]["current"] = self.view(branch).current  # type: ignore[index]
        return outer[branch]  # type: ignore[index]

    def changed(self, branch: str | None, **changes: Any) -> None:
        """Keep the typed view in step with a write to the target on ``branch``."""
        if branch is None:
            self.info = replace(self.info, **changes)
            return
        state = replace(self.info.target_states.get(branch) or TargetState(), **changes)
        self.info = replace(self.info, target_states={**self.info.target_states,
                                                      branch: state})


def read_user_text(path: Path, error: type[ContribError], missing: str) -> str:
    """A file the user may have edited or removed, as text; ``error`` naming it if not."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: missing; {missing}") from None
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
