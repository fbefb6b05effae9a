"""Hostile validation records, run files and [validation] tables: refused with one line.

Each case: exit 1 (a record that proves nothing: the user must validate) or 2
(bad input), one line on stderr, no traceback, the workspace byte-identical
(contrib's private .contrib/ state aside) and nothing written outside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from contrib.record import record_json
from contrib.workspace.model import Workspace as ContribWorkspace
from testing.audit import FIGURES
from testing.crash import snapshot
from testing.gitutil import Repo
from testing.recordutil import PASSING, bound_record, run_of
from testing.workspace import Workspace, make_patch


@dataclass
class World:
    ws: Workspace
    tmp: Path

    @property
    def version(self) -> Path:
        return next((self.ws.root / "patchsets" / "proj" / "keep").glob("*/series")).parent

    def record(self, target: str = "proj/keep") -> str:
        """A passing record bound to ``target``'s current version."""
        version = ContribWorkspace(self.ws.root).patchset(target).current
        return record_json(bound_record(version, run_of(PASSING)))

    def put(self, text: str | bytes) -> None:
        data = text.encode() if isinstance(text, str) else text
        (self.version / "validation.json").write_bytes(data)

    def file(self, name: str, text: str | bytes) -> str:
        path = self.tmp / "inputs" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return str(path)


Setup = Callable[[World], object]
Args = Callable[[World], list[str]]
OPEN_PR = ["open-pr", "--dry-run", "proj/keep"]


def _put(text: Callable[[World], str | bytes]) -> Setup:
    return lambda w: w.put(text(w))


def _meta(extra: str) -> Setup:
    def setup(w: World) -> None:
        meta = w.ws.root / "patchsets" / "proj" / "keep" / "patchset.toml"
        meta.write_text(meta.read_text() + extra)
    return setup


def _patch_edited(w: World) -> None:
    w.put(w.record())
    patch = next(w.version.glob("0001-*.patch"))
    patch.write_bytes(patch.read_bytes().replace(b"K = 1", b"K = 2"))


def _series_edited(w: World) -> None:
    w.put(w.record())
    patch = next(w.version.glob("0001-*.patch"))
    (w.version / "0002-again.patch").write_bytes(patch.read_bytes())
    (w.version / "series").write_text(f"{patch.name}\n0002-again.patch\n")


def _merge(text: Callable[[World], str | bytes]) -> tuple[Setup, Args]:
    return (lambda w: w.file("run.json", text(w)),
            lambda w: ["validate", "--merge", str(w.tmp / "inputs" / "run.json")])


def _const(args: list[str]) -> Args:
    return lambda w: args


