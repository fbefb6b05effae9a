"""Hypothesis: any bytes in validation.json or a run file give exit 0, 1 or 2, never 3.

The reader only ever raises ConfigError (exit 2) naming the file; where a
command needs only a verdict (status, open-pr) the same bytes read as "not
validated", never as passed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contrib.errors import ConfigError
from contrib.record import Record, add_run, digest, read_record, record_json, standing
from contrib.workspace.validation import Settings
from testing.audit import FIGURES
from testing.gitutil import Repo
from testing.recordutil import PASSING, run_of
from testing.workspace import Workspace, make_patch

FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
BASE = "a" * 40
DIGEST = digest("proj", "keep", BASE, ["0001-a.patch"], [b"x"], Settings().digest_view())
GOOD = json.loads(record_json(add_run(Record("proj", "keep", BASE, DIGEST),
                                      run_of(PASSING).run(), supersede=False)))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
    | st.text(max_size=20) | st.sampled_from(["passed", "failed", "skipped", "sm_120a", BASE]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=10)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


PATHS = [p for p in _paths(GOOD) if p]


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


_DELETE = object()
mutated = st.builds(_replace, st.just(GOOD), st.sampled_from(PATHS),
                    json_values | st.just(_DELETE)).map(lambda d: json.dumps(d).encode())
any_bytes = st.binary(max_size=300) | mutated | st.sampled_from([
    b"[" * 100_000, b'{"schema": 2' + b', "a": {' * 50_000, b"\xff\xfe{}", b"1e999999",
    json.dumps({**GOOD, "schema": 1}).encode(), json.dumps(GOOD).encode()[:-5]])


@FUZZ
@given(data=any_bytes)
def test_reader_only_raises_config_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "validation.json"
    path.write_bytes(data)
    try:
        record = read_record(path)
    except ConfigError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)
        record = None
    seen = standing(path, "proj", "keep", BASE, DIGEST, Settings().required())
    if record is None:  # anything unreadable is "not validated", never a verdict
        assert not seen.bound and seen.verdicts == ()
    else:
        assert seen.bound == (record.digest == DIGEST and record.base == BASE
                              and record.target == "proj/keep" and bool(record.runs))
    FIGURES["fuzz: validation.json byte strings"] += 1


@pytest.fixture(scope="module")
def keep(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    tmp = tmp_path_factory.mktemp("records")
    upstream = Repo(tmp / "upstream")
    upstream.commit("init", {"pkg/__init__.py": "", "pkg/core.py": "X = 1\n"})
    root = tmp / "ws"
    root.mkdir()
    ws = Workspace(root, {"proj": upstream})
    ws.write_config()
    patch = make_patch(upstream, tmp, {"pkg/keep.py": "K = 1\n"}, "keep", name="keep")[0]
    assert ws.run("new", "proj", "keep", "--base", "main", "--patch", str(patch)).code == 0
    return ws


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=any_bytes)
def test_commands_never_exit_3_on_any_validation_json(keep: Workspace, data: bytes) -> None:
    version = next((keep.root / "patchsets" / "proj" / "keep").glob("*/series")).parent
    (version / "validation.json").write_bytes(data)
    status = keep.run("status", "--json")  # a local upstream; --no-fetch never clones
    assert status.code == 0, status.err
    assert status.json["patchsets"][0]["validation"]["validated"] is False  # type: ignore[index]
    pr = keep.run("open-pr", "--dry-run", "proj/keep")
    assert pr.code == 1 and "not validated" in pr.err and "Traceback" not in pr.err
    merged = keep.run("validate", "--merge", str(version / "validation.json"))
    assert merged.code == 2 and len(merged.err.strip().splitlines()) == 1, merged.err
    FIGURES["fuzz: commands run on fuzzed validation.json"] += 3
