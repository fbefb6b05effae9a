"""A verdict follows the target's own path: what the GPU runs when the user asks for the
feature, not every path the code has (issue: no false "off")."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contrib.analysis.pymodules import scope_of_body
from contrib.arch import parse_arch
from contrib.audit.chains import Feature, FeatureKind, Fix, Link, Role, Verdict
from contrib.audit.feature.chain import asks_for_path, decide, to_open
from contrib.audit.feature.questions import named_value_of, single_bindings
from contrib.audit.finding.gates import gates_of_file
from contrib.audit.model import GATE_ONLY, NEEDS_KERNEL_WORK, EffectKind
from contrib.audit.stack.fixed import first_admitting
from contrib.audit.stack.reading import may_hold
from contrib.git.repo import Git
from testing.featureupstreams import SERVER_ARGS, feature_lower, feature_upstream
from testing.gitutil import Repo, git
from testing.stackupstreams import LOWER, LOWER_JIT
from testing.workspace import Workspace


def _workspace(tmp_path: Path, **repos: Repo) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, dict(repos))
    ws.write_config()
    return ws


def _library(tmp_path: Path, module: str, text: str, api: str) -> Workspace:
    """A workspace naming the mini library ``lower`` with ``lowerlib/MODULE.py`` holding
    ``text``, its ``api`` exported."""
    lower = Repo(tmp_path / "lower")
    lower.commit("lower", {**LOWER, "lowerlib/jit.py": LOWER_JIT.format(comm="[9, 10]"),
                           f"lowerlib/{module}.py": text,
                           "lowerlib/__init__.py": LOWER["lowerlib/__init__.py"]
                           + f"from .{module} import {api}\n"})
    return _workspace(tmp_path, lower=lower)


def _with_setting(field: str, flag: str, choices: list[str], base: str = SERVER_ARGS) -> str:
    """The mini server's settings (``base``: these, or another call's) with one more
    field (``name: type = default``) and its flag's choices."""
    return base.replace(
        "    port: int = 30000\n", f"    port: int = 30000\n    {field}\n"
    ).replace('        parser.add_argument("--attention-backend"', (
        f'        parser.add_argument("{flag}", choices={choices!r})\n'
        '        parser.add_argument("--attention-backend"'))


def _chains(tmp_path: Path, flag: str, module: tuple[str, str],
            *settings: tuple[str, str, list[str]]) -> dict[str, Any]:
    """``why top FLAG``'s chains by feature, on the mini server with ``module`` (path,
    text) and more ``settings`` (as :func:`_with_setting` takes them)."""
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    server_args = SERVER_ARGS
    for field, name, choices in settings:
        server_args = _with_setting(field, name, choices, server_args)
    top.commit("more settings", {module[0]: module[1], "python/top/server_args.py": server_args})
    ws = _workspace(tmp_path, top=top, lower=lower)
    return {c["feature"]: c for c in _why(ws, "top", flag)["features"]}


def _why(ws: Workspace, *args: str, arch: str = "sm_120a") -> dict[str, Any]:
    result = ws.run("why", *args, "--arch", arch, "--json", "--no-fetch")
    assert result.code in (0, 1), result.err
    data = result.json
    assert isinstance(data, dict)
    return data


# -- a path the target does not take is no refusal of a computation ----------------------

def _choice(klass: Any = GATE_ONLY, refuses: bool = False) -> Link:
    return Link(Role.GATE, "up", "abc", "f.py", 7, "Backend.__init__", "majors 10", True,
                refuses, klass, "falls back: the generic path serves the target")


