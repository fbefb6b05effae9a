"""Features: what an upstream declares, each feature's chain across the stack, its verdict.

The mini server of :mod:`testing.featureupstreams` stands on ``lower`` as sglang on
flashinfer: one feature for each verdict, and a pin bump that turns a crash on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contrib.analysis.tree import DictTree
from contrib.audit.chains import Feature, FeatureKind, Link, Role, Verdict
from contrib.audit.engine import TreeAudit
from contrib.audit.feature.chain import decide
from contrib.audit.feature.declared import declared, settings_elsewhere
from contrib.audit.feature.questions import passed_by_caller
from contrib.audit.feature.show import feature_rows, find
from contrib.audit.model import (
    CAPABILITY,
    GATE_ONLY,
    NEEDS_KERNEL_WORK,
    UNKNOWN,
    AuditGate,
    Evidence,
)
from contrib.audit.serial import chain_cache, chain_from_cache
from contrib.audit.stack.lower import Lower
from contrib.workspace.config import DEFAULT_SETTINGS_CLASS as SETTINGS_CLASS
from testing.featureupstreams import SERVER_ARGS, feature_lower, feature_upstream
from testing.gitutil import Repo, git
from testing.stackupstreams import repin
from testing.workspace import Workspace


@pytest.fixture
def server(tmp_path: Path) -> tuple[Workspace, Repo]:
    top = feature_upstream(tmp_path / "top")
    return _workspace(tmp_path, top, feature_lower(tmp_path / "lower")), top


def _workspace(tmp_path: Path, top: Repo, lower: Repo) -> Workspace:
    """A workspace naming ``top`` and ``lower``, its config written."""
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"top": top, "lower": lower})
    ws.write_config()
    return ws


def _why(ws: Workspace, *args: str) -> tuple[int, dict[str, Any]]:
    result = ws.run("why", *args, "--arch", "sm_120a", "--json")
    assert result.code in (0, 1), result.err
    data = result.json
    assert isinstance(data, dict)
    return result.code, data


def _verdicts(data: dict[str, Any]) -> dict[str, str]:
    return {f["feature"]: f["verdict"] for f in data["features"]}


def test_each_verdict_on_one_server(server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    code, data = _why(ws, "top", "--attention-backend")  # every choice of the setting
    assert code == 1
    assert _verdicts(data) == {"--attention-backend=plain": "on",
                               "--attention-backend=decode": "needs-kernel-work"}
    decode = next(f for f in data["features"] if f["feature"].endswith("=decode"))
    roles = [(link["role"], link["function"]) for link in decode["links"]]
    assert roles == [("read", "attention"), ("gate", "attend"), ("behind", "gen_decode_module")]
    assert decode["links"][1]["class"] == "needs-kernel-work"
    assert _verdicts(_why(ws, "top", "--enable-custom-op")[1]) == {"--enable-custom-op": "unknown"}
    _, data = _why(ws, "top", "--log-requests")  # declared, read nowhere
    [log] = data["features"]
    assert (log["verdict"], log["links"]) == ("unknown", []), log


def test_a_crash_is_admitted_above_and_refused_below(server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    code, data = _why(ws, "top", "--enable-quick-reduce")
    assert code == 1
    [chain] = data["features"]
    assert chain["verdict"] == "crash"
    assert [link["role"] for link in chain["links"]] == ["read", "call", "below"]
    below = chain["links"][-1]
    assert (below["upstream"], below["commit"], below["file"], below["line"], below["function"],
            below["refuses"]) == ("lower", "v1.0", "lowerlib/jit.py", 5, "gen_comm_module", True)
    assert (below["admits"], below["class"]) == ("majors 9, 10", "gate-only")
    # the wording, once: where the chain was decided, in a few words
    assert chain["where"] == "refused by lower v1.0 lowerlib/jit.py:5 gen_comm_module"


def test_a_refusal_below_that_needs_a_parameter_passed_is_no_crash(
        server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    _, data = _why(ws, "top", "--enable-scaled-quant")
    [chain] = data["features"]
    assert chain["verdict"] == "on"
    [quant] = [link for link in chain["links"] if link["function"] == "quant"]
    assert not quant["excludes_target"] and not quant["refuses"]
    assert (quant["role"], quant["file"], quant["line"]) == ("below", "lowerlib/quant.py", 6)
    # the wording, once: the parameter whose passing it refuses (no typed field holds it)
    assert quant["why"].startswith("refuses only when the caller passes scale")


def _caller_passes(name: str, code: str, major: int) -> Callable[[int], str | None]:
    """What a refusal at a line of ``lib/NAME.py`` (function ``name``, admitting
    ``major``) needs its caller to pass (:func:`passed_by_caller`)."""
    tree = DictTree({"lib/__init__.py": "", f"lib/{name}.py": code})
    lower = Lower("lib", "v1", "c" * 40, TreeAudit("c" * 40, "", []), tree)  # type: ignore[arg-type]

    def given(line: int) -> str | None:
        gate = AuditGate(f"lib/{name}.py", line, name, CAPABILITY, frozenset({major}), True)
        return passed_by_caller(lower.ev, gate)
    return given


def test_a_refusal_needing_a_parameter_the_function_never_sets_is_the_callers() -> None:
    code = (
        "def decode(q, backend='auto', scale=None, sparse=False):\n"
        "    if backend == 'auto':\n"
        "        backend = 'gen' if major() == 10 else 'xqa'\n"
        "    if backend != 'gen' and scale is not None:\n"
        "        raise ValueError('scale needs gen')\n"
        "    if sparse:\n"
        "        if backend != 'gen':\n"
        "            raise ValueError('sparse needs gen')\n"
        "    if backend != 'gen':\n"
        "        raise ValueError('gen only')\n")
    given = _caller_passes("decode", code, 10)
    assert given(4) == "scale"  # beside the test on the GPU's backend
    assert given(7) == "sparse"  # in the test around it
    assert given(9) is None  # the GPU's backend alone: the target is turned away


def test_a_name_bound_from_parameters_alone_is_what_the_caller_passes() -> None:
    """flashinfer's ``trtllm_fmha_v2_prefill`` (b43f37ae1): ``uses_chunked`` and
    ``is_e4m3`` come from what the caller passes (``query`` unpacked from ``qkv`` in
    each branch), so ``if uses_chunked and is_sm12x(query.device): raise`` refuses a
    mode of the call, not the GPU; a name bound from the device is the GPU's."""
    code = (
        "def prefill(qkv, layout, chunk=None):\n"
        "    if layout == 'packed':\n"
        "        query = qkv\n"
        "    else:\n"
        "        query, kv = qkv[0], qkv[1]\n"
        "    uses_chunked = chunk is not None and chunk > 0\n"
        "    if uses_chunked and is_sm12x(query.device):\n"
        "        raise ValueError('chunked: not on SM12x')\n"
        "    is_e4m3 = query.dtype == torch.float8_e4m3fn\n"
        "    if is_e4m3:\n"
        "        if is_sm12x(query.device):\n"
        "            raise ValueError('e4m3: not on SM12x')\n"
        "    sm12 = is_sm12x(query.device)\n"
        "    if sm12:\n"
        "        raise ValueError('not on SM12x')\n"
        "    for step in range(2):\n"
        "        last = step\n"
        "    if last and is_sm12x(query.device):\n"
        "        raise ValueError('loop')\n")
    given = _caller_passes("prefill", code, 12)
    assert given(7) == "chunk"
    assert given(11) == "qkv"  # under `if is_e4m3:`, the input's dtype
    assert given(14) is None  # bound from the GPU's answer
    assert given(18) is None  # bound by a loop: not the caller's


