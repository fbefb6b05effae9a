"""Every next step the audit and ``contrib why`` print runs: each ``contrib enable``
they print drafts one patchset per upstream with the gates the feature's chain
lists, and a feature that is not gate-only drafts nothing, exit 1, with its reason."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from contrib.analysis.tree import DictTree
from contrib.audit.model import Evidence, Place
from contrib.enable.select import places
from testing.featureupstreams import feature_lower, feature_upstream
from testing.gitutil import Repo
from testing.libupstream import lib_upstream
from testing.workspace import Workspace

_OPENED_ROLES = ("gate", "below", "behind")


@pytest.fixture
def stack(tmp_path: Path) -> Workspace:
    """``top`` (a server) on ``lower``, and ``lib`` (a library)."""
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"top": feature_upstream(tmp_path / "top"),
                          "lower": feature_lower(tmp_path / "lower"),
                          "lib": lib_upstream(tmp_path / "lib")})
    ws.write_config()
    return ws


def _commands(text: str) -> list[tuple[str, ...]]:
    """The ``contrib enable`` commands of a report (Markdown code spans, why's lines)."""
    return [tuple(shlex.split(c)[1:]) for c in re.findall(r"contrib enable [^`\n]+", text)]


def _features(ws: Workspace, upstream: str) -> list[dict[str, Any]]:
    result = ws.run("audit", upstream, "--arch", "sm_120a", "--no-fetch", "--json")
    assert result.code in (0, 1), result.err
    [one] = result.json["upstreams"]
    return list(one["features"])


def _opened(feature: dict[str, Any]) -> dict[str, list[str]]:
    """The gates a gate-only chain opens, as enable labels them, per upstream."""
    out: dict[str, list[str]] = {}
    for link in feature["links"]:
        if link["role"] in _OPENED_ROLES and link["excludes_target"]:
            label = f"{link['file']}:{link['line']} {link['function']}"
            out.setdefault(link["upstream"], [])
            if label not in out[link["upstream"]]:
                out[link["upstream"]].append(label)
    return out


def test_every_enable_the_audit_and_why_print_drafts_the_chains_gates(stack: Workspace) -> None:
    ws = stack
    ran = 0
    for upstream in ("top", "lib"):
        table = _commands(ws.run("audit", upstream, "--arch", "sm_120a", "--no-fetch",
                                 "--markdown").out)
        for feature in _features(ws, upstream):
            why = ws.run("why", upstream, feature["feature"], "--arch", "sm_120a", "--no-fetch")
            said = _commands(why.out)
            if feature["verdict"] != "gate-only":
                assert said == []
                continue
            assert said and all(c in table for c in said), (said, table)
            opened = _opened(feature)
            assert [c[1] for c in said] == list(reversed(opened))  # one per upstream
            for command in said:
                result = ws.run(*command, "--no-fetch", "--json")
                assert result.code in (0, 1), result.err
                [drafted] = result.json["drafted"]  # one patchset per upstream
                assert drafted["gates"] == opened[command[1]], command
                ran += 1
    assert ran == 3  # top's --enable-fusion (both halves), lib.scale


def test_a_feature_not_gate_only_drafts_nothing_and_says_why(stack: Workspace) -> None:
    ws = stack
    for upstream, feature, said in [
            ("lib", "lib.finalize", "off, needs kernel work for sm_120a: lib lib/api.py:15 finalize"),
            ("top", "--enable-quick-reduce", "crash for sm_120a: admitted on the way down"),
            ("top", "--enable-scaled-quant", "on for sm_120a already")]:
        result = ws.run("enable", upstream, f"--feature={feature}", "--arch", "sm_120a",
                        "--no-fetch", "--json")
        assert result.code == 1, result.err
        assert result.json["drafted"] == []
        [skipped] = result.json["skipped"]
        assert skipped["gate"] == feature and skipped["why"].startswith(said), skipped
    human = ws.run("enable", "lib", "--feature=lib.finalize", "--arch", "sm_120a", "--no-fetch")
    assert human.code == 1 and human.out.splitlines()[-1].startswith("nothing drafted for lib at ")
    assert not (ws.root / "patchsets").exists()


def test_the_feature_opens_its_chain_where_its_module_alone_is_refused(stack: Workspace) -> None:
    ws = stack
    module = ws.run("enable", "lib", "lib/jit.py:gen_util_module", "--arch", "sm_120a",
                    "--no-fetch", "--json")
    assert module.code == 1 and module.json["drafted"] == []  # finalize's gate in its chain
    [refused] = module.json["skipped"]
    assert refused["gate"] == "lib/api.py:15 finalize"
    assert refused["why"].startswith("needs kernel work: compiled out for the target by the "
                                     "guards at csrc/comm.cuh:3 ("), refused
    feature = ws.run("enable", "lib", "--feature=lib.scale", "--arch", "sm_120a", "--no-fetch",
                     "--json")
    [drafted] = feature.json["drafted"]
    assert drafted["patchset"] == "lib/enable-lib-scale"
    assert drafted["gates"] == ["lib/api.py:6 scale", "lib/api.py:9 scale",
                                "lib/jit.py:5 gen_util_module", "lib/jit.py:10 gen_norm_module"]


def test_gates_named_together_are_one_patchset(mini: tuple[Workspace, Repo]) -> None:
    ws, _ = mini
    both = ws.run("enable", "mini", "pkg/jit.py:gen_norm_module", "pkg/jit.py:gen_fast_module",
                  "--arch", "sm_120a", "--json")
    [drafted] = both.json["drafted"]  # each gate with its chain, in one patchset
    assert drafted["patchset"] == "mini/enable-norm"
    assert drafted["gates"] == ["pkg/jit.py:5 gen_norm_module", "pkg/runtime.py:7 norm",
                                "pkg/jit.py:15 gen_fast_module", "pkg/gemm.py:5 _fast_requirement"]


def test_only_opens_the_named_gates_alone(stack: Workspace) -> None:
    ws = stack
    alone = ws.run("enable", "lib", "lib/jit.py:gen_util_module", "--only", "--name", "util",
                   "--arch", "sm_120a", "--no-fetch", "--json")
    [drafted] = alone.json["drafted"]
    assert drafted["gates"] == ["lib/jit.py:5 gen_util_module"]
    again = ws.run("enable", "lib", "lib/jit.py:gen_util_module", "--only", "--name", "util",
                   "--arch", "sm_120a", "--no-fetch")
    assert again.code == 1, again.err  # named, nothing drafted: it says why
    assert "gen_util_module: covered by lib/util" in again.out


@pytest.mark.parametrize(("args", "message"), [
    (["--feature=lib.nope"], "lib at main tip declares no feature 'lib.nope'"),
    (["--feature=lib.scale", "lib/api.py:6"], "name a feature (--feature) or gates, not both"),
])
def test_a_bad_feature_is_one_line_exit_2(stack: Workspace, args: list[str], message: str) -> None:
    result = stack.run("enable", "lib", *args, "--arch", "sm_120a", "--no-fetch")
    assert result.code == 2, (result.out, result.err)
    assert message in result.err and len(result.err.strip().splitlines()) == 1, result.err


def test_a_refusal_names_the_line_of_a_kernel_the_audit_keeps_by_name() -> None:
    kernel = "pkg/finalize.py"
    tree = DictTree({kernel: "import x\n\n\nclass Sm100Kernel:\n    admissible_archs = []\n\n"
                             "    def __call__(self):\n        pass\n"})
    evidence = (Evidence(f"{kernel} Sm100Kernel.__call__", says="sm_10x only"),
                Evidence("csrc/a.cuh:2", "csrc/a.cuh", guard=Place("csrc/a.cuh", 3)),
                Evidence("gen_x_sm100_module", says="named for sm_10x"),
                Evidence("csrc/b.cu", "csrc/b.cu", upstream="lower"))
    assert places(evidence, tree) == [(kernel, 7, False), ("csrc/a.cuh", 3, True),
                                      ("gen_x_sm100_module", 0, False),
                                      ("lower:csrc/b.cu", 0, False)]