@pytest.mark.parametrize(("feature", "verdict"), [
    # a named backend, an API: the target still gets the computation, by another path
    (Feature(FeatureKind.FLAG, "--attention-backend=fi", "attention_backend", "fi"), Verdict.ON),
    (Feature(FeatureKind.API, "lib.prefill", "lib.prefill"), Verdict.ON),
    # a boolean flag asks for the path itself: kept off it, the flag does nothing
    (Feature(FeatureKind.FLAG, "--enable-fusion", "enable_fusion"), Verdict.GATE_ONLY),
])
def test_a_path_the_target_is_kept_off_is_a_refusal_only_of_a_flag_asking_for_it(
        feature: Feature, verdict: Verdict) -> None:
    call = Link(Role.CALL, "lower", "v1", "", 0, "lower.attend")  # the way goes on below
    chain = decide(feature, (_choice(), call))
    assert chain.verdict == verdict
    assert asks_for_path(feature) == (verdict != Verdict.ON)
    if verdict == Verdict.ON:
        assert chain.where == "on, by another path at up f.py:7 Backend.__init__"
        assert "(the paths it misses: 1 gate, 1 gate-only)" in chain.reason


def test_a_gate_only_chain_opens_what_its_verdict_names_not_a_path_it_is_kept_off() -> None:
    """sglang 00e57d74f ``--quantization=mxfp8``: the verdict opens the refusal in
    ``_process_mxfp8_moe_weights``; a fallback beside it (an SM90 path the target is
    kept off, needs-kernel-work) is no part of the feature's fix, so `enable` does not
    draft it (and refuse for it), as `why` does not name it.  A flag asking for the path
    opens both."""
    refusal = Link(Role.GATE, "up", "abc", "q.py", 9, "Method._process_mx", "majors 10", True,
                   True, GATE_ONLY, "refuses")
    fallback = replace(_choice(NEEDS_KERNEL_WORK), file="q.py", line=20,
                       function="Method.process_block")
    call = Link(Role.CALL, "lower", "v1", "", 0, "lower.attend")
    value = Feature(FeatureKind.FLAG, "--quantization=mx", "quantization", "mx")
    chain = decide(value, (refusal, fallback, call))
    assert chain.verdict == Verdict.GATE_ONLY, chain.reason
    assert chain.reason == "open up q.py:_process_mx"
    assert to_open(chain) == {"up": ["q.py:_process_mx"]}
    flag = decide(Feature(FeatureKind.FLAG, "--enable-mx", "enable_mx"), (
        refusal, replace(fallback, class_=GATE_ONLY), call))
    assert to_open(flag) == {"up": ["q.py:_process_mx", "q.py:process_block"]}


def test_a_named_backend_kept_off_a_path_with_nothing_run_on_its_own_is_off() -> None:
    feature = Feature(FeatureKind.FLAG, "--attention-backend=fi", "attention_backend", "fi")
    assert decide(feature, (_choice(),)).verdict == Verdict.GATE_ONLY


def test_a_refusal_on_the_way_still_decides_a_named_backend() -> None:
    feature = Feature(FeatureKind.FLAG, "--attention-backend=fi", "attention_backend", "fi")
    refusal = _choice(NEEDS_KERNEL_WORK, refuses=True)
    assert decide(feature, (_choice(), refusal)).verdict == Verdict.NEEDS_KERNEL_WORK


def test_an_if_that_only_sets_again_a_value_set_before_it_falls_back() -> None:
    text = ("from u import is_sm100_supported, make\n\n\n"
            "def init(graphs):\n"
            "    backend = 'auto'\n"
            "    if is_sm100_supported():\n"
            "        # cutlass on SM100 only\n"
            "        if not graphs:\n"
            "            logger.warning('cutlass is off with graphs')\n"
            "        else:\n"
            "            backend = 'cutlass'\n"
            "    return make(backend)\n\n\n"
            "def other():\n"
            "    if is_sm100_supported():\n"
            "        fast = 'cutlass'\n"
            "    return make(fast)\n\n\n"
            "def flags(self):\n"
            "    if is_sm100_supported() and self.fp4:\n"
            "        self.proj._interleave = True\n"
            "        self.use_fused = True\n"
            "        self.overrides['backend'] = 'fused'\n"
            "    return make(self)\n\n\n"
            "def made(self):\n"
            "    if is_sm100_supported():\n"
            "        self.kernel = make('sm100')\n"
            "    return self.kernel\n")
    text = text.replace("from u import is_sm100_supported, make\n", (
        "import torch\n\n\ndef make(b):\n    return b\n\n\n"
        "def is_sm100_supported():\n    return torch.cuda.get_device_capability()[0] == 10\n"))
    ast.parse(text)
    gates = {g.function: g for g in gates_of_file("u.py", text, parse_arch("sm_120a"))
             if g.function in ("init", "other", "flags", "made")}
    assert gates["init"].effect.kind == EffectKind.FALLS_BACK
    assert gates["init"].effect.why == ("falls back: the target keeps the value backend had "
                                        "before this if, majors 10 set another")
    # nothing set before: the target skips the code (no value of its own to go on with)
    assert gates["other"].effect.kind == EffectKind.SKIPS_CODE
    # flags of objects set to constants (sglang's NVFP4 SwiGLU fusion on SM100): the
    # objects keep what their classes set, the target goes on with them
    assert gates["flags"].effect.kind == EffectKind.FALLS_BACK
    assert ("self.proj._interleave, self.use_fused, self.overrides['backend']"
            in gates["flags"].effect.why)
    # an object made only for the archs tested is no flag: skipped, nothing to go on with
    assert gates["made"].effect.kind == EffectKind.SKIPS_CODE


