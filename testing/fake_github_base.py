"""What the fake GitHub's modules share: its repositories and PRs, the request log entry, GitHub's error bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

DOCS = "https://docs.github.com/rest"


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The request body parsed as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class HTTPError(Exception):
    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def validation_failed(errors: list[dict[str, Any]], doc: str) -> HTTPError:
    return HTTPError(
        422,
        {"message": "Validation Failed", "errors": errors, "documentation_url": doc, "status": "422"},
    )


def not_found(doc: str = DOCS) -> HTTPError:
    return HTTPError(404, {"message": "Not Found", "documentation_url": doc, "status": "404"})


@dataclass
class Repo:
    full_name: str
    id: int
    default_branch: str = "main"
    fork_of: str | None = None
    git_dir: str | None = None  # a real bare repo whose branches back PR heads/bases
    private: bool = False
    push: bool = False  # permissions.push of the token on this repository

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]


@dataclass
class PR:
    repo: str
    number: int
    id: int
    title: str
    body: str | None
    head_repo: str
    head_ref: str
    head_sha: str
    base_ref: str
    draft: bool
    maintainer_can_modify: bool
    user: str
    created_at: str
    updated_at: str
    state: str = "open"
    closed_at: str | None = None
    merged: bool = False
    merged_at: str | None = None
    merge_commit_sha: str | None = None
    merged_by: str | None = None
    files: list[dict[str, Any]] = field(default_factory=list)  # GET .../pulls/{n}/files
