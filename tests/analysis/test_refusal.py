"""One vocabulary of refusals, and the rules each reader asks with it."""

from __future__ import annotations

import ast

from contrib.analysis.archvalues import Ext, Func, ModRef, ordered
from contrib.analysis.refusal import ends_refusing, gives_up, may_stop, refuses


def _body(text: str) -> list[ast.stmt]:
    node = ast.parse(text).body[0]
    assert isinstance(node, ast.If)
    return node.body


def test_a_branch_refuses_by_raising_first_or_calling_a_refusal_after_a_message() -> None:
    assert refuses(_body("if c:\n    raise ValueError('x')\n"))
    assert refuses(_body("if c:\n    print('no')\n    pytest.skip('x')\n"))
    assert refuses(_body("if c:\n    sys.exit(1)\n"))
    assert not refuses(_body("if c:\n    x = 1\n    raise ValueError('after work')\n"))
    assert not refuses(_body("if c:\n    return None\n"))  # a value: the caller decides


def test_a_skip_gives_up_and_a_walk_ends_at_a_refusal() -> None:
    assert gives_up(_body("if c:\n    return 'not supported on this GPU'\n"))
    assert gives_up(_body("if c:\n    return\n"))
    assert not gives_up(_body("if c:\n    return 'trtllm'\n"))  # a value, not a reason
    assert ends_refusing(_body("if c:\n    work()\n    return False\n"))
    assert ends_refusing(_body("if c:\n    work()\n    pytest.fail('x')\n"))
    assert not ends_refusing(_body("if c:\n    return run()\n"))


def test_a_function_may_stop_by_its_own_body_only() -> None:
    stops, returns = ast.parse("def f():\n    if c:\n        pytest.skip('x')\n"
                               "def g():\n    def inner():\n        raise X\n    return 1\n").body
    assert may_stop(stops) and not may_stop(returns) and not may_stop(None)


def test_values_are_ordered_the_same_way_whatever_their_hash() -> None:
    one, two = ast.parse("def a(): pass\ndef b(): pass\n").body
    assert isinstance(one, ast.FunctionDef) and isinstance(two, ast.FunctionDef)
    values = frozenset({Func("z.py", one), Func("a.py", two), Func("a.py", one), Ext("torch.x"),
                        ModRef("m.py"), "text", 3})
    first = ordered(values)
    assert first[:3] == [Func("a.py", one), Func("a.py", two), Func("z.py", one)]
    assert first[3:5] == [ModRef("m.py"), Ext("torch.x")]
    assert ordered(frozenset(reversed(first))) == first