# -- a value the GPU decides is followed to the one the target gets ----------------------

DISPATCH = '''\
import torch

from .jit import gen_gemm_sm100_module, gen_gemm_sm120_module


def get_compute_capability(device):
    return torch.cuda.get_device_capability(device)


def get_gemm_module(sm_major, sm_minor):
    if sm_major in [10, 11]:
        return gen_gemm_sm100_module()
    elif sm_major == 12:
        return gen_gemm_sm120_module()
    raise ValueError(f"Unsupported SM major version: {sm_major}")


def mm_fp4(a):
    major, minor = get_compute_capability(a.device)
    return get_gemm_module(major, minor).run(a)
'''


@pytest.mark.slow
def test_a_module_chosen_by_the_callers_capability_is_the_targets_only(tmp_path: Path) -> None:
    ws = _library(tmp_path, "dispatch", DISPATCH, "mm_fp4")
    for arch, module in (("sm_121a", "gen_gemm_sm120_module"), ("sm_100a", "gen_gemm_sm100_module")):
        [chain] = _why(ws, "lower", "lowerlib.mm_fp4", arch=arch)["features"]
        gated = [link["function"] for link in chain["links"] if link["role"] == "gate"]
        assert gated == [module], (arch, chain["links"])
        assert chain["verdict"] == "on", chain["reason"]


# -- a crash names the release below that admits the target: bump the pin ----------------

