"""contrib.toml and patchset.toml: every mistake names file:line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.workspace.config import DEFAULT_SETTINGS_CLASS, load_config
from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch

CASES = [
    ("bad toml", "[upstreams.proj\nurl = 'x'\n", "contrib.toml:1"),
    ("unknown key", "[upstreams.proj]\nurl = 'x'\nbrnach = 'main'\n",
     "contrib.toml:3: unknown key 'brnach'"),
    ("missing url", "[upstreams.proj]\nbranch = 'main'\n", "contrib.toml:1: upstreams.proj.url is required"),
    ("bad table", "[upstream.proj]\nurl = 'x'\n", "contrib.toml:1: unknown key 'upstream'"),
    ("wrong type", "[upstreams.proj]\nurl = 'x'\nbranch = 3\n",
     "contrib.toml:3: upstreams.proj.branch must be a string, not an integer"),
    ("bad fork", "[upstreams.proj]\nurl = 'x'\nfork = 'nofork'\n", "fork must be OWNER/NAME"),
    ("bad api", "[github]\napi_url = 'ftp://x'\n", "api_url must be an http(s) URL"),
    ("bad upstream name", "[upstreams.-proj]\nurl = 'x'\n", "contrib.toml:1: upstream name '-proj' is invalid"),
    ("upstream name with a newline", "[upstreams.\"minifer\\n\"]\nurl = 'x'\n",
     "upstream name 'minifer\\n' is invalid"),
    ("branch with a newline", "[upstreams.proj]\nurl = 'x'\nbranch = \"main\\n\"\n",
     "branch must be a git branch name"),
    ("branch an option", "[upstreams.proj]\nurl = 'x'\nbranch = '--all'\n",
     "branch must be a git branch name"),
    ("url with a newline", "[upstreams.proj]\nurl = \"x\\ny\"\n", "control character"),
    ("fork with a newline", "[upstreams.proj]\nurl = 'x'\nfork = \"a/b\\n\"\n",
     "fork must be OWNER/NAME"),
    ("upstream name too long", f"[upstreams.{'u' * 101}]\nurl = 'x'\n", "at most 100"),
    ("settings class of a wrong type", "[upstreams.proj]\nurl = 'x'\nsettings_class = 3\n",
     "contrib.toml:3: upstreams.proj.settings_class must be a string, not an integer"),
    ("settings class not a name", "[upstreams.proj]\nurl = 'x'\nsettings_class = 'Server Args'\n",
     "contrib.toml:3: upstreams.proj.settings_class must be a Python class name"),
]


@pytest.mark.parametrize(("label", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_config(workspace: Workspace, label: str, text: str, expected: str) -> None:
    (workspace.root / "contrib.toml").write_text(text)
    result = workspace.run("status", "--no-fetch")
    assert result.code == 2, result.err
    assert expected in result.err
    assert "Traceback" not in result.err


def test_the_settings_class_is_serverargs_unless_an_upstream_names_another(tmp_path: Path) -> None:
    (tmp_path / "contrib.toml").write_text(
        "[upstreams.sglang]\nurl = 'x'\n\n[upstreams.srv]\nurl = 'y'\nsettings_class = 'ServeConfig'\n")
    config = load_config(tmp_path)
    assert config.upstream("sglang").settings_class == DEFAULT_SETTINGS_CLASS == "ServerArgs"
    assert config.upstream("srv").settings_class == "ServeConfig"


def test_bad_patchset_meta(workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")
    assert workspace.run("new", "proj", "x", "--base", "main", "--patch", str(patches[0])).code == 0
    meta = workspace.root / "patchsets" / "proj" / "x" / "patchset.toml"
    good = meta.read_text()
    meta.write_text("colour = 'red'\n" + good)  # top level: the file ends in [[history]]
    result = workspace.run("status", "--no-fetch")
    assert result.code == 2 and "patchset.toml" in result.err and "unknown key 'colour'" in result.err
    meta.write_text(good.replace(upstream.head(), "deadbeef"))
    result = workspace.run("status", "--no-fetch")
    assert result.code == 2 and "current must be the 40-hex" in result.err
    meta.write_text(good)
    version = meta.parent / upstream.head()
    (version / "series").write_text("0001-add-x.patch\nmissing.patch\n")
    result = workspace.run("status", "--no-fetch")
    assert result.code == 2 and "series:2: names 'missing.patch'" in result.err
    (version / "series").write_text("0001-add-x.patch\n0001-add-x.patch\n")
    result = workspace.run("status", "--no-fetch")
    assert result.code == 2 and "listed twice" in result.err
    (version / "series").write_text("0001-add-x.patch\n")
    (meta.parent / "not-a-sha").mkdir()
    result = workspace.run("status", "--no-fetch")
    assert result.code == 2 and "not-a-sha" in result.err and "40-hex" in result.err


def test_unreachable_upstream(workspace: Workspace, tmp_path: Path) -> None:
    (workspace.root / "contrib.toml").write_text(
        f"[upstreams.proj]\nurl = '{tmp_path / 'gone'}'\n")
    patch = tmp_path / "p.patch"
    patch.write_text("x")
    result = workspace.run("new", "proj", "x", "--base", "main", "--patch", str(patch))
    assert result.code == 2 and "does not exist; fix url" in result.err


@pytest.mark.parametrize("name", ["contrib.toml", "patchset.toml"])
def test_toml_nested_thousands_deep_is_one_line_not_a_crash(workspace: Workspace, upstream: Repo,
                                                            tmp_path: Path, name: str) -> None:
    deep = "x = " + "[" * 5000 + "]" * 5000 + "\n"
    if name == "contrib.toml":
        target = workspace.root / "contrib.toml"
    else:
        patches = make_patch(upstream, tmp_path, {"pkg/deep.py": "X = 1\n"}, "deep")
        assert workspace.run("new", "proj", "deep", "--base", upstream.head(),
                             "--patch", *map(str, patches)).code == 0
        target = workspace.root / "patchsets" / "proj" / "deep" / "patchset.toml"
    target.write_text(target.read_text() + deep if name == "patchset.toml" else deep)
    result = workspace.run("status", "--no-fetch")
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1 and f"{name}: nested too deeply" in result.err