CASES: dict[str, tuple[Setup | None, Args, int, str]] = {
    "open-pr hand-written passed": (_put(lambda w: '{"overall": "passed"}'), _const(OPEN_PR), 1,
                                    "$.schema: missing"),
    "open-pr schema 1": (_put(lambda w: json.dumps({"schema": 1, "overall": "passed"})),
                         _const(OPEN_PR), 1, "old format"),
    "open-pr copied from another patchset": (_put(lambda w: w.record("proj/other")),
                                             _const(OPEN_PR), 1, "foreign: recorded for proj/other"),
    "open-pr other base": (_put(lambda w: w.record().replace(w.version.name, "1" * 40)),
                           _const(OPEN_PR), 1, "foreign: recorded for base 1111111111"),
    "open-pr patch edited after": (_patch_edited, _const(OPEN_PR), 1, "stale"),
    "open-pr series edited after": (_series_edited, _const(OPEN_PR), 1, "stale"),
    "open-pr wrong type": (_put(lambda w: w.record().replace('"passed"', "true", 1)),
                           _const(OPEN_PR), 1, ".status: expected a string"),
    "open-pr binary garbage": (_put(lambda w: b"\xff\x00{garbage"), _const(OPEN_PR), 1,
                               "not valid JSON"),
    "open-pr deep nesting": (_put(lambda w: "[" * 200_000), _const(OPEN_PR), 1, "not valid JSON"),
    "open-pr a list": (_put(lambda w: "[]"), _const(OPEN_PR), 1, "$: expected an object, got a list"),
    "merge corrupt": (*_merge(lambda w: '{"schema": 2,'), 2, "not valid JSON"),
    "merge empty runs": (*_merge(lambda w: w.record().split('"runs": [')[0] + '"runs": []}'), 2,
                         "$.runs: empty"),
    "merge other version": (*_merge(lambda w: w.record().replace(w.version.name, "2" * 40)), 2,
                            "a version the workspace does not have"),
    "merge unknown upstream": (*_merge(lambda w: w.record().replace('"upstream": "proj"',
                                                                    '"upstream": "ghost"')), 2,
                               "unknown target 'ghost/keep'"),
    "merge name with newline": (*_merge(lambda w: w.record().replace('"patchset": "keep"',
                                                                     '"patchset": "keep\\n"')), 2,
                                "$.patchset: 'keep\\n' is not of the form"),
    "merge a folder": (None, lambda w: ["validate", "--merge", str(w.tmp)], 2, "cannot read"),
    "compile unbalanced quote": (_meta("\n[validation]\ncompile = \"nvcc -o 'a.ptx\"\n"),
                                 _const(["validate", "proj/keep"]), 2,
                                 "validation.compile cannot be split"),
    "require unknown stage": (_meta("\n[validation]\nrequire = [\"apply\", \"lint\"]\n"),
                              _const(["validate", "proj/keep"]), 2, "unknown stage 'lint'"),
    "require not a list": (_meta("\n[validation]\nrequire = \"ptx\"\n"),
                           _const(["status", "--no-fetch"]), 2, "validation.require must be a list"),
    "compare a boolean": (_meta("\n[validation]\ncompare = [true]\n"), _const(OPEN_PR), 2,
                          "validation.compare"),
    "junit under a file": (lambda w: w.file("f", "x"), lambda w: [
        "validate", "proj/keep", "--junit", str(w.tmp / "inputs" / "f" / "j.xml")], 2,
        "cannot create its folder"),
    "out under a file": (lambda w: w.file("g", "x"), lambda w: [
        "validate", "proj/keep", "--out", str(w.tmp / "inputs" / "g" / "run.json")], 2,
        "cannot create its folder"),
    "out into the workspace": (None, lambda w: ["validate", "proj/keep", "--out",
                                                str(w.ws.root / "run.json")], 2,
                               "inside the workspace"),
    "out for two patchsets": (None, lambda w: ["validate", "--out", str(w.tmp / "r.json")], 2,
                              "--out writes the run of one patchset"),
}


@pytest.fixture
def world(workspace: Workspace, upstream: Repo, tmp_path: Path) -> World:
    for name, content in (("keep", "K = 1\n"), ("other", "O = 1\n")):
        patch = make_patch(upstream, tmp_path, {f"pkg/{name}.py": content}, name, name=name)[0]
        result = workspace.run("new", "proj", name, "--base", "main", "--patch", str(patch))
        assert result.code == 0, result.err
    return World(workspace, tmp_path)


@pytest.mark.parametrize("label", list(CASES))
def test_hostile_record_is_refused_cleanly(world: World, label: str) -> None:
    setup, args, code, expected = CASES[label]
    if setup is not None:
        setup(world)
    outside = sorted(p.name for p in world.tmp.iterdir())
    before = snapshot(world.ws.root)
    result = world.ws.run(*args(world))
    assert result.code == code, (label, result.code, result.err)
    assert expected in result.err, (label, result.err)
    assert "Traceback" not in result.err + result.out
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert snapshot(world.ws.root) == before, label
    assert sorted(p.name for p in world.tmp.iterdir()) == outside
    FIGURES[f"hostile records rejected cleanly (exit {result.code})"] += 1


def test_record_corpus_is_large_enough() -> None:
    assert len(CASES) >= 20