def test_the_first_release_admitting_a_refusing_gate_and_the_commit_that_opened_it(
        tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lower")
    repo.commit("lower 1.0", {**LOWER, "lowerlib/jit.py": LOWER_JIT.format(comm="[9, 10]")})
    git(repo.path, "tag", "v1.0")
    repo.commit("docs", {"README.md": "lower\n"})
    git(repo.path, "tag", "v1.1")
    opened = repo.commit("comm: admit SM12x (#7)",
                         {"lowerlib/jit.py": LOWER_JIT.format(comm="[9, 10, 12]")})
    repo.commit("norm: tidy", {"README.md": "lower lib\n"})
    git(repo.path, "tag", "v1.2")
    git(repo.path, "tag", "v2.0rc1")  # a pre-release is no release to bump to
    arch = parse_arch("sm_120a")
    found = first_admitting(Git(repo.path), "lower", "v1.0", "lowerlib/jit.py",
                            "gen_comm_module", arch)
    assert found == Fix("lower", "v1.2", opened, "comm: admit SM12x (#7)", "#7")
    assert found.step.startswith("bump the pin to lower v1.2, the first release that admits")
    # already admitting at the pin, or a place no Python gate is: nothing to bump to
    assert first_admitting(Git(repo.path), "lower", "v1.2", "lowerlib/jit.py",
                           "gen_comm_module", arch) is None
    assert first_admitting(Git(repo.path), "lower", "v1.0", "csrc/comm.cu",
                           "comm", arch) is None


@pytest.mark.slow
def test_a_crash_says_which_call_admitted_it_and_the_release_to_bump_to(tmp_path: Path) -> None:
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    ws = _workspace(tmp_path, top=top, lower=lower)
    [chain] = _why(ws, "top", "--enable-quick-reduce")["features"]
    assert chain["verdict"] == "crash"
    call = next(link for link in chain["links"] if link["role"] == "call")
    assert f"(its call of {call['function']}, with no arch check on the way)" in chain["reason"]
    opened = git(lower.path, "rev-parse", "v2.0").strip()
    assert chain["fix"] == {"upstream": "lower", "tag": "v2.0", "commit": opened,
                            "subject": "comm: admit SM12x (#7)", "pr": "#7"}
    assert chain["reason"].endswith(
        f"next: bump the pin to lower v2.0, the first release that admits the target there "
        f"(opened by {opened[:9]}, lower#7: comm: admit SM12x (#7))")


# -- a refusal under a test of another value of the setting is not on this one's way ------

CHECKS = '''\
from top.server_args import get_server_args
from top.utils import is_sm100_supported


def check_backends():
    backend = get_server_args().attention_backend
    if backend == "decode":
        if not is_sm100_supported():
            raise ValueError("the decode backend needs SM100")
    if backend in ("decode",) and is_sm100_supported() is False:
        raise ValueError("still SM100 only")
'''


@pytest.mark.slow
def test_a_refusal_of_another_value_of_the_setting_is_not_on_this_values_way(
        tmp_path: Path) -> None:
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    top.commit("checks", {"python/top/checks.py": CHECKS})
    ws = _workspace(tmp_path, top=top, lower=lower)
    chains = {c["feature"]: c for c in _why(ws, "top", "--attention-backend")["features"]}
    plain = chains["--attention-backend=plain"]
    assert plain["verdict"] == "on", plain["links"]
    assert not [link for link in plain["links"] if link["file"] == "python/top/checks.py"
                and link["role"] == "gate"], plain["links"]
    decode = chains["--attention-backend=decode"]
    assert decode["verdict"] != "on"  # its class is another question
    assert sorted((link["line"], link["refuses"]) for link in decode["links"]
                  if link["file"] == "python/top/checks.py" and link["role"] == "gate"
                  ) == [(8, True), (10, True)]


# -- a capability decorator on the API itself is on its way -------------------------------

DECORATED = '''\
from .jit import gen_norm_module


def supported_compute_capability(caps):
    def wrap(func):
        return func
    return wrap


@supported_compute_capability([120])
def nvfp4_attention(x):
    return gen_norm_module().run(x)
'''


@pytest.mark.slow
def test_the_apis_own_capability_decorator_tells_12_1_from_12_0(tmp_path: Path) -> None:
    ws = _library(tmp_path, "nvfp4", DECORATED, "nvfp4_attention")
    [on] = _why(ws, "lower", "lowerlib.nvfp4_attention", arch="sm_120a")["features"]
    assert on["verdict"] == "on"
    [off] = _why(ws, "lower", "lowerlib.nvfp4_attention", arch="sm_121a")["features"]
    gate = next(link for link in off["links"] if link["role"] == "gate"
                and link["file"] == "lowerlib/nvfp4.py")
    assert (gate["line"], gate["excludes_target"], gate["admits"]) == (10, True, "capability 12.0")
    assert off["verdict"] != "on"


def test_a_pin_the_cache_lacks_gives_no_step_and_no_error(tmp_path: Path) -> None:
    """The bump is a hint beside the verdict: a pinned tag the cache lacks (git cannot
    read the range from it) is no step, and no error ending the answer."""
    repo = Repo(tmp_path / "lower")
    repo.commit("lower 2.0", {**LOWER, "lowerlib/jit.py": LOWER_JIT.format(comm="[9, 10, 12]")})
    git(repo.path, "tag", "v2.0")
    assert first_admitting(Git(repo.path), "lower", "v1.0", "lowerlib/jit.py",
                           "gen_comm_module", parse_arch("sm_120a")) is None


# -- a setting's string compared with what it was converted to --------------------------

@pytest.mark.parametrize(("test", "holds"), [
    # `--kv-cache-dtype auto` became the model's dtype: a torch dtype is never the string
    ("args.kv_cache_dtype == torch.float8_e4m3fn", False),
    ("args.kv_cache_dtype in (torch.float8_e4m3fn, torch.float8_e5m2)", False),
    ("args.kv_cache_dtype != torch.bfloat16", False),
    # the string's own tests
    ("args.kv_cache_dtype == 'auto'", True),
    ("args.kv_cache_dtype in ('fp8_e4m3', 'fp8_e5m2')", False),
    ("args.kv_cache_dtype == other.dtype", True),  # cannot tell: it may hold
])
def test_a_string_setting_compared_with_a_torch_dtype_is_not_its_own_test(
        test: str, holds: bool) -> None:
    expr = ast.parse(test, mode="eval").body
    assert isinstance(expr, ast.Compare)
    assert may_hold(expr.left, expr, "auto") is holds


# -- a value the code picks for the target is followed to that value's way -------------

PICK = '''\
from top.server_args import get_server_args
from top.utils import is_sm100_supported


def pick_backend():
    backend = get_server_args().attention_backend
    if backend == "auto":
        if is_sm100_supported():
            backend = "decode"
        else:
            backend = "plain"
    return backend
'''


@pytest.mark.slow
def test_a_value_the_code_picks_for_the_target_answers_for_auto(tmp_path: Path) -> None:
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    top.commit("pick", {"python/top/pick.py": PICK, "python/top/server_args.py": SERVER_ARGS.replace(
        '["plain", "decode"]', '["plain", "decode", "auto"]')})
    ws = _workspace(tmp_path, top=top, lower=lower)
    [auto] = _why(ws, "top", "--attention-backend=auto")["features"]
    assert auto["verdict"] == "on", auto
    assert auto["reason"].startswith("the target gets --attention-backend=plain (picked at top "
                                     "python/top/pick.py:8 pick_backend)"), auto["reason"]
    [picked] = [link for link in auto["links"]
                if link["file"] == "python/top/pick.py" and link["role"] == "gate"]
    assert picked["why"].startswith("picks 'plain' for the target") and not picked["excludes_target"]
    [sm100] = _why(ws, "top", "--attention-backend=auto", arch="sm_100a")["features"]
    assert "picked at" not in sm100["reason"]  # SM100 runs auto's own way


# -- a setting bound to a name inside a branch is followed there -------------------------

SAMPLE = '''\
import lowerlib

from top.server_args import get_server_args


def sample(x, simple):
    if simple:
        return x
    else:
        backend = get_server_args().attention_backend
        if backend == "plain":
            return lowerlib.rmsnorm(x)
        raise ValueError(backend)
'''


@pytest.mark.slow
def test_a_setting_bound_to_a_name_in_a_branch_is_followed_there(tmp_path: Path) -> None:
    """sglang's sampler binds ``backend = get_exec().kernel.sampling_backend`` in an
    ``else``: what follows it there is the setting's way."""
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    top.commit("sample", {"python/top/sample.py": SAMPLE})
    ws = _workspace(tmp_path, top=top, lower=lower)
    [plain] = _why(ws, "top", "--attention-backend=plain")["features"]
    assert [link["why"] for link in plain["links"] if link["role"] == "call"] == [
        "read attention_backend in sample() > lowerlib.rmsnorm"], plain["links"]
    assert plain["verdict"] == "on"


# -- a refusal only a named value of another setting meets is that value's ---------------

QUANT_CHECKS = '''\
from top.server_args import get_server_args
from top.utils import is_sm100_supported


def check_quant():
    args = get_server_args()
    backend = args.attention_backend
    if args.quantization == "nvfp4":
        if not is_sm100_supported():
            raise ValueError("nvfp4 needs SM100")
    return backend
'''


@pytest.mark.slow
def test_a_refusal_under_another_settings_named_value_is_not_on_this_features_way(
        tmp_path: Path) -> None:
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    server_args = _with_setting("quantization: Optional[str] = None", "--quantization",
                                ["fp8", "nvfp4"])
    top.commit("quant", {"python/top/quant_checks.py": QUANT_CHECKS,
                         "python/top/server_args.py": server_args})
    ws = _workspace(tmp_path, top=top, lower=lower)
    chains = {c["feature"]: c for name in ("--attention-backend", "--quantization")
              for c in _why(ws, "top", name)["features"]}
    plain = chains["--attention-backend=plain"]
    assert plain["verdict"] == "on", plain["reason"]
    assert not [link for link in plain["links"] if link["role"] == "gate"
                and link["file"] == "python/top/quant_checks.py"]
    nvfp4 = chains["--quantization=nvfp4"]  # its own refusal stays its own
    assert [link["line"] for link in nvfp4["links"] if link["role"] == "gate"
            and link["file"] == "python/top/quant_checks.py"] == [9], nvfp4["links"]
    assert nvfp4["verdict"] != "on"


# -- a refusal in a mode the caller picks is not the feature's own way ----------------------

MODE = '''\
import lowerlib

from top.server_args import get_server_args
from top.utils import is_sm100_supported


def fused(x, use_special=False):
    if use_special:
        assert is_sm100_supported(), "special needs SM100"
    return lowerlib.rmsnorm(x)


def layer(x):
    if get_server_args().attention_backend == "plain":
        return fused(x)
    return x
'''


@pytest.mark.slow
def test_a_refusal_in_a_mode_its_caller_picks_is_not_the_features_way(tmp_path: Path) -> None:
    """sglang's ``cutlass_fused_experts_fp8(..., use_mxfp8=...)`` asserts SM100 only
    under ``if use_mxfp8:``: ``--quantization=fp8`` is not refused there."""
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    top.commit("mode", {"python/top/mode.py": MODE})
    ws = _workspace(tmp_path, top=top, lower=lower)
    [plain] = _why(ws, "top", "--attention-backend=plain")["features"]
    [mode] = [link for link in plain["links"] if link["file"] == "python/top/mode.py"
              and link["role"] == "gate"]
    assert (mode["line"], mode["refuses"], mode["excludes_target"]) == (9, False, False)
    assert mode["why"].startswith("refuses only where the caller passes use_special")
    assert plain["verdict"] == "on", plain["reason"]


@pytest.mark.parametrize(("test", "flags", "holds"), [
    ("view.quantization == 'nvfp4'", {}, True),
    ("view.quantization in ('fp8', 'nvfp4') and not graphs", {}, True),
    ("view.quantization == 'int4'", {}, False),  # not a choice: cannot tell
    ("view.attention_backend == 'decode'", {}, False),  # the feature's own setting
    # the setting's own question of one value, directly or through a flag set to it
    ("get_runner().is_fused()", {}, True),
    ("self.use_fused", {"use_fused": "fused"}, True),
    ("self.use_fused", {}, False),
    ("get_runner().is_plain()", {}, False),  # a value of the feature's own setting too
    # a boolean setting off unless the user turns it on
    ("self.enable_rounding and view.x", {}, True),
    ("self.enable_other", {}, False),
])
def test_a_test_holding_only_for_another_settings_named_value(
        test: str, flags: dict[str, str], holds: bool) -> None:
    settings = {"quantization": frozenset({"fp8", "nvfp4"}),
                "runner": frozenset({"auto", "fused", "plain"}),
                "attention_backend": frozenset({"plain", "decode"})}
    node = ast.parse(test, mode="eval").body
    assert named_value_of(node, settings, "attention_backend", flags,
                          frozenset({"enable_rounding"})) is holds


# -- the default of a setting, read nowhere, is what the server runs ------------------------

@pytest.mark.slow
def test_a_default_read_nowhere_is_what_the_server_runs(tmp_path: Path) -> None:
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    server_args = _with_setting('tokenizer_mode: str = "auto"', "--tokenizer-mode",
                                ["auto", "slow"])
    top.commit("tokenizer", {"python/top/server_args.py": server_args})
    ws = _workspace(tmp_path, top=top, lower=lower)
    chains = {c["feature"]: c for c in _why(ws, "top", "--tokenizer-mode")["features"]}
    assert chains["--tokenizer-mode=auto"]["verdict"] == "on"
    assert chains["--tokenizer-mode=auto"]["reason"].startswith("the default, read nowhere")
    # a value the user asks for, read nowhere, may be one the walk missed: unknown
    assert chains["--tokenizer-mode=slow"]["verdict"] == "unknown"


def test_a_default_kept_off_a_path_is_served_by_the_servers_own_code() -> None:
    named = Feature(FeatureKind.FLAG, "--gemm-backend=auto", "gemm_backend", "auto")
    default = replace(named, default=True)
    assert decide(named, (_choice(),)).verdict == Verdict.GATE_ONLY  # nothing runs below
    assert decide(default, (_choice(),)).verdict == Verdict.ON
    assert asks_for_path(named, goes_on=False) and not asks_for_path(default, goes_on=False)


METHOD_CHECKS = '''\
from top.server_args import get_server_args
from top.utils import is_sm100_supported


class Backend:
    def __init__(self, name):
        self.name = name

    def is_decode(self):
        return self.name == "decode"


def check_methods():
    name = get_server_args().attention_backend
    backend = Backend(name)
    if backend.is_decode():
        if not is_sm100_supported():
            raise ValueError("decode needs SM100")
    return backend
'''


@pytest.mark.slow
def test_the_settings_own_question_of_another_value_is_not_this_values_way(
        tmp_path: Path) -> None:
    """sglang's ``if backend.is_cutedsl(): ... if not is_sm100_supported(): raise`` is no
    refusal of ``--bf16-gemm-backend=auto``."""
    top, lower = feature_upstream(tmp_path / "top"), feature_lower(tmp_path / "lower")
    top.commit("methods", {"python/top/method_checks.py": METHOD_CHECKS})
    ws = _workspace(tmp_path, top=top, lower=lower)
    chains = {c["feature"]: c for c in _why(ws, "top", "--attention-backend")["features"]}
    gates = {name: [link["line"] for link in chain["links"] if link["role"] == "gate"
                    and link["file"] == "python/top/method_checks.py"]
             for name, chain in chains.items()}
    assert gates == {"--attention-backend=plain": [], "--attention-backend=decode": [17]}, gates


QUANT_MODES = '''\
import enum

import lowerlib.comm as comm

from top.server_args import get_server_args
from top.utils import is_sm100_supported


class RunnerBackend(enum.Enum):
    AUTO = "auto"
    FUSED_KERNEL = "fused_kernel"

    def is_fused_kernels(self):
        return self == RunnerBackend.FUSED_KERNEL


def get_runner_backend():
    return RunnerBackend(get_server_args().runner_backend)


def _swizzle(w):
    if not is_sm100_supported():
        raise ValueError("swizzling needs SM100")
    return w


class Fp8Method:
    def __init__(self, quant_config):
        self.quant_config = quant_config
        self.use_mx = getattr(self.quant_config, "use_mx", False)
        self.use_fused = get_runner_backend().is_fused_kernels()

    def process(self, w):
        if self.use_fused:
            return _swizzle(w)
        elif self.use_mx:
            return self._process_mx(w)
        return w

    def _process_mx(self, w):
        if not is_sm100_supported():
            raise ValueError("MX needs SM100")
        return w

    def apply(self, x):
        if get_runner_backend().is_fused_kernels():
            return comm.fused_allreduce(x)
        return x


class Fp8Config:
    def __init__(self, use_mx: bool = False):
        self.use_mx = use_mx

    def get_name(self):
        return "mxfp8" if self.use_mx else "fp8"

    def get_quant_method(self, layer):
        method = Fp8Method(self)
        method.process(layer)
        return method.apply(layer)


QUANTIZATION_METHODS = {"fp8": Fp8Config, "mxfp8": Fp8Config}
'''


@pytest.mark.slow
def test_a_mode_a_config_or_another_backend_picks_is_off_the_values_way(
        tmp_path: Path) -> None:
    """sglang's fp8 config serves ``--quantization=fp8`` and ``=mxfp8``; its
    ``get_name()`` says ``use_mxfp8`` is the latter, so a refusal reached only under
    ``elif self.use_mxfp8:`` (in a helper its caller runs there) is not fp8's
    (51ad71708); one reached only from under ``if self.use_triton_kernels:`` (set to
    ``get_moe_runner_backend().is_triton_kernels()``, which asks for the enum's
    ``"triton_kernel"``) is that backend's (c7397de57), as is a call below made under
    ``if get_moe_runner_backend().is_cutlass():``.  Each stays the refusal of the value
    it belongs to."""
    chains = _chains(tmp_path, "--quantization", ("python/top/quant_modes.py", QUANT_MODES),
                     ('runner_backend: str = "auto"', "--runner-backend", ["auto", "fused_kernel"]),
                     ("quantization: Optional[str] = None", "--quantization", ["fp8", "mxfp8"]))
    refusing = {name: sorted(link["line"] for link in chain["links"] if link["refuses"])
                for name, chain in chains.items()}
    fp8 = chains["--quantization=fp8"]
    assert refusing["--quantization=fp8"] == [], fp8["links"]
    assert not [link for link in fp8["links"] if link["upstream"] == "lower"], fp8["links"]
    assert fp8["verdict"] == "on", fp8["reason"]
    assert 41 in refusing["--quantization=mxfp8"], chains["--quantization=mxfp8"]["links"]


PICKED_CHECKS = '''\
from top.server_args import get_server_args
from top.utils import is_sm100_supported


def check_split():
    args = get_server_args()
    if args.decode_backend == "decode" or args.prefill_backend == "decode":
        prefill = args.prefill_backend if args.prefill_backend is not None else args.attention_backend
        if prefill == "decode" and not is_sm100_supported():
            raise ValueError("decode prefill needs SM100")
        if args.decode_backend == "decode" and not is_sm100_supported():
            raise ValueError("decode needs SM100")
    return args
'''


@pytest.mark.slow
def test_a_name_picked_from_other_settings_is_their_value_not_the_features(
        tmp_path: Path) -> None:
    """sglang 5b2e2750b: ``prefill_backend = self.prefill_attention_backend if ... else
    self.attention_backend``, then ``if prefill_backend == "trtllm_mha" and not
    is_sm100_supported(): raise``: a refusal of those settings' value, not of
    ``--decode-attention-backend=trtllm_mha``, which shares the choices."""
    chains = _chains(tmp_path, "--decode-backend", ("python/top/split_checks.py", PICKED_CHECKS),
                     ("prefill_backend: Optional[str] = None", "--prefill-backend", ["plain", "decode"]),
                     ("decode_backend: Optional[str] = None", "--decode-backend", ["plain", "decode"]))
    gates = {name: [link["line"] for link in chain["links"] if link["role"] == "gate"
                    and link["file"] == "python/top/split_checks.py" and link["refuses"]]
             for name, chain in chains.items()}
    # its own refusal stays
    assert gates == {"--decode-backend=plain": [], "--decode-backend=decode": [11]}, gates


@pytest.mark.parametrize(("test", "holds"), [
    ("picked == 'decode'", True),  # a name bound to other settings' values
    ("mixed == 'decode'", False),  # one arm is the feature's own setting
    ("loose == 'decode'", False),  # one arm is no setting
])
def test_a_name_compared_is_read_as_the_settings_its_binding_picks(test: str,
                                                                     holds: bool) -> None:
    settings = {"prefill": frozenset({"plain", "decode"}),
                "attention_backend": frozenset({"plain", "decode"}),
                "decode": frozenset({"plain", "decode"})}
    function = ast.parse(
        "def f(view, x):\n"
        "    picked = view.prefill if view.prefill is not None else view.attention_backend\n"
        "    mixed = view.prefill or view.decode\n"
        "    loose = view.prefill or x\n").body[0]
    assert isinstance(function, ast.FunctionDef)
    node = ast.parse(test, mode="eval").body
    assert named_value_of(node, settings, "decode", {}, frozenset(),
                          names=single_bindings(
                              scope_of_body(function.body, function.args, function))) is holds
