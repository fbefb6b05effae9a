"""`contrib enable` on a mini upstream: each form of gate, the chain, refusals, bad input."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from testing.gitutil import Repo
from testing.workspace import Workspace


def _enable(ws: Workspace, *args: str) -> Any:
    result = ws.run("enable", "mini", "--arch", "sm_120a", *args, "--json")
    assert result.code in (0, 1), result.err
    return result


def _diff(ws: Workspace, patchset: str) -> str:
    folder = ws.root / "patchsets" / patchset
    meta = tomllib.loads((folder / "patchset.toml").read_text(encoding="utf-8"))
    return "".join(p.read_text(encoding="utf-8") for p in sorted((folder / meta["current"]).glob("*.patch")))


def _changes(patches: str) -> list[str]:
    """The lines the patches remove and add (not their messages)."""
    out, in_diff = [], False
    for line in patches.splitlines():
        in_diff = in_diff and not line.startswith("From ") or line.startswith("diff --git")
        if in_diff and line[:1] in ("+", "-") and not line.startswith(("+++", "---")):
            out.append(line)
    return out


def test_a_jit_list_gains_the_major_with_the_runtime_gate_above_it(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    result = _enable(ws, "pkg/jit.py:gen_norm_module")
    (drafted,) = result.json["drafted"]
    assert drafted["patchset"] == "mini/enable-norm"
    assert drafted["gates"] == ["pkg/jit.py:5 gen_norm_module", "pkg/runtime.py:7 norm"]
    assert _changes(_diff(ws, "mini/enable-norm")) == [
        "-    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])",
        "+    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10, 12])",
        "-from pkg.utils import is_sm90_supported, is_sm100_supported",
        "+from pkg.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported",
        "-    if is_sm90_supported() or is_sm100_supported():",
        "+    if is_sm90_supported() or is_sm100_supported() or is_sm120_supported():",
    ]
    meta = tomllib.loads((ws.root / "patchsets/mini/enable-norm/patchset.toml").read_text())
    assert meta["upstream_status"] == "Draft" and meta["arch"] == "sm_120a"
    assert "gate-only" in meta["summary"] and "compiled out" in meta["summary"]
    jit = meta["decisions"]["pkg/jit.py:5 gen_norm_module"]
    assert jit["done"] == "widened" and jit["what"] == (
        "pkg/jit.py:5: majors [9, 10] -> [9, 10, 12] (gen_norm_module)")
    assert [d["done"] for d in meta["decisions"].values()] == ["widened", "widened"]
    assert meta["history"][0]["how"] == "enable"
    # the upstream's style, one commit per area (top-level modules: their own names)
    assert drafted["patches"] == ["0001-feat-jit-enable-gen_norm_module-on-SM120.patch",
                                  "0002-feat-runtime-enable-gen_norm_module-on-SM120.patch"]
    assert drafted["verdict"] in ("passed", "incomplete")


def test_a_decorator_list_is_widened_as_the_file_spells_the_family(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    result = _enable(ws, "pkg/jit.py:gen_fast_module", "--name", "fast")
    (drafted,) = result.json["drafted"]
    assert drafted["gates"] == ["pkg/jit.py:15 gen_fast_module", "pkg/gemm.py:5 _fast_requirement"]
    assert _changes(_diff(ws, "mini/fast")) == [
        "-        supported_major_versions=[10]",
        "+        supported_major_versions=[10, 12]",
        "-@supported_compute_capability([100, 103])",
        "+@supported_compute_capability([100, 103, 120, 121])",
    ]


def test_a_predicate_gains_its_cached_value_and_its_import(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    # The audit reads this return as a value, not a refusal; named, it is drafted all the same.
    result = _enable(ws, "pkg/fusion.py:use_fusion")
    (drafted,) = result.json["drafted"]
    assert _changes(_diff(ws, drafted["patchset"])) == [
        "+    is_sm120_supported,",
        "+_is_sm120_supported = _is_cuda and is_sm120_supported()",
        "-    return (_is_sm90_supported or _is_sm100_supported) and batch > 0",
        "+    return (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported) and batch > 0",
    ]
    result = _enable(ws, "pkg/fusion.py:18")  # FILE:LINE; the import exists once only
    assert _changes(_diff(ws, result.json["drafted"][0]["patchset"])) == [
        "+    is_sm120_supported,",
        "-    if is_sm100_supported():",
        "+    if is_sm100_supported() or is_sm120_supported():",
    ]


def test_needs_kernel_work_is_refused_with_its_guards(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    for gate in ("pkg/jit.py:gen_comm_module", "pkg/runtime.py:allreduce"):
        result = ws.run("enable", "mini", "--arch", "sm_120a", gate, "--json")
        assert result.code == 1, result.err
        assert result.json["drafted"] == []
        (skipped,) = result.json["skipped"]
        assert skipped["why"].startswith("needs kernel work: compiled out for the target by "
                                         "the guards at csrc/comm.cuh:3"), skipped
    assert not (ws.root / "patchsets").exists()


def test_every_uncovered_gate_once_then_nothing(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    result = _enable(ws)
    assert result.code == 0
    # The requirement gate has a class of its own now (it guards the "fast" backend of the
    # function it is registered on), so the fast chain is drafted from it: the same two
    # edits, the requirement's list and the JIT list.
    drafted = {d["patchset"]: d["gates"] for d in result.json["drafted"]}
    assert drafted == {"mini/enable-fast-requirement": ["pkg/gemm.py:5 _fast_requirement",
                                                        "pkg/jit.py:15 gen_fast_module"],
                       "mini/enable-norm": ["pkg/jit.py:5 gen_norm_module", "pkg/runtime.py:7 norm"]}
    again = _enable(ws)
    assert again.json == {**result.json, "drafted": [], "skipped": []}  # covered: nothing new
    named = _enable(ws, "pkg/jit.py:gen_norm_module")
    assert named.json["skipped"] == [{"gate": "pkg/jit.py:5 gen_norm_module",
                                      "why": "covered by mini/enable-norm"}]


@pytest.mark.parametrize(("args", "message"), [
    (["pkg/jit.py:gen_nope_module"], "pkg/jit.py:gen_nope_module: no gate there in mini at "),
    (["pkg/jit.py:gen_wide_module"], "already admits sm_120a"),
    (["--at", "no-such-ref"], "no-such-ref"),
    (["pkg/jit.py"], "give a gate as FILE:FUNCTION or FILE:LINE"),
])
def test_bad_input_exits_2_with_one_line(mini: tuple[Workspace, Repo], args: list[str],
                                         message: str) -> None:
    ws, _ = mini
    result = ws.run("enable", "mini", "--arch", "sm_120a", *args)
    assert result.code == 2, (result.out, result.err)
    assert message in result.err and len(result.err.strip().splitlines()) == 1, result.err
    assert not (ws.root / "patchsets").exists()


def test_the_draft_is_a_patchset_sync_and_validate_read(mini: tuple[Workspace, Repo], tmp_path: Path) -> None:
    ws, _ = mini
    _enable(ws, "pkg/jit.py:gen_norm_module")
    status = ws.run("status", "--no-fetch", "--json")
    assert status.code in (0, 1), status.err
    assert "mini/enable-norm" in status.out


def test_a_draft_whose_kernels_nvcc_could_not_compile_is_said_to_stand_on_the_guards(
        tmp_path: Path) -> None:
    from testing.proofupstream import proof_upstream

    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"mini": proof_upstream(tmp_path / "mini")})
    ws.write_config()
    result = ws.run("enable", "mini", "--arch", "sm_120a", "pkg/jit.py:gen_mla_module")
    assert result.code in (0, 1), result.err
    [warning] = [line for line in result.err.splitlines() if "#if guards alone" in line]
    assert warning.startswith("mini/enable-mla: gate-only stands on the #if guards alone here: "
                              "the ptx stage was skipped (")
    assert warning.endswith("nothing proves sm_120a gets real kernels")
    assert ("cutlass/cutlass.h" if shutil.which("nvcc") else "nvcc") in warning
    proven = ws.run("enable", "mini", "--arch", "sm_120a", "pkg/jit.py:gen_act_module", "--json")
    if shutil.which("nvcc"):  # its unit compiles here: proven, nothing to warn of
        assert proven.json["drafted"][0]["unproven"] == ""
        assert "#if guards alone" not in proven.err
