"""The features an upstream declares beyond its settings and its ``__init__``s: public
functions its modules alone name, optional re-exports, classes' backends and the
environment a server reads."""

from __future__ import annotations

from contrib.analysis.tree import DictTree
from contrib.audit.chains import FeatureKind
from contrib.audit.feature.declared import declared, opt_in
from contrib.workspace.config import DEFAULT_SETTINGS_CLASS as SETTINGS_CLASS

LIBRARY = {
    "lib/__init__.py": (
        "import contextlib\n"
        "from .gemm import mm as mm\n"
        "try:\n"
        "    from .norm import rmsnorm as rmsnorm\n"
        "except (ImportError, AttributeError):\n"
        "    pass\n"
        "with contextlib.suppress(ImportError):\n"
        "    from .moe import fused_moe as fused_moe\n"
        "try:\n"
        "    from .norm import layernorm as layernorm\n"
        "except ValueError:\n"  # not an optional import: what it guards is no export
        "    pass\n"
        "from .wrapper import Wrapper as Wrapper\n"
    ),
    "lib/gemm.py": "def mm(a):\n    return a\n\n\ndef mm_helper(a):\n    return a\n",
    "lib/norm.py": "def rmsnorm(x):\n    return x\n\n\ndef layernorm(x):\n    return x\n",
    "lib/moe.py": (
        "from typing import Literal\n\n\n"
        "def fused_moe(x):\n    return x\n\n\n"
        "def deepseek_moe(x,\n"
        "                 backend: Literal['cutlass', 'trtllm'] = 'cutlass'):\n"
        "    return x\n\n\n"
        "def _private(x):\n    return x\n"
    ),
    "lib/listed.py": "__all__ = [\n    'kept',\n]\n\n\ndef kept():\n    pass\n\n\ndef dropped():\n    pass\n",
    "lib/_impl/core.py": "def hidden():\n    pass\n",
    "lib/wrapper.py": (
        "class Wrapper:\n"
        "    def __init__(self, workspace, backend: str = 'auto'):\n"
        "        self._backend = backend\n"
        "        if backend == 'auto':\n"
        "            self._backend = 'fa2'\n\n"
        "    def run(self):\n"
        "        if self._backend in ('fa2', 'fa3'):\n"
        "            return 1\n"
        "        if self._backend == 'cudnn':\n"
        "            return 2\n"
    ),
    "tests/test_x.py": "def test_it():\n    pass\n",
}


def _features() -> dict[str, tuple[str, bool]]:
    return {f.name: (f"{f.file}:{f.line}", f.listed)
            for f in declared(DictTree(LIBRARY), SETTINGS_CLASS)}


def test_a_public_function_no_init_exports_is_named_by_its_module() -> None:
    found = _features()
    assert found["lib.gemm.mm_helper"] == ("lib/gemm.py:5", False)  # why's, not the table's
    assert found["lib.moe.deepseek_moe"] == ("lib/moe.py:8", False)
    assert "lib.gemm.mm" not in found  # exported as lib.mm: once, by that name
    assert "lib.listed.kept" in found and "lib.listed.dropped" not in found  # __all__ says
    assert not any(n.startswith(("lib._impl", "lib.moe._private", "tests")) for n in found)


def test_a_module_functions_backends_are_features_too() -> None:
    found = _features()
    assert [n for n in found if n.startswith("lib.moe.deepseek_moe:")] == [
        "lib.moe.deepseek_moe:backend=cutlass", "lib.moe.deepseek_moe:backend=trtllm"]


def test_re_exports_under_an_optional_import_are_the_packages() -> None:
    found = _features()
    assert found["lib.rmsnorm"] == ("lib/__init__.py:4", True)
    assert found["lib.fused_moe"] == ("lib/__init__.py:8", True)
    assert found["lib.norm.layernorm"][1] is False  # a try not about imports


def test_a_class_constructed_with_a_backend_has_one_feature_per_backend_it_tests() -> None:
    found = [f for f in declared(DictTree(LIBRARY), SETTINGS_CLASS)
             if f.attr == "lib.Wrapper"]
    assert [(f.name, f.value) for f in found] == [
        ("lib.Wrapper", ""), ("lib.Wrapper:backend=auto", "auto"),
        ("lib.Wrapper:backend=fa2", "fa2"), ("lib.Wrapper:backend=fa3", "fa3"),
        ("lib.Wrapper:backend=cudnn", "cudnn")]
    assert found[4].keys == (("backend", "cudnn"),) and found[4].kind == FeatureKind.API


SETTINGS = '''\
import dataclasses
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    kv_cache_dtype: str = "auto"
    enable_rounding: bool = False
    enable_fast: bool = True
    enable_chosen: Optional[bool] = None
    enable_field: bool = dataclasses.field(default=False)

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8_e4m3"])
'''


def test_a_settings_defaults_and_its_opt_in_flags() -> None:
    tree = DictTree({"python/srv/__init__.py": "", "python/srv/server_args.py": SETTINGS})
    defaults = {f.name: f.default for f in declared(tree, SETTINGS_CLASS)}
    assert defaults["--kv-cache-dtype=auto"] and not defaults["--kv-cache-dtype=fp8_e4m3"]
    assert defaults["--enable-fast"] and not defaults["--enable-rounding"]
    assert opt_in(tree, list(tree.paths()), SETTINGS_CLASS) == {"enable_rounding", "enable_field"}