def test_a_pin_bump_turns_the_crash_on_and_the_gate_only_chain_shorter(
        server: tuple[Workspace, Repo]) -> None:
    ws, top = server
    _, data = _why(ws, "top", "--enable-fusion")
    [fusion] = data["features"]
    assert fusion["verdict"] == "gate-only"
    opened = [(link["upstream"], link["function"]) for link in fusion["links"]
              if link["excludes_target"]]
    assert opened == [("top", "allreduce"), ("lower", "gen_comm_module")]
    human = ws.run("why", "top", "--enable-fusion", "--arch", "sm_120a", "--no-fetch").out
    lower_cmd = ("contrib enable lower lowerlib/jit.py:gen_comm_module --only --arch sm_120a "
                 "--at v1.0 --name enable-fusion")
    assert lower_cmd in human
    assert human.index(lower_cmd) < human.index("contrib enable top --feature=--enable-fusion")
    repin(top, "lower_lib==2.0")  # the release below that builds comm for SM12x
    _, data = _why(ws, "top", "--enable-quick-reduce")
    assert data["stack"][0]["tag"] == "v2.0"
    assert _verdicts(data) == {"--enable-quick-reduce": "on"}
    _, data = _why(ws, "top", "--enable-fusion")
    [fusion] = data["features"]
    assert fusion["verdict"] == "gate-only"
    assert [link["upstream"] for link in fusion["links"] if link["excludes_target"]] == ["top"]


