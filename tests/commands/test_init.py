"""`contrib init`: a workspace ready for `new`, from nothing."""

from __future__ import annotations

import tomllib
from pathlib import Path

from testing.gitutil import Repo
from testing.workspace import run_contrib


def test_init_writes_the_known_upstreams_ignores_state_and_makes_a_repository(
        tmp_path: Path) -> None:
    where = tmp_path / "carry"
    result = run_contrib("init", str(where))
    assert result.code == 0, result.err
    config = tomllib.loads((where / "contrib.toml").read_text())
    assert config["upstreams"]["flashinfer"]["github"] == "flashinfer-ai/flashinfer"
    assert config["upstreams"]["sglang"]["url"] == "https://github.com/sgl-project/sglang.git"
    assert "/.contrib/" in (where / ".gitignore").read_text().splitlines()
    assert (where / ".git").is_dir() and (where / "patchsets").is_dir()
    assert run_contrib("-C", str(where), "status", "--no-fetch").code == 0
    again = run_contrib("init", str(where))
    assert again.code == 2 and "already a workspace" in again.err


def test_init_takes_any_upstream_as_name_equals_url(tmp_path: Path, upstream: Repo) -> None:
    where = tmp_path / "ws"
    result = run_contrib("init", str(where), "--upstream", f"proj={upstream.path}", "--json")
    assert result.code == 0, result.err
    assert result.json["upstreams"] == [{"name": "proj", "url": str(upstream.path),  # type: ignore[index]
                                         "github": ""}]
    assert run_contrib("-C", str(where), "status").code == 0  # clones the local upstream
    unknown = run_contrib("init", str(tmp_path / "other"), "--upstream", "vllm")
    assert unknown.code == 2 and "--upstream vllm=URL" in unknown.err


def test_a_known_upstream_from_a_mirror_keeps_its_github_name(tmp_path: Path) -> None:
    """`--upstream flashinfer=/path` (a local mirror): PRs still target flashinfer-ai's."""
    ws = tmp_path / "ws"
    assert run_contrib("init", str(ws), "--upstream", f"flashinfer={tmp_path / 'mirror'}",
                       "--upstream", "sglang=git@example.com:me/sglang.git",
                       "--upstream", "vllm=/srv/vllm").code == 0
    text = (ws / "contrib.toml").read_text()
    assert 'github = "flashinfer-ai/flashinfer"' in text
    assert 'github = "sgl-project/sglang"' in text
    assert 'github = "upstream-owner/vllm"' in text  # unknown: a placeholder doctor flags


def test_init_writes_the_default_arch_every_arch_taking_command_reads(tmp_path: Path) -> None:
    """`[defaults] arch`: sm_120a unless --arch says (any spelling, written normalised),
    with a comment saying how to change it; `why`/`audit` then need no --arch."""
    from contrib.workspace.config import load_config

    plain = tmp_path / "plain"
    assert run_contrib("init", str(plain)).code == 0
    text = (plain / "contrib.toml").read_text()
    assert tomllib.loads(text)["defaults"] == {"arch": "sm_120a"}
    assert "change it here" in text and "sm_121a for GB10" in text
    assert load_config(plain).default_arch(None, "why") == "sm_120a"
    spark = tmp_path / "spark"
    made = run_contrib("init", str(spark), "--arch", "12.1", "--json")
    assert made.code == 0 and made.json["arch"] == "sm_121a"  # type: ignore[index]
    assert load_config(spark).default_arch(None, "audit") == "sm_121a"
    bad = run_contrib("init", str(tmp_path / "bad"), "--arch", "volta")
    assert bad.code == 2 and bad.err.count("\n") == 1 and "--arch: " in bad.err
    assert not (tmp_path / "bad").exists()
