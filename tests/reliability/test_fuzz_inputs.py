"""Hypothesis: the config loader and the patch/series readers never crash.

Whatever bytes a user feeds them, the only exception allowed out is a
ContribError (which the CLI turns into one line and exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contrib.carry.series import parse_hunks, split_mail
from contrib.errors import ConfigError, ContribError
from contrib.git.repo import Git
from contrib.workspace.config import load_config
from contrib.workspace.schema import SyncResult, read_meta
from testing.audit import FIGURES
from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

toml_ish = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from([
        "[upstreams.a]", "[upstreams.B]", "[github]", "[[upstreams]]", "url = 'x'",
        "url = 3", "branch = 'main'", "fork = 'a/b'", "fork = 'bad'", "github = []",
        "api_url = 'http://h'", "api_url = 1", "x = 1", "[upstreams]", "a = [", '"', "=",
        "push_url = ''", "maintainer_can_modify = 'yes'", "[upstreams.a.b]", "url = ''",
    ]), max_size=12).map("\n".join),
)


@FUZZ
@given(text=toml_ish)
def test_config_loader_only_raises_contrib_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "contrib.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        config = load_config(tmp_path)
    except ContribError as exc:
        assert str(exc).startswith(str(tmp_path / "contrib.toml"))
        return
    for upstream in config.upstreams.values():
        assert upstream.url


GOOD = b"""From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A U Thor <a@example.com>
Date: Tue, 14 Nov 2023 22:13:20 +0000
Subject: [PATCH] change

---
 f.py | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/f.py b/f.py
index 1111111..2222222 100644
--- a/f.py
+++ b/f.py
@@ -1,3 +1,3 @@ def f():
 a
-b
+c
 d
