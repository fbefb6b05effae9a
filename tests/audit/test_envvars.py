"""A server's environment variables as features: declared as the fields of one class of
descriptors (sglang's ``environ.py``), read where the code reads them."""

from __future__ import annotations

import ast

from contrib.analysis.reach.tree import PyTree
from contrib.analysis.tree import DictTree
from contrib.audit.chains import FeatureKind
from contrib.audit.feature.declared import declared
from contrib.audit.stack.mode import Mode
from contrib.audit.stack.skips import Skips, Trail
from contrib.audit.stack.walk import Walker

ENVIRON = '''\
import os


class EnvField:
    def __init__(self, default):
        self.default = default

    def __set_name__(self, owner, name):
        self.name = name

    def get(self):
        value = os.getenv(self.name)
        return self.default if value is None else self.parse(value)


class EnvBool(EnvField):
    def parse(self, value: str) -> bool:
        return value in ("1", "true")


class EnvBoolWithAlias(EnvBool):
    pass


class EnvStr(EnvField):
    def parse(self, value: str) -> str:
        return value


class EnvInt(EnvField):
    def parse(self, value: str) -> int:
        return int(value)


class Envs:
    SRV_ENABLE_FAST = EnvBool(False)
    SRV_USE_OLD = EnvBoolWithAlias(True)
    SRV_MLA_BACKEND = EnvStr("flashinfer")
    SRV_LAYOUT = EnvStr("auto")
    SRV_CHUNK = EnvInt(4)


envs = Envs()
'''

SERVER_ARGS = "class ServerArgs:\n    enable_x: bool = False\n"

LAYER = '''\
import lowerlib
from srv.environ import envs
from srv.utils import get_bool_env_var

_use_old = get_bool_env_var("SRV_USE_OLD")
_mla = envs.SRV_MLA_BACKEND.get()


def forward(x):
    if envs.SRV_ENABLE_FAST.get():
        return lowerlib.fast(x)
    if _use_old:
        return lowerlib.old(x)
    if _mla == "triton":
        return lowerlib.mla_triton(x)
    if envs.SRV_LAYOUT.get().lower() in ("masked", "compact"):
        return lowerlib.masked(x)
    return x


def reset():
    envs.SRV_ENABLE_FAST.set(False)
'''

SETUP = '''\
from srv.environ import envs


def setup(args):
    if args.enable_x:
        envs.SRV_ENABLE_FAST.set(True)
'''

FILES = {"srv/__init__.py": "", "srv/environ.py": ENVIRON, "srv/server_args.py": SERVER_ARGS,
         "srv/layer.py": LAYER, "srv/setup.py": SETUP, "srv/utils.py": "",
         "tests/test_env.py": "from srv.environ import envs\nenvs.SRV_TEST_ONLY.get() == 'x'\n"}


def test_a_servers_variables_are_features_bools_once_strings_per_value_compared() -> None:
    found = [f for f in declared(DictTree(FILES), "ServerArgs") if f.kind == FeatureKind.ENV]
    assert [(f.name, f.attr, f.value, f.line) for f in found] == [
        ("SRV_ENABLE_FAST=1", "SRV_ENABLE_FAST", "", 36),
        ("SRV_USE_OLD=1", "SRV_USE_OLD", "", 37),  # a bool by its parser's lineage
        ("SRV_MLA_BACKEND=triton", "SRV_MLA_BACKEND", "triton", 38),  # through `_mla`
        ("SRV_LAYOUT=masked", "SRV_LAYOUT", "masked", 39),  # through `.lower()`
        ("SRV_LAYOUT=compact", "SRV_LAYOUT", "compact", 39)]  # an int is tuning: none
    assert all(f.file == "srv/environ.py" and f.listed for f in found)


def _walker() -> Walker:
    ev = PyTree(FILES.get, list(FILES))
    runtime = {p: t for p, t in FILES.items() if not p.startswith("tests/")}
    return Walker(ev, lambda: runtime, {"lowerlib"}, lambda path, first, last: False,
                  Skips([])).in_mode(Mode.features({}))


def _calls(walker: Walker, attr: str, value: object = True) -> list[str]:
    found = []
    for block in walker.enabled_by(attr, value, Trail()):
        found += [o.dotted for o in walker.outside(block.path, block.holder, block.code)]
    return found


def test_a_variable_is_read_where_the_code_reads_it() -> None:
    walker = _walker()
    assert _calls(walker, "SRV_ENABLE_FAST") == ["lowerlib.fast"]  # envs.X.get(); not .set()
    assert _calls(walker, "SRV_USE_OLD") == ["lowerlib.old"]  # get_bool_env_var, bound
    assert _calls(walker, "SRV_MLA_BACKEND", "triton") == ["lowerlib.mla_triton"]


def test_a_flag_that_sets_a_variable_runs_what_reads_it() -> None:
    walker = _walker()
    parsed = walker.ev.module("srv/setup.py")
    assert parsed is not None
    setup = next(f for f in parsed[0].body if isinstance(f, ast.FunctionDef))
    [out] = walker.outside("srv/setup.py", setup, setup.body)
    assert out.dotted == "lowerlib.fast" and "sets SRV_ENABLE_FAST" in out.via


def test_an_env_rows_choices_and_its_bare_name() -> None:
    from contrib.audit.chains import Chain, Feature, FeatureKind, Verdict
    from contrib.audit.feature.show import feature_rows, find

    values = [Feature(FeatureKind.ENV, f"SGLANG_BACKEND={v}", "SGLANG_BACKEND", v)
              for v in ("a", "b")]
    flag = Feature(FeatureKind.ENV, "SGLANG_FAST=1", "SGLANG_FAST")
    chains = [Chain(f, (), Verdict.ON, "no architecture gate on the way") for f in values]
    assert feature_rows(chains, "sm_120a", {})[0][1] == "SGLANG_BACKEND=a|b"
    assert find([*values, flag], "SGLANG_FAST") == [flag]
    assert find([*values, flag], "SGLANG_BACKEND") == values
