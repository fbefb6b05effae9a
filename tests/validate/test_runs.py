"""`contrib validate`'s verdicts and exit codes, `--out` runs and `--merge` from several machines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contrib.record import read_record
from testing.miniupstream import new_variant as _new
from testing.workspace import Workspace

UNSET = "$CONTRIB_TEST_DIR_THAT_IS_NOT_SET"
H200 = [{"name": "NVIDIA H200", "compute_capability": "9.0"}] * 2


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, contrib's private state included."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _settings(ps_dir: Path, text: str) -> None:
    meta = ps_dir / "patchset.toml"
    meta.write_text(meta.read_text() + "\n[validation]\n" + text + "\n")


@pytest.fixture
def whole(fi: Workspace, tmp_path: Path) -> Path:
    """The whole fix, with its PTX stage unable to run here (a header folder not set)."""
    ps_dir = _new(fi, tmp_path, "whole", "full-fix")
    _settings(ps_dir, f'ptx_include_dirs = ["{UNSET}"]')
    return ps_dir


def test_a_skipped_required_stage_is_incomplete_and_exit_1(fi: Workspace, whole: Path) -> None:
    result = fi.run("validate", "flashinfer/whole", "--json")
    assert result.code == 1, result.err
    [doc] = result.json["validations"]
    assert result.json["verdict"] == doc["verdict"] == "incomplete"
    assert "ptx" in doc["skipped"] and doc["unmet"] == ["ptx"]
    human = fi.run("validate", "flashinfer/whole")
    assert human.code == 1 and "PASSED" not in human.out
    line = next(x for x in human.out.splitlines() if x.startswith("verdict "))
    assert "sm_120a: incomplete (skipped: ptx" in line
    assert line.endswith("required stage not passed: ptx")
    # patchset.toml says ptx is not needed: exit 0, and the verdict is still incomplete
    _settings_replace(whole, 'require = ["apply", "syntax", "gates", "arch-guards"]')
    result = fi.run("validate", "flashinfer/whole", "--json")
    assert result.code == 0 and result.json["verdict"] == "incomplete"
    record = read_record(next(whole.glob("*/validation.json")))
    assert record is not None and len(record.runs) == 1  # the same host's run was replaced


def _settings_replace(ps_dir: Path, line: str) -> None:
    meta = ps_dir / "patchset.toml"
    meta.write_text(meta.read_text().replace("[validation]\n", f"[validation]\n{line}\n"))


def test_out_writes_one_run_file_and_nothing_in_the_workspace(fi: Workspace, whole: Path,
                                                              tmp_path: Path) -> None:
    before = tree(fi.root)
    out = tmp_path / "runs" / "here.json"
    result = fi.run("validate", "flashinfer/whole", "--out", str(out), "--json")
    assert result.code == 1 and result.json["validations"][0]["path"] == str(out)
    assert tree(fi.root) == before
    record = read_record(out)
    assert record is not None and len(record.runs) == 1 and record.target == "flashinfer/whole"
    inside = fi.run("validate", "flashinfer/whole", "--out", str(fi.root / "run.json"))
    assert inside.code == 2 and "inside the workspace" in inside.err
    assert tree(fi.root) == before


def _variant(run_file: Path, dest: Path, hostname: str, tests: str, **head: Any) -> Path:
    """The same run as if made on another machine, whose tests stage said ``tests``."""
    data = json.loads(run_file.read_text())
    data.update(head)
    run = data["runs"][0]
    run["id"] = f"run-{hostname}"
    run["host"].update(hostname=hostname, gpus=H200, nvidia_smi=True, nvcc=None)
    for stage in run["stages"]:
        if stage["name"] in ("tests", "ptx", "others"):  # what needs its GPU or nvcc
            stage["status"] = tests
    dest.write_text(json.dumps(data))
    return dest


def test_merge_runs_from_several_machines(fi: Workspace, whole: Path, tmp_path: Path) -> None:
    here = tmp_path / "here.json"
    assert fi.run("validate", "flashinfer/whole", "--out", str(here)).code == 1
    gpu = _variant(here, tmp_path / "gpu.json", "gpu-b", "passed")
    merged = fi.run("validate", "--merge", str(here), str(gpu), "--json")
    assert merged.code == 0, merged.err
    assert [m["added"] for m in merged.json["merged"]] == [1, 1]
    path = next(whole.glob("*/validation.json"))
    record = read_record(path)
    assert record is not None and [r.host.hostname for r in record.runs][1] == "gpu-b"
    row = fi.run("status", "--no-fetch", "--json").json["patchsets"][0]["validation"]
    assert row["summary"] == "sm_120a: passed", row  # gpu-b ran what this host skipped
    assert "gpu-b, 2x NVIDIA H200 (sm 9.0)" in [r["host"] for r in row["runs"]]
    # merging the same files again changes nothing
    again_before = path.read_bytes()
    again = fi.run("validate", "--merge", str(gpu), str(here))
    assert again.code == 0 and "already there" in again.out and path.read_bytes() == again_before
    # a third machine whose run failed a stage the others passed: the arch fails
    bad = _variant(here, tmp_path / "bad.json", "gpu-c", "failed")
    assert fi.run("validate", "--merge", str(bad)).code == 0
    row = fi.run("status", "--no-fetch", "--json").json["patchsets"][0]["validation"]
    assert row["summary"].startswith("sm_120a: failed (failed: ptx, others, tests")
    # a fresh validate here replaces this host's run and keeps the other machines'
    fi.run("validate", "flashinfer/whole")
    record = read_record(path)
    assert record is not None
    assert sorted(r.host.hostname for r in record.runs)[:2] == ["gpu-b", "gpu-c"]
    assert len(record.runs) == 3


def test_merge_refuses_runs_of_another_version(fi: Workspace, whole: Path, tmp_path: Path) -> None:
    here = tmp_path / "here.json"
    fi.run("validate", "flashinfer/whole", "--out", str(here))
    base = json.loads(here.read_text())["base"]
    cases = {
        "other base": (_variant(here, tmp_path / "a.json", "a", "passed", base="1" * 40),
                       "a version the workspace does not have"),
        "other patchset": (_variant(here, tmp_path / "b.json", "b", "passed", patchset="ghost"),
                           "no patchset 'ghost'"),
        "stale digest": (_variant(here, tmp_path / "c.json", "c", "passed",
                                  digest="sha256:" + "0" * 64), "stale: the series, a patch"),
        "corrupt": (_write(tmp_path / "d.json", '{"schema": 2, "upstream": "flashinfer"'),
                    "not valid JSON"),
        "wrong type": (_variant(here, tmp_path / "e.json", "e", "maybe"),
                       ".status: 'maybe' is not one of"),
        "missing": (tmp_path / "nope.json", "no such file"),
        "old format": (_write(tmp_path / "f.json", '{"schema": 1, "overall": "passed"}'),
                       "old format"),
    }
    before = tree(fi.root)
    for label, (bad, needle) in cases.items():
        # a good file first: all or nothing
        result = fi.run("validate", "--merge", str(here), str(bad))
        assert result.code == 2, (label, result.err)
        assert needle in result.err, (label, result.err)
        assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
        assert tree(fi.root) == {**before, **_lock_files(fi.root)}, label
    # a patch edited after the run was made: the run no longer binds
    patch = next(whole.glob(f"{base}/0001-*.patch"))
    patch.write_bytes(patch.read_bytes().replace(b"admit SM120", b"admit SM12x"))
    result = fi.run("validate", "--merge", str(here))
    assert result.code == 2 and "stale" in result.err
    assert not (whole / base / "validation.json").exists()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _lock_files(root: Path) -> dict[str, bytes]:
    """What taking the workspace lock leaves in .contrib (state, not workspace content)."""
    return {k: v for k, v in tree(root).items() if k.startswith(".contrib/")}


def test_merge_usage_errors(fi: Workspace, tmp_path: Path) -> None:
    assert fi.run("validate", "--merge").code == 2
    mixed = fi.run("validate", "--merge", "--arch", "sm_90a", str(tmp_path / "x.json"))
    assert mixed.code == 2 and "--merge takes run files only" in mixed.err


def test_junit_at_an_unwritable_path_is_one_line(fi: Workspace, whole: Path,
                                                 tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    before = tree(fi.root)
    result = fi.run("validate", "flashinfer/whole", "--junit", str(blocker / "sub" / "j.xml"))
    assert result.code == 2 and "cannot create its folder" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert {k: v for k, v in tree(fi.root).items() if not k.startswith(".contrib/")} == {
        k: v for k, v in before.items() if not k.startswith(".contrib/")}


def test_a_hostname_with_markup_is_shown_as_text(fi: Workspace, whole: Path,
                                                 tmp_path: Path) -> None:
    here = tmp_path / "here.json"
    fi.run("validate", "flashinfer/whole", "--out", str(here))
    odd = _variant(here, tmp_path / "odd.json", "x", "passed")
    odd.write_text(odd.read_text().replace('"hostname": "x"', '"hostname": "[/oops]"'))
    assert fi.run("validate", "--merge", str(odd)).code == 0
    human = fi.run("status", "--no-fetch")
    assert human.code == 0 and "[/oops]" in human.out, human.err