"""

mutations = st.lists(st.tuples(st.integers(0, len(GOOD) - 1),
                               st.sampled_from([b"", b"\n", b"@", b"-", b"+", b" ", b"\r\n",
                                                b"\xff", b"..", b"/", b"\x00", b"9"])),
                     max_size=6)


@pytest.fixture(scope="module")
def scratch_git(tmp_path_factory: pytest.TempPathFactory) -> Git:
    return Git.init(tmp_path_factory.mktemp("fuzzgit"), bare=True)


@FUZZ
@given(edits=mutations)
def test_patch_reader_only_raises_patch_error(scratch_git: Git, edits: list[tuple[int, bytes]]
                                              ) -> None:
    data = bytearray(GOOD)
    for position, insert in edits:
        data[position:position + 1] = insert
    try:
        patch = split_mail(scratch_git, "fuzz.patch", bytes(data))
    except ContribError as exc:
        assert "fuzz.patch" in str(exc)
        return
    assert patch.diff.strip()
    parse_hunks(patch.diff)


@FUZZ
@given(text=st.text(alphabet=st.sampled_from("@ -+\n,0123456789abdiff/"), max_size=300))
def test_hunk_parser_only_raises_patch_error(text: str) -> None:
    try:
        parse_hunks(text, "x.patch")
    except ContribError as exc:
        assert "x.patch" in str(exc)


# -- every hand-editable file, through the command line -------------------------------
#
# Any bytes in contrib.toml, patchset.toml, series, .contrib/sync-state.json or a
# transaction plan: the CLI exits 0, 1 or 2, never 3 ("internal error").

SHA = "0123456789abcdef0123456789abcdef01234567"
META_LINES = [
    "[sync]", "[pr]", "[[requires]]", "[decisions]", "[[history]]", "[sync.details]",
    "[[sync.details.upstreamed]]", "[[waivers]]", "[validation]", "result = 'rebased'",
    "result = 'moved'", "result = 3", f"from = '{SHA}'", "from = 'zz'", f"target = '{SHA}'",
    "commits = -1", "probes = 2", "number = 5", "number = '5'", "state = 'open'",
    "state = 1", f"pushed_history = ['{SHA}']", "pushed_history = [1]", "draft = 'no'",
    "upstream = 'proj'", "upstream = 1", f"commit = '{SHA}'", "tag_format = '{x}'",
    "tag_format = 'v{version}'", "pin_file = 'a'", "patch = 'p'", "how = 'x'", "pr = 0",
    "why = 1", "why = 'because'", "title = 3", "current = 'zz'", "upstream_status = 'X'",
    "created = 2024-01-01T00:00:00Z", "upstreamed = [1]", "notes = ['a']", "version = 1",
    "x = [", '"', "=", "\x00", "[pr.x]", "details = 'a'", "sync = 1", "requires = 2",
]
STATE_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(
        ["proj/keep", SHA, "conflict", "0001-keep.patch", "", "../x", "/tmp"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["state_version", "pending", "proj/keep", "patchset", "base", "target", "breaking",
         "head", "index", "patch", "reason", "folder", "files", "previous_meta", "version",
         "ops", "kind", "staged", "x"]), inner, max_size=6),
    max_leaves=12)
any_bytes = st.binary(max_size=300)
CLI = settings(max_examples=40, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def fuzz_world(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    keep = make_patch(upstream, tmp_path, {"pkg/keep.py": "K = 1\n"}, "keep", name="keep")[0]
    assert workspace.run("new", "proj", "keep", "--base", "main", "--patch", str(keep)).code == 0
    return workspace


def _exits_cleanly(ws: Workspace, path: Path, data: bytes, *args: str) -> None:
    saved = path.read_bytes() if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    try:
        result = ws.run(*(args or ("status", "--no-fetch")))
        assert result.code in (0, 1, 2), (data, result.err)
        assert "internal error" not in result.err and "Traceback" not in result.err
    finally:
        if saved is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(saved)
    what = "a transaction plan" if path.parent.name == "txn" else path.name
    FIGURES[f"fuzz examples: {what} via the CLI"] += 1


def _keep(ws: Workspace) -> Path:
    return ws.root / "patchsets" / "proj" / "keep"


@CLI
@given(lines=st.lists(st.sampled_from(META_LINES), max_size=10), raw=any_bytes,
       use_raw=st.booleans())
def test_any_patchset_toml_exits_0_1_or_2(fuzz_world: Workspace, lines: list[str],
                                          raw: bytes, use_raw: bool) -> None:
    meta = _keep(fuzz_world) / "patchset.toml"
    good = meta.read_bytes()
    data = raw if use_raw else good + "\n".join(lines).encode()
    _exits_cleanly(fuzz_world, meta, data)


@CLI
@given(text=toml_ish, raw=any_bytes, use_raw=st.booleans())
def test_any_contrib_toml_exits_0_1_or_2(fuzz_world: Workspace, text: str, raw: bytes,
                                         use_raw: bool) -> None:
    data = raw if use_raw else text.encode("utf-8", "surrogatepass")
    _exits_cleanly(fuzz_world, fuzz_world.root / "contrib.toml", data)


@CLI
@given(raw=st.one_of(any_bytes, st.lists(st.sampled_from(
    ["0001-keep.patch", "#", "", "..", "a b", "0001-keep.patch\n", "x/y", "\xff", "ghost"]),
    max_size=5).map(lambda xs: "\n".join(xs).encode("utf-8", "surrogatepass"))))
def test_any_series_exits_0_1_or_2(fuzz_world: Workspace, raw: bytes) -> None:
    version = next(p for p in _keep(fuzz_world).iterdir() if p.is_dir())
    _exits_cleanly(fuzz_world, version / "series", raw)


@CLI
@given(value=STATE_VALUES, raw=any_bytes, use_raw=st.booleans(),
       command=st.sampled_from([("status", "--no-fetch"), ("sync", "--no-fetch"),
                                ("sync", "--abort"), ("sync", "--continue")]))
def test_any_sync_state_exits_0_1_or_2(fuzz_world: Workspace, value: object, raw: bytes,
                                       use_raw: bool, command: tuple[str, ...]) -> None:
    data = raw if use_raw else json.dumps(value).encode()
    _exits_cleanly(fuzz_world, fuzz_world.root / ".contrib" / "sync-state.json", data, *command)


@CLI
@given(value=STATE_VALUES, raw=any_bytes, use_raw=st.booleans())
def test_any_transaction_plan_exits_0_1_or_2(fuzz_world: Workspace, value: object,
                                             raw: bytes, use_raw: bool) -> None:
    data = raw if use_raw else json.dumps(value).encode()
    _exits_cleanly(fuzz_world, fuzz_world.root / ".contrib" / "txn" / "plan.json", data)


def _tables(valid: bool) -> tuple[st.SearchStrategy[object], st.SearchStrategy[object]]:
    """([sync], [pr]) tables; ``valid``: good values only, else a mix with wrong ones."""
    def some(*values: object) -> st.SearchStrategy[object]:
        return st.just(values[0]) if valid else st.sampled_from(values)

    def ints(low: int, *bad: object) -> st.SearchStrategy[object]:
        return st.integers(low, 9) if valid else st.integers(low - 2, 9) | st.sampled_from(bad)

    shas = some(SHA, "zz", 1, "", SHA.upper())
    landed = st.fixed_dictionaries({"patch": some("0001-a.patch", "", 3)}, optional={
        "how": some("exact", 1), "sha": shas, "subject": some("s", 2),
        "pr": ints(1, "7", True), "author": some("a", []), "date": some("d", 4)})
    results = [r.value for r in SyncResult]
    sync = st.fixed_dictionaries({"result": st.sampled_from(results) if valid else some(
        "rebased", "moved", 3), "from": shas}, optional={
        "target": shas, "at": some("2024-01-01T00:00:00+00:00", 5), "commits": ints(0, "3"),
        "probes": ints(0, 1.5), **({} if valid else {"extra": some(1)}),
        "details": st.fixed_dictionaries({}, optional={
            "version": shas, "patches": st.lists(some("0001-a.patch", 1), max_size=3),
            "upstreamed": st.lists(landed, max_size=3) if valid else some("x", [1]),
            "notes": st.lists(some("n", 2), max_size=2),
            "conflict": st.dictionaries(some("patch", "bogus"), some("x", 1), max_size=2)})})
    pr = st.fixed_dictionaries({}, optional={
        "number": ints(1, "5", False), "state": some("open", "closed", "merged", "draft", 1),
        "draft": st.booleans() if valid else some(0, "no"), "url": some("https://x/pull/1", 1),
        "pushed": shas, "version": shas, "previous": shas,
        "pushed_history": st.lists(shas, max_size=3), "repo": some("o/r", 2),
        **({} if valid else {"bogus": some(1)})})
    return sync, pr


GOOD_SYNC, GOOD_PR = _tables(valid=True)
ANY_SYNC, ANY_PR = _tables(valid=False)


@FUZZ
@given(sync=st.none() | GOOD_SYNC | ANY_SYNC | st.sampled_from(["x", [1]]),
       pr=st.none() | GOOD_PR | ANY_PR | st.just(3))
def test_patchset_toml_reader_only_raises_config_error(tmp_path: Path, sync: object,
                                                       pr: object) -> None:
    """The typed reader on its own: only ConfigError; what it accepts writes back equal."""
    data = {"current": SHA, **({"sync": sync} if sync is not None else {}),
            **({"pr": pr} if pr is not None else {})}
    path = tmp_path / "patchset.toml"
    try:
        meta = read_meta(path, "", data)
    except ConfigError as exc:
        assert str(exc).startswith(f"{path}:")
        FIGURES["fuzz examples: patchset.toml reader (refused)"] += 1
        return
    FIGURES["fuzz examples: patchset.toml reader (accepted)"] += 1
    written = {"current": SHA}
    if meta.sync is not None:
        written["sync"] = meta.sync.to_table()
    if meta.pr is not None:
        written["pr"] = meta.pr.to_table()
    text = tomlkit.dumps(written)
    again = read_meta(path, text, tomlkit.parse(text).unwrap())
    assert (again.sync, again.pr) == (meta.sync, meta.pr)