def test_a_family_side_by_side(server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    result = ws.run("why", "top", "--enable-fusion", "--arch", "sm_100a,sm_120a", "--no-fetch")
    assert result.code == 1
    assert "--enable-fusion on sm_100a: on" in result.out
    assert "--enable-fusion on sm_120a: off, gate-only" in result.out
    table = result.out.splitlines()[-2:]
    assert table[0].split() == ["feature", "sm_100a", "sm_120a"]
    assert table[1].split() == ["--enable-fusion", "on", "off,", "gate-only"]
    data = ws.run("why", "top", "--enable-fusion", "--arch", "sm_100a,sm_120a", "--json",
                  "--no-fetch").json
    assert isinstance(data, dict)
    assert [(d["arch"], d["features"][0]["verdict"]) for d in data["archs"]] == [
        ("sm_100a", "on"), ("sm_120a", "gate-only")]


def test_the_audit_puts_a_family_side_by_side(server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    result = ws.run("audit", "top", "--arch", "sm_100a,sm_120a")
    assert result.code == 1, result.err
    lines = result.out.splitlines()
    assert all(line.startswith("top at main tip") for line in lines[:2])  # each arch's summary
    assert "turn sm_100a away" in lines[0] and "turn sm_120a away" in lines[1]
    header = next(n for n, line in enumerate(lines) if line.split()[:1] == ["feature"])
    assert lines[header].split() == ["feature", "sm_100a", "sm_120a"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[header + 1:]
            if line.startswith("--")}
    assert rows["--enable-fusion"] == ["on", "gate-only"]
    # the features that differ come first, and are named at the end
    assert lines[header + 1].split()[1:] != lines[header + 1].split()[1:2] * 2
    assert "differ between sm_100a and sm_120a: " in lines[-1]
    assert "--enable-fusion" in lines[-1].split("differ between")[1]
    data = ws.run("audit", "top", "--arch", "sm_100a,sm_120a", "--json", "--no-fetch").json
    assert isinstance(data, dict)
    assert [d["arch"] for d in data["archs"]] == ["sm_100a", "sm_120a"]
    verdicts = [{f["feature"]: f["verdict"] for f in d["upstreams"][0]["features"]}
                for d in data["archs"]]
    assert [v["--enable-fusion"] for v in verdicts] == ["on", "gate-only"]
    # with --gates, each arch's gate rows in turn; one arch given twice is audited once
    gates = ws.run("audit", "top", "--arch", "sm_100a,sm_120a", "--gates", "--no-fetch").out
    assert gates.count("top at main tip") == 2
    once = ws.run("audit", "top", "--arch", "sm120,sm_120a", "--json", "--no-fetch").json
    assert isinstance(once, dict) and once["arch"] == "sm_120a"


IMAGEGEN_ARGS = """\
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    attention_backend: str = "plain"
"""

IMAGEGEN_RUN = """\
from top.utils import is_sm100_supported


def run(args):
    if args.attention_backend == "plain" and not is_sm100_supported():
        raise ValueError("imagegen's plain attention needs SM100")
    return args
"""


def test_a_setting_another_program_declares_too_is_read_only_in_the_servers_code(
        server: tuple[Workspace, Repo], monkeypatch: pytest.MonkeyPatch) -> None:
    # sglang's multimodal_gen/ has a ServerArgs of its own with an attention_backend:
    # its reads are not the server's --attention-backend, nor do they count toward the
    # files that make a name too common to follow (here one file: the server's own)
    monkeypatch.setattr("contrib.audit.stack.walk._MAX_READERS", 1)
    ws, top = server
    top.commit("imagegen: a second program", {
        "python/top/imagegen/__init__.py": "",
        "python/top/imagegen/server_args.py": IMAGEGEN_ARGS,
        "python/top/imagegen/runner.py": IMAGEGEN_RUN})
    code, data = _why(ws, "top", "--attention-backend=plain")
    assert code == 0, data
    assert _verdicts(data) == {"--attention-backend=plain": "on"}
    reads = [link["file"] for f in data["features"] for link in f["links"]]
    assert reads and not [r for r in reads if "imagegen" in r]
    assert settings_elsewhere(DictTree({
        "python/top/__init__.py": "", "python/top/server_args.py": SERVER_ARGS,
        "python/top/imagegen/__init__.py": "",
        "python/top/imagegen/server_args.py": IMAGEGEN_ARGS}), SETTINGS_CLASS) == {
            "attention_backend": ("python/top/imagegen/",)}


def test_a_library_answers_by_its_public_api(server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    code, data = _why(ws, "lower", "lowerlib.fused_allreduce", "--at", "v1.0")
    assert code == 1
    [chain] = data["features"]
    assert chain["verdict"] == "gate-only"  # its own refusal is its answer, not a crash
    human = ws.run("why", "lower", "lowerlib.fused_allreduce", "--at", "v2.0", "--arch",
                   "sm_120a", "--no-fetch")
    assert human.code == 0 and "lowerlib.fused_allreduce on sm_120a: on" in human.out


def test_an_unknown_feature_is_one_line_naming_the_close_ones(
        server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    result = ws.run("why", "top", "--enable-fusio", "--arch", "sm_120a")
    assert result.code == 2
    [line] = result.err.strip().splitlines()
    assert line.startswith("contrib: error: top at main tip declares no feature '--enable-fusio'; "
                           "did you mean '--enable-fusion'")


def test_the_audit_leads_with_features_and_keeps_every_gate_in_json(
        server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    result = ws.run("audit", "top", "--arch", "sm_120a")
    assert result.code == 1
    lines = result.out.splitlines()
    rows = [line.split()[0] for line in lines if line.split()[1:2] and line.split()[1].startswith("--")
            or line.startswith(("crash", "off", "unknown", "on "))]
    assert rows[0] == "crash"  # the worst first
    assert lines[-1].startswith("top at main tip")  # the summary again at the end
    assert "--log-requests" not in result.out  # not followed: no row
    gates = ws.run("audit", "top", "--arch", "sm_120a", "--gates", "--no-fetch").out
    assert "python/top/layers.py:allreduce" in gates and "--enable-fusion" not in gates
    only = ws.run("audit", "top", "--arch", "sm_120a", "--gates", "--class", "unknown",
                  "--no-fetch").out
    assert "python/top/layers.py:custom" in only and "layers.py:allreduce" not in only
    data = ws.run("audit", "top", "--arch", "sm_120a", "--json", "--no-fetch").json
    assert isinstance(data, dict)
    [audit] = data["upstreams"]
    assert len(audit["gates"]) == 3 and len(audit["features"]) == 7
    crash = ws.run("audit", "top", "--arch", "sm_120a", "--verdict", "on", "--no-fetch").out
    assert "--attention-backend=plain" in crash and "--enable-quick-reduce" not in crash


# -- declared features, read from the code ------------------------------------------------

SETTINGS = '''\
from typing import Literal, Optional
from .arg_utils import A, Arg, NS

BACKENDS = ["triton", "trtllm_mla"]
MORE = BACKENDS + ["fa4"]


@dataclass
class ServerArgs:
    attention_backend: A[Optional[str], Arg(help="x", choices=MORE), NS("k")] = None
    fusion_backend: A[Optional[Literal["auto", "trtllm"]], Arg(help="y"), NS("c")] = None
    enable_fusion: A[bool, Arg(no_cli=True), NS("c")] = False
    disable_cuda_graph: bool = False
    port: int = 30000
    _private: bool = False
'''


def test_a_servers_settings_are_its_features() -> None:
    tree = DictTree({"python/srv/__init__.py": "", "python/srv/server_args.py": SETTINGS,
                     "python/srv/router/server_args.py": "class ServerArgs:\n    x: bool = False\n"})
    names = [f.name for f in declared(tree, SETTINGS_CLASS)]
    assert names == ["--attention-backend=triton", "--attention-backend=trtllm_mla",
                     "--attention-backend=fa4", "--fusion-backend=auto",
                     "--fusion-backend=trtllm", "--enable-fusion", "--disable-cuda-graph"]
    feature = declared(tree, SETTINGS_CLASS)[0]
    assert (feature.kind, feature.attr, feature.value, feature.file, feature.line) == (
        FeatureKind.FLAG, "attention_backend", "triton", "python/srv/server_args.py", 10)


def test_a_settings_class_of_another_name_is_read_where_its_upstream_names_it(
        server: tuple[Workspace, Repo]) -> None:
    ws, top = server
    top.commit("settings renamed", {"python/top/server_args.py": SERVER_ARGS.replace(
        "ServerArgs", "ServeConfig")})
    unset = ws.run("why", "top", "--enable-quick-reduce", "--arch", "sm_120a", "--json")
    assert unset.code == 2 and "--enable-quick-reduce" in unset.err  # no ServerArgs: no flags
    config = ws.root / "contrib.toml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "[upstreams.top]\n", '[upstreams.top]\nsettings_class = "ServeConfig"\n'), encoding="utf-8")
    code, data = _why(ws, "top", "--enable-quick-reduce")
    assert code == 1 and _verdicts(data) == {"--enable-quick-reduce": "crash"}
    tree = DictTree({"python/srv/__init__.py": "", "python/srv/server_args.py": SETTINGS,
                     "python/srv/config.py": "class ServeConfig:\n    verbose: bool = False\n"})
    assert [f.name for f in declared(tree, "ServeConfig")] == ["--verbose"]
    assert declared(tree, SETTINGS_CLASS) == declared(DictTree({
        "python/srv/__init__.py": "", "python/srv/server_args.py": SETTINGS}), "ServerArgs")


def test_a_librarys_public_api_is_its_features_with_its_backends() -> None:
    tree = DictTree({
        "lib/__init__.py": "from .gemm import mm as mm\nfrom .gemm import _hidden\n",
        "lib/gemm/__init__.py": "from .base import mm\n",
        "lib/gemm/base.py": ('from typing import Literal\n\n\n'
                             'def mm(a, backend: Literal["cudnn", "cutlass"] = "cudnn"):\n'
                             '    return a\n'),
    })
    assert [f.name for f in declared(tree, SETTINGS_CLASS)] == [
        "lib.mm", "lib.mm:backend=cudnn", "lib.mm:backend=cutlass"]  # once, by its shortest name
    assert declared(tree, SETTINGS_CLASS)[1].keys == (("backend", "cudnn"),)


def test_find_takes_a_flag_with_or_without_dashes_and_a_setting_for_each_choice() -> None:
    features = [Feature(FeatureKind.FLAG, "--x=a", "x", "a"), Feature(FeatureKind.FLAG, "--x=b", "x", "b"),
                Feature(FeatureKind.FLAG, "--enable-y", "enable_y")]
    assert [f.name for f in find(features, "enable-y")] == ["--enable-y"]
    assert [f.name for f in find(features, "--x")] == ["--x=a", "--x=b"]
    assert [f.name for f in find(features, "--x=b")] == ["--x=b"]
    assert find(features, "--z") == []


# -- the verdict, from the links' decisions ------------------------------------------------

def _link(role: Role, *, excludes: bool = False, refuses: bool = False,
          klass: Any = None, upstream: str = "up") -> Link:
    return Link(role, upstream, "abc", "f.py", 3, "fn", "majors 9, 10", excludes, refuses,
                klass, "because")


@pytest.mark.parametrize(("links", "verdict"), [
    ([], Verdict.UNKNOWN),
    ([_link(Role.READ)], Verdict.ON),
    ([_link(Role.READ), _link(Role.BELOW)], Verdict.ON),
    ([_link(Role.GATE, excludes=True, klass=GATE_ONLY)], Verdict.GATE_ONLY),
    ([_link(Role.GATE, excludes=True, klass=GATE_ONLY),
      _link(Role.BEHIND, excludes=True, klass=NEEDS_KERNEL_WORK)], Verdict.NEEDS_KERNEL_WORK),
    ([_link(Role.GATE, excludes=True, klass=UNKNOWN)], Verdict.UNKNOWN),
    ([_link(Role.GATE, excludes=True, klass=GATE_ONLY),
      _link(Role.BELOW, excludes=True, refuses=True, klass=GATE_ONLY)], Verdict.CRASH),
    # a refusal behind a gate that turned the target away is met only once it opens
    ([_link(Role.BEHIND, excludes=True, refuses=True, klass=GATE_ONLY)], Verdict.GATE_ONLY),
    # a gate below that admits the target into code compiled out for it
    ([_link(Role.BELOW, klass=NEEDS_KERNEL_WORK)], Verdict.NEEDS_KERNEL_WORK),
])
def test_the_verdict_is_read_from_the_links(links: list[Link], verdict: Verdict) -> None:
    feature = Feature(FeatureKind.FLAG, "--f", "f")
    chain = decide(feature, tuple(links))
    assert chain.verdict == verdict and chain.links == tuple(links) and chain.feature == feature


def test_choices_with_one_verdict_and_reason_share_a_row() -> None:
    chains = []
    for value in ("a", "b"):
        chains.append(decide(Feature(FeatureKind.FLAG, f"--x={value}", "x", value),
                             (_link(Role.GATE, excludes=True, klass=UNKNOWN),)))
    assert feature_rows(chains, "sm_120a", {}) == [
        ["unknown", "--x=a|b", "class not decided at up f.py:3 fn"]]


def test_chain_round_trip_and_a_damaged_one_is_refused() -> None:
    link = _link(Role.BEHIND, excludes=True, klass=GATE_ONLY)
    link = Link(**{**link.__dict__, "evidence": (
        Evidence("csrc/a.cu:3", "csrc/a.cu", "empty-kernel", "gone", upstream="fi", line=3),)})
    feature = Feature(FeatureKind.FLAG, "--f", "f")
    chain = decide(feature, (link,))
    kept = chain_cache(chain)
    assert chain_from_cache(feature, kept) == chain
    assert chain_from_cache(feature, {**kept, "links": [{**kept["links"][0], "line": "3"}]}) is None
    assert chain_from_cache(feature, {**kept, "verdict": "maybe"}) is None
    assert chain_from_cache(feature, {**kept, "verdict": ["on"]}) is None
    assert chain_from_cache(feature, {**kept, "links": [{**kept["links"][0], "role": ["x"]}]}) is None
    assert chain_from_cache(Feature(FeatureKind.FLAG, "--g", "g"), kept) is None


def test_the_gate_only_commands_draft_both_halves_tied_by_requires(
        server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    human = ws.run("why", "top", "--enable-fusion", "--arch", "sm_120a", "--no-fetch").out
    commands = [line.strip().split()[1:] for line in human.splitlines()
                if line.strip().startswith("contrib enable ")]
    assert [c[1] for c in commands] == ["lower", "top"]
    assert commands[0][-2:] == ["--name", "enable-fusion"]
    assert commands[1][-4:] == ["--name", "enable-fusion", "--requires", "lower/enable-fusion"]
    upper = ws.run(*commands[1], "--json")  # the upper half first: below is not carried yet
    assert upper.code == 1, upper.err
    assert upper.json["drafted"][0]["verdict"] == "failed"
    record = ws.run("validate", "top/enable-fusion", "--arch", "sm_120a", "--json")
    [requires] = [s for s in record.json["validations"][0]["run"]["stages"]
                  if s["name"] == "requires"]
    assert requires["status"] == "failed", requires
    [needed] = requires["details"]["requirements"]
    assert (needed["status"], needed["pin"], needed["tag"]) == ("failed", "lower-lib==1.0", "v1.0")
    assert "patchset" not in needed  # no patchset of the workspace carries it yet
    # the wording, once: what to run (no typed field holds the command)
    assert requires["reason"] == ("lower-lib==1.0 (v1.0) lacks patchset lower/enable-fusion: "
                                  "draft it there (contrib enable lower --at v1.0 --name "
                                  "enable-fusion)")
    meta = (ws.root / "patchsets/top/enable-fusion/patchset.toml").read_text()
    assert meta.count("[[requires]]") == 1
    for key in ('upstream = "lower"', 'patchset = "lower/enable-fusion"',
                'pin_file = "python/pyproject.toml"', 'tag_format = "v{version}"'):
        assert key in meta, meta
    lower = ws.run(*commands[0], "--json")
    assert lower.code in (0, 1), lower.err
    assert lower.json["drafted"][0]["patchset"] == "lower/enable-fusion"
    again = ws.run("validate", "top/enable-fusion", "--arch", "sm_120a", "--json")
    [requires] = [s for s in again.json["validations"][0]["run"]["stages"]
                  if s["name"] == "requires"]
    assert requires["status"] == "passed", requires
    [needed] = requires["details"]["requirements"]
    assert (needed["status"], needed["patchset"]) == ("satisfied", "lower/enable-fusion"), needed


def test_requires_names_a_patchset_below_that_the_tree_pins(server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    for args, said in [(["--requires", "top/x"], "a patchset of top itself"),
                       (["--requires", "lower"], "give the patchset below as UPSTREAM/NAME"),
                       (["--requires", "nowhere/x"], "nowhere")]:
        result = ws.run("enable", "top", "python/top/layers.py:allreduce", "--arch", "sm_120a",
                        *args)
        assert result.code == 2 and said in result.err, result.err
        assert len(result.err.strip().splitlines()) == 1
    below = ws.run("enable", "lower", "lowerlib/jit.py:gen_comm_module", "--arch", "sm_120a",
                   "--requires", "top/x")  # lower pins no version of top
    assert below.code == 2 and "pins no version of top" in below.err, below.err


def test_the_markdown_report_leads_with_the_features_worst_first(
        server: tuple[Workspace, Repo]) -> None:
    ws, _ = server
    md = ws.run("audit", "top", "--arch", "sm_120a", "--no-fetch", "--markdown").out
    assert md.index("## Features on `sm_120a`") < md.index("## Architecture gates")
    rows = [line for line in md.splitlines() if line.startswith("| ") and "`--" in line]
    verdicts = [row.split(" | ")[0].lstrip("| ") for row in rows]
    assert verdicts[0] == "crash"
    order = ["crash", "off, needs kernel work", "unknown", "off, gate-only", "on"]
    assert [order.index(v) for v in verdicts] == sorted(order.index(v) for v in verdicts)
    fusion = next(row for row in rows if "`--enable-fusion`" in row)
    assert "`contrib enable lower lowerlib/jit.py:gen_comm_module" in fusion
    assert "enable-fusion`; `contrib enable top " in fusion  # each command its own code span
    assert "\n\n## Architecture gates" in md
    only_gates = ws.run("audit", "top", "--arch", "sm_120a", "--no-fetch", "--markdown",
                        "--gates").out
    assert "## Features" not in only_gates and "## Architecture gates" in only_gates


def test_a_flag_read_beside_a_rocm_switch_does_nothing_on_nvidia(
        server: tuple[Workspace, Repo]) -> None:
    """sglang's `apply_aiter_all_reduce_fusion`: `_use_aiter and ... and
    args.enable_aiter_allreduce_fusion` is false on every NVIDIA GPU (`is_hip()`), so the
    fusion it guards below is no way of this flag there, and no crash."""
    ws, top = server
    layers = (top.path / "python/top/layers.py").read_text()
    top.commit("quick reduce on ROCm only", {
        "python/top/layers.py": layers.replace(
            "def quick_reduce(x):\n    if get_server_args().enable_quick_reduce:",
            "_use_rocm = torch.version.hip is not None\n\n\n"
            "def quick_reduce(x):\n    if _use_rocm and get_server_args().enable_quick_reduce:")})
    _, data = _why(ws, "top", "--enable-quick-reduce")
    [chain] = data["features"]
    assert chain["verdict"] != "crash", chain
    assert not [link for link in chain["links"] if link["role"] == "below"]


REGISTRY = '''\
ATTENTION_BACKENDS = {}


def register_attention_backend(name):
    def decorator(fn):
        ATTENTION_BACKENDS[name] = fn
        return fn
    return decorator


@register_attention_backend("ragged_mla")
def create_ragged_mla_backend(runner):
    from top.ragged import RaggedBackend
    return RaggedBackend(runner)


@register_attention_backend("paged_mla")
def create_paged_mla_backend(runner):
    from top.ragged import PagedBackend
    return PagedBackend(runner)
'''
RAGGED = '''\
import lowerlib.prefill as prefill


class RaggedBackend:
    def __init__(self, runner):
        self.runner = runner

    def forward_extend(self, q):
        return prefill.ragged_attention(q)


class PagedBackend:
    def forward_extend(self, q):
        return prefill.paged_attention(q)
'''
RUNNER_PY = '''\
from top.registry import ATTENTION_BACKENDS
from top.server_args import get_server_args


def attention_backend():
    backend_str = get_server_args().attention_backend
    return ATTENTION_BACKENDS[backend_str](None)


def adjust(args):
    if args.enable_fast_prefill:
        args.attention_backend = "ragged_mla"
'''
LOWER_PREFILL = '''\
from lowerlib.fmha_jit import gen_fmha_runner_module
from lowerlib.jit import gen_norm_module


def get_fmha_module():
    mod = gen_fmha_runner_module()
    setup_cubin_loader(mod.path)
    return mod


def ragged_attention(q):
    return get_fmha_module().run(q)


def paged_attention(q, backend="auto"):
    if backend == "trtllm-gen":
        return get_fmha_module().run(q)
    return gen_norm_module().run(q)
'''
LOWER_FMHA_JIT = '''\
from lowerlib.core import build


def gen_fmha_runner_module():
    return build("fmha_runner", ["fmha_runner.cu"], ["-DX"])
'''
FMHA_RUNNER = ('#include "common.h"\nstruct Runner {\n  Runner() : mSM(getSMVersion()) {\n'
               '    FLASHINFER_CHECK(mSM == kSM_100 || mSM == kSM_103, "Unsupported architecture");\n'
               '  }\n  int mSM;\n};\n')


def _registered(tmp_path: Path, flag: str, runner: str) -> Workspace:
    """The mini server with the registry of backends above, a boolean ``flag`` and
    ``runner`` (:data:`RUNNER_PY` or one like it), over ``lower`` at v1.0 with the
    ragged prefill whose launcher refuses SM 12.x in C++."""
    top = feature_upstream(tmp_path / "top")
    args = SERVER_ARGS.replace('["plain", "decode"]', '["plain", "decode", "ragged_mla", "paged_mla"]'
                               ).replace("    log_requests: bool = False\n",
                                         f"    log_requests: bool = False\n    {flag}: bool = False\n")
    top.commit("a registered backend", {"python/top/server_args.py": args,
                                         "python/top/registry.py": REGISTRY,
                                         "python/top/ragged.py": RAGGED,
                                         "python/top/runner.py": runner})
    lower = feature_lower(tmp_path / "lower")
    git(tmp_path / "lower", "checkout", "-q", "v1.0")
    lower.commit("ragged prefill", {"lowerlib/prefill.py": LOWER_PREFILL,
                                    "lowerlib/fmha_jit.py": LOWER_FMHA_JIT,
                                    "csrc/fmha_runner.cu": FMHA_RUNNER,
                                    "csrc/common.h": "constexpr int32_t kSM_100 = 100;\n"
                                                     "constexpr int32_t kSM_103 = 103;\n"})
    git(tmp_path / "lower", "tag", "-f", "v1.0")
    return _workspace(tmp_path, top, lower)


def test_a_choice_runs_what_is_registered_under_it_down_to_a_host_refusal(tmp_path: Path) -> None:
    """sgl-project/sglang#24633: ``--attention-backend=trtllm_mla`` runs what
    ``@register_attention_backend("trtllm_mla")`` registers (``ATTENTION_BACKENDS[
    backend_str](self)``), whose prefill calls flashinfer's ragged attention: no Python
    gate there, but the launcher built for the prebuilt cubins refuses SM120 in C++.
    Admitted above, refused below: a crash, named at the C++ check, where every way the
    call can take is refused so."""
    ws = _registered(tmp_path, "enable_fast_prefill", RUNNER_PY)
    code, data = _why(ws, "top", "--attention-backend=ragged_mla")
    assert code == 1
    [chain] = data["features"]
    assert chain["verdict"] == "crash", chain
    first = chain["links"][0]
    assert (first["role"], first["function"]) == ("read", "create_ragged_mla_backend")
    # the wording, once: how a read link was reached (no typed field holds the way)
    assert first["why"] == 'registered as "ragged_mla" > create_ragged_mla_backend'
    below = chain["links"][-1]
    assert (below["role"], below["file"], below["line"], below["function"], below["refuses"]) == (
        "below", "csrc/fmha_runner.cu", 4, "lowerlib.prefill.ragged_attention", True)
    assert (below["upstream"], below["commit"]) == ("lower", "v1.0")  # where it was refused
    # the launcher of the cubins refuses in C++: a host refusal at its line
    assert below["class"] == "needs-kernel-work", below
    [refusal] = below["evidence"]
    assert refusal.startswith("csrc/fmha_runner.cu:4 host-refusal: "), refusal
    # a call with another way, built for the target (its default backend), is no crash
    _, data = _why(ws, "top", "--attention-backend=paged_mla")
    assert data["features"][0]["verdict"] == "on", data["features"][0]
    # a flag whose code hands the backend's name on (as sglang picks one when none is
    # given): the way past the name is not surely the flag's, and no crash is claimed
    _, data = _why(ws, "top", "--enable-fast-prefill")
    [fast] = data["features"]
    # the name handed on leads to what is registered under "ragged_mla"
    assert [(link["role"], link["function"]) for link in fast["links"]] == [
        ("read", "adjust"), ("call", "lowerlib.prefill.ragged_attention")], fast
    assert fast["verdict"] != "crash", fast


def test_a_name_handed_on_by_the_gpu_is_the_one_the_target_gets(tmp_path: Path) -> None:
    """sglang's ``declared["dsa_decode_backend"] = "trtllm" if major >= 10 else "fa3"``
    (ec6a3163b): SM 12.0 gets the first name, so what is registered under the other
    (FA3's backend, refusing it) is not on its way; on SM 9.0 it is."""
    runner = RUNNER_PY.replace("from top.server_args import get_server_args\n",
                               "from top.server_args import get_server_args\n"
                               "from top.utils import get_device_capability\n") + (
        "\n\ndef adjust_auto(args):\n    major, _ = get_device_capability()\n"
        "    if args.enable_auto_prefill:\n"
        '        args.attention_backend = "paged_mla" if major >= 10 else "ragged_mla"\n')
    ws = _registered(tmp_path, "enable_auto_prefill", runner)
    calls = {}
    for arch in ("sm_120a", "sm_90a"):
        result = ws.run("why", "top", "--enable-auto-prefill", "--arch", arch, "--json",
                        "--no-fetch")
        assert result.code in (0, 1), result.err
        [chain] = result.json["features"]  # type: ignore[index]
        calls[arch] = [link["function"] for link in chain["links"] if link["role"] == "call"]
    assert calls == {"sm_120a": ["lowerlib.prefill.paged_attention"],
                     "sm_90a": ["lowerlib.prefill.ragged_attention"]}, calls
