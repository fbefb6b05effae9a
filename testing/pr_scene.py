"""An open-pr scene: upstream, a workspace with one validated patchset, a bare fork, fake GitHub."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from contrib.forge.github import GitHubForge
from contrib.pr.open import open_pr
from contrib.record.finding import Finding
from contrib.validate.report import StageResult, Validation, host_facts
from contrib.validate.testrun import Gpu
from contrib.workspace.model import Workspace
from testing.fake_github import FakeGitHost, FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.recordutil import run_of, write_bound
from testing.workspace import make_patch, run_contrib

UPSTREAM, FORK = "upstream-org/proj", "me/proj"
TARGET = "proj/sm120"
HEAD = "me:contrib/sm120"

def _validation() -> Validation:
    """A passing run made by contrib.validate.report itself (the real contract)."""
    gpus = [Gpu("NVIDIA RTX PRO 6000 Blackwell", "12.0")] * 2
    host = {**host_facts(gpus), "hostname": "gpu-box-7", "nvcc": "13.0"}
    waived = Finding("dropped-statement", "error", "csrc/ar.cuh", 41, "PDL sync compiled out",
                     waived="sm_120 has no PDL; upstream guards it the same way")
    stages = [
        StageResult("apply", "passed", "applies without fuzz"),
        StageResult("syntax", "passed", "1 touched file checks out"),
        StageResult("gates", "not-applicable", "the patch touches no architecture gate"),
        StageResult("arch-guards", "passed", "no empty kernel", [waived]),
        StageResult("ptx", "not-applicable", "no CUDA translation unit to compile"),
        StageResult("tests", "passed", "3 passed",
                    details={"selected": ["tests/test_core.py"], "counts": {"passed": 3}}),
    ]
    return run_of(stages, host=host)


PASSED = _validation()

fast_github = functools.partial(GitHubForge, retries=2, max_wait=2.0, backoff=0.0,
                                write_interval=0.0, timeout=5)


class Scene:
    """Upstream repo, workspace with one validated patchset, bare fork, fake GitHub."""

    def __init__(self, tmp_path: Path, upstream: Repo, fake: FakeGitHub,
                 githost: FakeGitHost | None = None) -> None:
        self.tmp, self.upstream, self.fake = tmp_path, upstream, fake
        self.root = tmp_path / "ws"
        self.root.mkdir()
        if githost is None:  # the fork as a local bare repo
            self.fork = tmp_path / "fork.git"
            push_url = str(self.fork)
        else:  # the fork behind real smart HTTP that demands the token
            self.fork = Path(githost.root) / f"{FORK}.git"
            push_url = f"{githost.url}/{FORK}.git"
        self.fork.parent.mkdir(parents=True, exist_ok=True)
        git(tmp_path, "init", "-q", "--bare", str(self.fork))
        (self.root / "contrib.toml").write_text(
            f'[github]\napi_url = "{fake.url}"\n\n[upstreams.proj]\nurl = "{upstream.path}"\n'
            f'branch = "main"\ngithub = "{UPSTREAM}"\nfork = "{FORK}"\n'
            f'push_url = "{push_url}"\n', encoding="utf-8")
        fake.add_repo(UPSTREAM, git_dir=str(upstream.path / ".git"))
        fake.add_repo(FORK, fork_of=UPSTREAM, git_dir=str(self.fork))
        patches = make_patch(upstream, tmp_path, {"pkg/core.py": upstream.read("pkg/core.py")
                                                  .replace("return 3\n", "return 30\n")},
                             "Admit SM120 in f3\n\nWiden the gate to sm_120.", name="p1")
        res = run_contrib("new", "proj", "sm120", "--base", "main",
                          *[a for p in patches for a in ("--patch", str(p))], cwd=self.root)
        assert res.code == 0, res.err
        self.write_validation(PASSED)

    @property
    def ws(self) -> Workspace:
        return Workspace(self.root)

    def meta(self) -> dict[str, Any]:
        ps = self.ws.patchset(TARGET)
        return {k: (v.unwrap() if hasattr(v, "unwrap") else v) for k, v in ps.meta.items()}

    def version_dir(self) -> Path:
        return self.ws.patchset(TARGET).current.dir

    def write_validation(self, data: Validation | dict[str, Any] | None) -> None:
        """A bound record of one run, a raw JSON document, or none."""
        version = self.ws.patchset(TARGET).current
        if data is None:
            version.validation_path.unlink(missing_ok=True)
        elif isinstance(data, Validation):
            write_bound(version, data)
        else:
            version.validation_path.write_text(json.dumps(data), encoding="utf-8")

    def run(self, *targets: str, **kw: Any) -> tuple[int, list[dict[str, Any]]]:
        ws = self.ws
        opts = {"dry_run": False, "force": False, "reopen": False, "github_factory": fast_github}
        opts.update(kw)
        with ws.lock():
            return open_pr(ws, list(targets) or [TARGET], **opts)

    def fork_tip(self) -> str | None:
        out = git(self.fork, "for-each-ref", "--format=%(objectname)", "refs/heads/contrib/sm120")
        return out or None

    def prs(self) -> list[dict[str, Any]]:
        return self.fake.pulls(UPSTREAM)

    def rebase(self) -> str:
        """Upstream moves on; the patchset gets a new version at the new tip (as sync would)."""
        old = self.version_dir()
        new_base = self.upstream.commit("Upstream: add notes", {"NOTES.md": "notes\n"})
        new = old.parent / new_base
        new.mkdir()
        for f in old.iterdir():
            if f.name != "validation.json":
                (new / f.name).write_bytes(f.read_bytes())
        meta = old.parent / "patchset.toml"
        text = meta.read_text()
        assert f'current = "{old.name}"' in text
        meta.write_text(text.replace(f'current = "{old.name}"', f'current = "{new_base}"'),
                        encoding="utf-8")
        self.write_validation(PASSED)
        return new_base
