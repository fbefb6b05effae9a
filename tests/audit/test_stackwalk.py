"""The stack's walk reads the tree's gates by their kinds (where the target does not go),
in the mode its walker was made with."""

from __future__ import annotations

import ast

from contrib.analysis.gates import Form
from contrib.analysis.reach.tree import PyTree
from contrib.audit.model import AuditGate, Decision, EffectKind, GateKind
from contrib.audit.stack.mode import GATES, Mode
from contrib.audit.stack.skips import Skips
from contrib.audit.stack.walk import Walker

CODE = """\
class Layer:
    def go(self):
        if is_sm100():
            fast()
        if is_sm90():
            hopper()
        if self.use_fp8:
            fp8()
        if not ok():
            raise RuntimeError("no")
        run()
"""


def _gate(line: int, kind: EffectKind, excludes: bool, flag: str = "") -> AuditGate:
    return AuditGate("pkg/layer.py", line, "Layer.go", GateKind.PREDICATE, frozenset({10}),
                     excludes, effect=Decision(kind, "words that decide nothing", flag),
                     parser_kind=Form.CONDITION)


def test_skips_are_read_from_kinds_not_from_words() -> None:
    module = ast.parse(CODE)
    ifs = [n for n in ast.walk(module) if isinstance(n, ast.If)]
    skips = Skips([_gate(3, EffectKind.SKIPS_CODE, True), _gate(5, EffectKind.TAKES_BRANCH, False),
                   _gate(2, EffectKind.VALUE_FALLS_BACK, True, flag="self.use_fp8"),
                   _gate(9, EffectKind.REFUSED, True)])
    sm100, sm90, fp8, refusal = ifs
    assert skips("pkg/layer.py", sm100) and not skips("pkg/layer.py", sm90)
    assert skips.taken("pkg/layer.py", sm90) is True
    assert skips.taken("pkg/layer.py", fp8) is False  # the flag is false on the target
    assert skips.refuses("pkg/layer.py", refusal) and not skips.refuses("pkg/layer.py", sm100)
    assert skips.taken("other.py", sm90) is None


SETS = """\
import lowerlib


def setup(args):
    args.backend = "auto"


def run(args):
    if args.backend == "auto":
        lowerlib.fused()
"""


def test_a_walkers_mode_is_chosen_when_it_is_made_and_its_reading_is_shared() -> None:
    files = {"pkg/__init__.py": "", "pkg/a.py": SETS}
    ev = PyTree(files.get, list(files))
    gates = Walker(ev, lambda: files, {"lowerlib"}, lambda path, first, last: False, Skips([]))
    features = gates.in_mode(Mode.features({}))
    parsed = ev.module("pkg/a.py")
    assert parsed is not None
    setup = next(f for f in parsed[0].body if isinstance(f, ast.FunctionDef))  # the syntax walked
    # a gate's walk follows flags set True only; a feature's, the string a setting is set to
    assert gates.mode == GATES and gates.outside("pkg/a.py", setup, setup.body) == []
    [out] = features.outside("pkg/a.py", setup, setup.body)
    assert out.dotted == "lowerlib.fused" and out.via[0] == "sets backend='auto'"
    assert features.reading is gates.reading and gates.mode == GATES
    assert Mode.features({"backend": ("pkg/other/",)}).folders_elsewhere("backend") == (
        "pkg/other/",)
