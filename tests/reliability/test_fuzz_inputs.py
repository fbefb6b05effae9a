"""Hypothesis: the config loader and the patch/series readers never crash.

Whatever bytes a user feeds them, the only exception allowed out is a
ContribError (which the CLI turns into one line and exit 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contrib.config import load_config
from contrib.errors import ContribError
from contrib.git import Git
from contrib.series import parse_hunks, split_mail

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
