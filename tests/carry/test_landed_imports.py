"""A module's top-level imports are one place, matched by the names they import: a patch
whose import lines upstream regrouped (a reflowed ``from x import (a, b, c)``, a name
added to the line it wrote) is landed when every name it imports is imported there."""

from __future__ import annotations

from pathlib import Path

from contrib.carry.imports import imports
from contrib.carry.landed import measure
from contrib.git.repo import Git
from testing.gitutil import Repo
from testing.histories import Change, fast_import, filler
from testing.synchelp import add_patchset, sync_json, version_dir
from testing.workspace import Workspace

HEAD = ('"""Loader tests."""\n\nimport unittest\n\n'
        'from pkg.configs import LoadConfig\n'
        'from pkg.quant.modelopt import (\n    Fp4Config,\n    MixedConfig,\n)\n'
        'from pkg.loader import ModelOptLoader\n'
        'from pkg.utils import get_device\n\n\n')
BODY = ('class TestLoader(unittest.TestCase):\n'
        '    def test_fp4(self):\n'
        '        config = Fp4Config.from_config({"quant_algo": "NVFP4"})\n'
        '        self.assertEqual(config.get_name(), "modelopt_fp4")\n')
CASES = ('\n    def test_mxfp8(self):\n'
         '        config = Fp8Config.from_config({"quant_algo": "MXFP8"})\n'
         '        self.assertTrue(config.use_mxfp8)\n'
         '        loader = DefaultModelLoader(LoadConfig())\n'
         '        self.assertIsNotNone(loader)\n'
         '        self.assertIsInstance(ModelOptFp8Config(), object)\n')
OURS = HEAD.replace("from pkg.configs import LoadConfig\n",
                    "from pkg.configs import LoadConfig\nfrom pkg.quant.fp8 import Fp8Config\n"
                    ).replace("    Fp4Config,\n", "    Fp4Config,\n    ModelOptFp8Config,\n").replace(
    "from pkg.loader import ModelOptLoader\n",
    "from pkg.loader import DefaultModelLoader, ModelOptLoader\n") + BODY + CASES
# Upstream's landing: the same names, grouped its own way (isort, a reflowed block).
THEIRS = ('"""Loader tests."""\n\nimport unittest\nfrom types import SimpleNamespace\n\n'
          'from pkg.configs import LoadConfig\n'
          'from pkg.quant.fp8 import Fp8Config, Fp8LinearMethod\n'
          'from pkg.quant.modelopt import (\n    Fp4Config,\n    MixedConfig,\n'
          '    ModelOptFp8Config,\n)\n'
          'from pkg.loader import (\n    DefaultModelLoader,\n    ModelOptLoader,\n'
          '    get_model_loader,\n)\n'
          'from pkg.utils import get_device\n\n\n') + BODY + CASES


def test_imports_upstream_regrouped_are_found_by_name(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    upstream.commit("tests: loader", {"tests/test_loader.py": HEAD + BODY})
    add_patchset(workspace, upstream, tmp_path, "mxfp8",
                 [("Support ModelOpt MXFP8 checkpoints", {"tests/test_loader.py": OURS})])
    shas = fast_import(upstream, [*filler(2), Change(
        "[ModelOpt] MXFP8 checkpoints (#20321)", {"tests/test_loader.py": THEIRS}),
        *filler(2, start=2)])

    code, res = sync_json(workspace)

    assert code == 0 and res["result"] == "upstreamed", res
    assert res["upstreamed"][0]["commit"]["sha"] == shas[2]


def test_a_name_imported_nowhere_at_the_target_keeps_the_block_missing(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    upstream.commit("tests: loader", {"tests/test_loader.py": HEAD + BODY})
    base = add_patchset(workspace, upstream, tmp_path, "mxfp8",
                        [("Support ModelOpt MXFP8 checkpoints", {"tests/test_loader.py": OURS})])
    # Upstream lands the tests but imports none of the patch's names at the top.
    theirs = (HEAD.replace("import unittest\n", "import unittest\nimport os\n")
              .replace("from pkg.utils import get_device\n", "from pkg.utils import (\n"
                       "    get_device,\n)\n") + BODY + CASES)
    shas = fast_import(upstream, [*filler(1), Change("tests: mxfp8 (#9)",
                                                     {"tests/test_loader.py": theirs})])

    code, res = sync_json(workspace)

    assert code == 1 and res["result"] == "conflict", res
    assert res["conflict"]["evidence"]["landed_by"] is None
    patch = next(version_dir(workspace, "mxfp8", base).glob("*.patch")).read_text()
    evidence = measure(Git(upstream.path), patch, "p", base, shas[-1])
    assert evidence.missing == ("tests/test_loader.py (imports)",)
    assert (evidence.lines, evidence.present) == (9, 6), "3 names imported, 6 lines of tests"


def test_the_names_of_top_level_imports() -> None:
    names, marks = imports(THEIRS.splitlines())
    assert "from pkg.loader import get_model_loader" in names
    assert "from pkg.quant.fp8 import Fp8LinearMethod" in names
    assert "import unittest" in names and "from types import SimpleNamespace" in names
    assert not any("Fp4Config.from_config" in n for n in names)
    lines = THEIRS.splitlines()
    assert [line for line, m in zip(lines, marks, strict=True) if m][-1] == \
        "from pkg.utils import get_device"
    indented, _ = imports(["def f():", "    import os", "    from a import b"])
    assert indented == []
    assert imports(["    Fp8Config,", ")"], inside="pkg.fp8")[0] == ["from pkg.fp8 import Fp8Config"]
    relative, _ = imports(["from . import utils", "from ..quant import (fp8 as f,  # noqa",
                           "    fp4,", ")", "import a.b as c, d"])
    assert relative == ["from . import utils", "from ..quant import fp8 as f",
                        "from ..quant import fp4", "import a.b as c", "import d"]
