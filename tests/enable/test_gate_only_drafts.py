"""The audit calls a gate gate-only exactly where ``contrib enable`` drafts it: one rule
(:func:`contrib.analysis.opening.opening`) for both.  Each ``contrib enable`` the audit
prints drafts; a refusal naming the target's family, and a test of a value decided
elsewhere, are no gate-only row, and enable refuses them for the same reason."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from testing.openingupstream import opening_upstream
from testing.workspace import Workspace


@pytest.fixture
def olib(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"olib": opening_upstream(tmp_path / "olib")})
    ws.write_config()
    return ws


def _patches(ws: Workspace, patchset: str) -> str:
    folder = ws.root / "patchsets" / patchset
    meta = tomllib.loads((folder / "patchset.toml").read_text(encoding="utf-8"))
    return "".join(p.read_text(encoding="utf-8")
                   for p in sorted((folder / meta["current"]).glob("*.patch")))


def test_every_gate_only_row_drafts_and_a_refusal_by_name_is_none(olib: Workspace) -> None:
    ws = olib
    table = ws.run("audit", "olib", "--arch", "sm_120a", "--no-fetch", "--markdown").out
    rows = {m[2]: (m[1], m[3]) for m in re.finditer(r"^\| ([^|]+) \| `([^`]+)` \| (.*) \|$",
                                                      table, re.M)}
    assert {f: v for f, (v, _) in rows.items() if v.startswith("off")} == {
        "olib.mla_decode": "off, gate-only"}
    assert rows["olib.scaled"][0] == "unknown"  # not gate-only, no command
    assert "olib.prefill" not in rows or not rows["olib.prefill"][0].startswith("off, gate")
    commands = re.findall(r"`(contrib enable [^`]+)`", table)
    assert commands == [c for c in commands if "olib.mla_decode" in c] and commands
    for command in commands:
        result = ws.run(*shlex.split(command)[1:], "--no-fetch", "--json")
        assert result.code in (0, 1), result.err
        [drafted] = result.json["drafted"]
        assert drafted["gates"] == ["olib/api.py:9 mla_decode"]
    patches = _patches(ws, "olib/enable-olib-mla-decode")
    assert "-    if device_arch != 80:\n+    if device_arch not in (80, 120):\n" in patches


def test_the_audit_and_enable_refuse_by_the_same_rule(olib: Workspace) -> None:
    ws = olib
    audit = ws.run("audit", "olib", "--arch", "sm_120a", "--no-fetch", "--json", "--all")
    gates = {g["function"]: g for g in audit.json["upstreams"][0]["gates"]
             if g["file"] == "olib/api.py"}
    assert (gates["prefill"]["class"], gates["prefill"]["basis"]) == ("intentional",
                                                                      "names-target")
    assert (gates["scaled"]["class"], gates["scaled"]["basis"]) == ("unknown", "no-arch-form")
    assert gates["mla_decode"]["class"] == "gate-only"
    for spec, why in [
            ("olib/api.py:prefill", "left out on purpose: its test names the target's family "
                                    "and turns it away"),
            ("olib/api.py:scaled", "holds neither a list of archs, a predicate nor a "
                                   "comparison contrib can widen")]:
        result = ws.run("enable", "olib", spec, "--arch", "sm_120a", "--no-fetch", "--json")
        assert result.code == 1, result.err
        assert result.json["drafted"] == []
        [skipped] = result.json["skipped"]
        assert why in skipped["why"], skipped
