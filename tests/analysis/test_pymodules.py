"""Which file of a tree an import names, its source roots unknown."""

from __future__ import annotations

from contrib.analysis.pymodules import ModuleIndex

SGLANG = [
    "python/sglang/__init__.py",
    "python/sglang/srt/__init__.py",
    "python/sglang/srt/utils/__init__.py",
    "python/sglang/srt/utils/common.py",
    "python/sglang/srt/layers/__init__.py",
    "python/sglang/srt/layers/moe/__init__.py",
    "python/sglang/srt/layers/moe/token_dispatcher/__init__.py",
    "python/sglang/srt/layers/moe/token_dispatcher/flashinfer.py",
    "python/sglang/srt/layers/moe/token_dispatcher/deepep.py",
    "test/attention/utils.py",
    "test/attention/test_mla.py",
]


def test_an_absolute_name_is_a_path_tail_from_outside_any_package() -> None:
    index = ModuleIndex(SGLANG)
    assert index.find("sglang.srt.utils", "python/sglang/srt/layers/moe/x.py") == \
        "python/sglang/srt/utils/__init__.py"
    assert index.find("sglang.srt.utils.common") == "python/sglang/srt/utils/common.py"
    assert index.find("sglang.srt.layers.moe.token_dispatcher.flashinfer") == \
        "python/sglang/srt/layers/moe/token_dispatcher/flashinfer.py"


def test_a_file_inside_a_package_is_not_an_installed_package_of_its_name() -> None:
    """``import flashinfer`` in sglang is flashinfer, installed: not the token
    dispatcher's ``flashinfer.py``, whose folder is a package, nor for a module of that
    package (Python 3 imports absolutely: flashinfer's ``import cudnn`` is cuDNN, not
    ``flashinfer/cudnn``).  A script's folder is on sys.path: there a file answers."""
    index = ModuleIndex(SGLANG)
    layers = "python/sglang/srt/layers/attention/trtllm_mha_backend.py"
    assert index.find("flashinfer", layers) is None
    assert index.find("flashinfer", "python/sglang/srt/layers/moe/token_dispatcher/deepep.py") \
        is None
    # A test folder that is no package: its files are what its tests import by name.
    assert index.find("utils", "test/attention/test_mla.py") == "test/attention/utils.py"
    assert index.find(".utils".lstrip("."), "test/attention/test_mla.py", 1) == \
        "test/attention/utils.py"
