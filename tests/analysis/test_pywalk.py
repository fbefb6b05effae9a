"""The fast walks visit what ast.walk visits, in its order, and name each node's parent."""

from __future__ import annotations

import ast
from pathlib import Path

import contrib
from contrib.analysis.pywalk import parents, walk, walk_all

SOURCE = '''
import torch

@decorate(major=[9, 10])
async def f(x, *args, y=1, **kw):
    if (cc := torch.cuda.get_device_capability()) and cc[0] == 12:
        return [i for i in x if i > {"a": 1}["a"]]
    match x:
        case [1, *rest]:
            pass
    try:
        lambda q: q
    except (ValueError, TypeError) as exc:
        raise RuntimeError(f"bad {x!r:>10}") from exc
    async with g() as h:
        pass
'''


def _modules() -> list[ast.Module]:
    """The sample above and contrib's own largest modules (every kind of node)."""
    own = sorted(Path(contrib.__file__).parent.rglob("*.py"), key=lambda p: -p.stat().st_size)
    return [ast.parse(SOURCE)] + [ast.parse(p.read_text(encoding="utf-8")) for p in own[:2]]


def test_walk_visits_what_ast_walk_visits_in_its_order() -> None:
    for module in _modules():
        assert [id(n) for n in walk(module)] == [id(n) for n in ast.walk(module)]
        statements = module.body[:3]
        assert [id(n) for n in walk_all(statements)] == [
            id(n) for s in statements for n in ast.walk(s)]


def test_parents_are_the_parents_a_walk_sees() -> None:
    for module in _modules():
        expected = {id(child): node for node in ast.walk(module)
                    for child in ast.iter_child_nodes(node)}
        found = parents(module)
        assert found.keys() == expected.keys()
        assert all(found[key] is expected[key] for key in expected)


def test_a_node_missing_a_field_is_walked_without_it() -> None:
    call = ast.Call(func=ast.Name(id="f"), args=[ast.Constant(1)])  # no keywords field
    assert [type(n).__name__ for n in walk(call)] == [
        type(n).__name__ for n in ast.walk(call)] == ["Call", "Name", "Constant"]
