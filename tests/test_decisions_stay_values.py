"""A decision stays a value until a person reads it: no module reads one back out of
the words contrib wrote for it.

The audit's effect, class reason, evidence, call chains and ways below, a unit's
``why``, a drafted gate's decision: each is written as a sentence only where a person
reads it (the report, ``show``, the PR body, the dashboard, the JSON), and code that
needs the decision asks the value (a kind, a typed field, a tuple of names).  A
module reading ``gate.effect.why.startswith("falls back")`` or splitting
``"a>b".split(">")`` changes a verdict when a message is reworded, so this test walks
every module of the package and fails on a string read (``startswith``, ``split``,
``in``, a regex, ...) of such a field, or of a name bound by a loop over one.

Allowed, one place each: :mod:`contrib.audit.serial` writes and reads the audit's
forms; :mod:`contrib.workspace.schema` reads ``[decisions]`` keys (``file:line
function``) and entries of the sentence form ``contrib enable`` wrote before they were
tables, once, into the value; :mod:`contrib.analysis.waivers` matches a waiver's
pattern, which a person wrote against a finding's message, to that message (the words
are the waiver's language, documented as such).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "contrib"
# The fields (attributes, and keys of the written forms) that hold contrib's words for a
# decision; and the few that are words wherever they are named, as a plain name too.
WORDS = frozenset({"why", "effect", "admits", "reason", "message", "evidence", "calls",
                   "chain", "via", "says", "decisions", "label", "location"})
NAMED = frozenset({"decisions", "evidence", "calls", "chain", "via"})
READS = frozenset({"startswith", "endswith", "split", "rsplit", "partition", "rpartition",
                   "removeprefix", "removesuffix", "find", "rfind", "index", "count",
                   "match", "search", "fullmatch", "findall", "finditer"})
ALLOWED = frozenset({"audit/serial.py", "workspace/schema.py", "analysis/waivers.py"})


def _worded(expr: ast.AST, bound: set[str]) -> bool:
    """A decision's words: ``x.why``, ``decisions[k]``, ``x.evidence[:5]``, words joined
    (``" ".join(x.calls)``), or a name a loop over one bound."""
    if isinstance(expr, ast.Subscript):
        if isinstance(expr.slice, ast.Constant) and expr.slice.value in WORDS:
            return True  # data["reason"]
        expr = expr.value
    if isinstance(expr, ast.Call) and expr.args:
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr == "get" \
                and isinstance(expr.args[0], ast.Constant) and expr.args[0].value in WORDS:
            return True  # data.get("location")
        if (isinstance(func, ast.Attribute) and func.attr == "join") or (
                isinstance(func, ast.Name) and func.id == "str"):
            return _worded(expr.args[0], bound)  # " ".join(x.calls), str(x.why)
    return (isinstance(expr, ast.Attribute) and expr.attr in WORDS) or (
        isinstance(expr, ast.Name) and (expr.id in bound or expr.id in NAMED))


def _loop_names(tree: ast.AST) -> set[str]:
    """The names bound by ``for NAME in x.calls`` and comprehensions over such a field."""
    names: set[str] = set()
    for node in ast.walk(tree):
        loops = ([node] if isinstance(node, ast.For) else
                 list(node.generators) if isinstance(node, ast.ListComp | ast.SetComp
                                                     | ast.GeneratorExp | ast.DictComp) else [])
        for loop in loops:
            if _worded(loop.iter, set()) and isinstance(loop.target, ast.Name):
                names.add(loop.target.id)
    return names


def reads_words(node: ast.AST, bound: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """Whether ``node`` reads a decision out of its words."""
    bound = set(bound)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in READS \
            and (_worded(node.func.value, bound) or any(_worded(a, bound) for a in node.args)):
        return True
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        return any(_worded(s, bound) for s in sides) and any(
            isinstance(s, ast.Constant) and isinstance(s.value, str) and s.value for s in sides)
    return False


def test_no_module_reads_a_decision_from_its_words() -> None:
    found = []
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 150
    for path in modules:
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound = _loop_names(tree)
        found += [f"contrib/{rel}:{n.lineno}" for n in ast.walk(tree) if reads_words(n, bound)]
    assert found == []


def test_the_check_sees_a_decision_read_from_words() -> None:
    for text in ('gate.effect.why.startswith("falls back")', 'g.effect == "refused"',
                 're.match(r"self\\.(\\w+)", gate.effect)', 'gate.admits != "unknown"',
                 '"a>b" in " ".join(gate.calls)', '[c.split(">")[0] for c in gate.calls]',
                 'decisions[label].split(". Why: ", 1)', '"built by " in unit.why',
                 'gate.evidence[0].startswith("csrc/")', '" (guard " in line.says',
                 'str(g.get("location", "")).rpartition(":")',
                 'gate.label.partition(" ")', 'data["reason"].split(";")'):
        tree = ast.parse(text)
        bound = _loop_names(tree)
        assert any(reads_words(n, bound) for n in ast.walk(tree)), text
    for text in ("gate.effect.kind.refuses", "e.path == path and not e.upstream",
                 "[call[-1] for call in gate.calls]", "gate.text.split()"):
        tree = ast.parse(text)
        assert not any(reads_words(n, _loop_names(tree)) for n in ast.walk(tree)), text
