"""Token lookup, and handing the token to one real `git push` through the environment."""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from contrib.credentials import (
    auth_header,
    find_token,
    github_host,
    needs_token,
    push_env,
    require_token,
)
from contrib.errors import GitHubError
from contrib.secrets import scrub

TOKEN = "ghp_credTESTtoken0123456789abcdef"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com",
    "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.com",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
}


def _fake_gh(tmp_path: Path, script: str) -> dict[str, str]:
    """A PATH whose only `gh` is a shell script we wrote."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    gh = bindir / "gh"
    gh.write_text("#!/bin/sh\n" + script)
    gh.chmod(0o755)
    return {"PATH": f"{bindir}:/usr/bin:/bin"}


def test_github_token_wins_over_gh_token() -> None:
    env = {"GITHUB_TOKEN": f" {TOKEN}\n", "GH_TOKEN": "ghp_other_other", "PATH": ""}
    assert find_token(env=env) == TOKEN
    assert scrub(f"x {TOKEN} y") == "x *** y"  # registered on the way out


def test_gh_token_is_second_choice() -> None:
    assert find_token(env={"GITHUB_TOKEN": "  ", "GH_TOKEN": TOKEN, "PATH": ""}) == TOKEN


def test_gh_cli_is_the_last_resort(tmp_path: Path) -> None:
    env = _fake_gh(tmp_path, 'if [ "$*" = "auth token --hostname ghe.example" ]; then\n'
                             f"  echo {TOKEN}\nelse\n  exit 1\nfi\n")
    assert find_token("https://ghe.example/api/v3", env=env) == TOKEN
    assert find_token("https://api.github.com", env=env) is None  # gh knows no github.com token


def test_failing_gh_means_no_token(tmp_path: Path) -> None:
    env = _fake_gh(tmp_path, "echo 'not logged in' >&2\nexit 1\n")
    assert find_token(env=env) is None
    with pytest.raises(GitHubError, match="no GitHub token for github.com: set GITHUB_TOKEN") as info:
        require_token(env=env)
    assert info.value.exit_code == 1


def test_github_host() -> None:
    assert github_host("https://api.github.com") == "github.com"
    assert github_host("https://ghe.example/api/v3") == "ghe.example"


def test_push_env_scopes_header_to_push_host() -> None:
    env = push_env("https://github.com/me/proj.git", TOKEN)
    key = "http.https://github.com/.extraheader"
    assert env["GIT_CONFIG_COUNT"] == "3"
    assert (env["GIT_CONFIG_KEY_2"], env["GIT_CONFIG_VALUE_2"]) == ("credential.helper", "")
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == (key, "")  # reset first
    assert env["GIT_CONFIG_KEY_1"] == key
    expected = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert env["GIT_CONFIG_VALUE_1"] == f"Authorization: Basic {expected}" == auth_header(TOKEN)
    assert TOKEN not in "".join(env.values())  # only its base64 form, and that is registered too
    assert scrub(env["GIT_CONFIG_VALUE_1"]) == "Authorization: Basic ***"


def test_local_push_urls_get_no_token(tmp_path: Path) -> None:
    assert not needs_token(str(tmp_path / "fork.git"))
    assert not needs_token(f"file://{tmp_path}/fork.git")
    env = push_env(str(tmp_path / "fork.git"), TOKEN)
    assert "GIT_CONFIG_COUNT" not in env and env["GIT_TERMINAL_PROMPT"] == "0"


class _GitHTTP(BaseHTTPRequestHandler):
    """Records the headers of git's smart-HTTP discovery requests, answers 401 (as GitHub
    does for a bad token), so git would try its credential helpers next."""

    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def git_http() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_GitHTTP,), {"seen": seen}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "c"],
                   check=True, env={**os.environ, **GIT_ENV})
    return repo


def _push(repo: Path, url: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), "push", url, "HEAD:refs/heads/contrib/x"],
        capture_output=True, text=True, check=False,
        env={**os.environ, **GIT_ENV, "GIT_ALLOW_PROTOCOL": "file:http", **env},
    )


def test_git_push_sends_the_header_and_stores_nothing(
    tmp_path: Path, git_http: tuple[str, list[dict[str, str]]]
) -> None:
    base, seen = git_http
    repo = _repo(tmp_path)
    url = f"{base}/me/proj.git"
    out = _push(repo, url, push_env(url, TOKEN))
    assert out.returncode != 0, out.stderr  # the server says 401; we only care what git sent
    assert seen, out.stderr
    assert seen and seen[0]["path"].startswith("/me/proj.git/info/refs?service=git-receive-pack")
    assert seen[0]["authorization"] == auth_header(TOKEN).split(": ", 1)[1]
    cmdline_and_output = out.stdout + out.stderr
    assert TOKEN not in cmdline_and_output
    for path in (repo / ".git").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
            assert auth_header(TOKEN).split()[-1].encode() not in path.read_bytes(), path


def test_rejected_token_never_touches_stored_credentials(
    tmp_path: Path, git_http: tuple[str, list[dict[str, str]]]
) -> None:
    """The user's credential helper is never asked (nor told to erase its entry on a 401)."""
    base, seen = git_http
    repo = _repo(tmp_path)
    calls = tmp_path / "helper-calls"
    helper = tmp_path / "helper.sh"
    helper.write_text(f'#!/bin/sh\necho "$1" >> {calls}\n'
                      "echo username=someone-else\necho password=stored-secret\n")
    helper.chmod(0o755)
    subprocess.run(["git", "config", "--global", "credential.helper", str(helper)], check=True)
    url = f"{base}/me/proj.git"
    out = _push(repo, url, push_env(url, TOKEN))
    assert out.returncode != 0 and "terminal prompts disabled" in out.stderr
    assert not calls.exists()  # without the reset: "get", then "erase" of the user's entry
    assert [r["authorization"] for r in seen] == [auth_header(TOKEN).split(": ", 1)[1]]


def test_header_is_not_sent_to_another_host(
    tmp_path: Path, git_http: tuple[str, list[dict[str, str]]]
) -> None:
    base, seen = git_http
    repo = _repo(tmp_path)
    env = push_env("https://github.com/me/proj.git", TOKEN)  # scoped to github.com
    _push(repo, f"{base}/me/proj.git", env)
    assert seen and "authorization" not in seen[0]
