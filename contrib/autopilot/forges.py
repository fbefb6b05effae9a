"""The forges one autopilot run talks to, made once each, recorders in a dry run."""

from __future__ import annotations

from dataclasses import dataclass, field

from contrib.forge.api import Forge, ForgeFactory
from contrib.forge.connect import connect
from contrib.forge.recording import RecordingForge
from contrib.workspace.model import Workspace


@dataclass
class Forges:
    """The forges a run talks to: the upstreams' (PRs) and the workspace's (dashboard).

    A dry run gets recorders that read through the real forge when a token
    is at hand; ``writes`` collects what they would have written.
    """

    api_url: str
    token: str | None  # for PRs on the upstreams (GITHUB_TOKEN / GH_TOKEN)
    workspace_token: str | None  # for the dashboard and the push (falls back to token)
    factory: ForgeFactory | None
    dry_run: bool
    _made: dict[str, Forge | None] = field(default_factory=dict)

    def upstream(self, ws: Workspace) -> Forge | None:
        return self._forge(ws, "upstream", self.token)

    def workspace(self, ws: Workspace) -> Forge | None:
        return self._forge(ws, "workspace", self.workspace_token or self.token)

    def _forge(self, ws: Workspace, role: str, token: str | None) -> Forge | None:
        if role not in self._made:
            real = connect(ws.config, token, factory=self.factory) if token else None
            self._made[role] = RecordingForge(real, self.api_url) if self.dry_run else real
        return self._made[role]

    def writes(self) -> list[str]:
        """What the recorders of a dry run would have written."""
        return [str(call) for f in self._made.values() if isinstance(f, RecordingForge)
                for call in f.writes]
