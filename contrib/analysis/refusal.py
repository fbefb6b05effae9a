"""When Python code refuses: one vocabulary of refusing calls, and the rules read with it.

A refusal is a ``raise``, an ``assert`` that fails, or a call that ends the run or
the test (:data:`REFUSING_CALLS`: ``pytest.skip``, ``sys.exit``, ``os._exit``,
``pytest.fail``, ``pytest.xfail``, ``abort``).  Where it stands in a branch says
what the branch is, and each reader asks the question it needs:

* :func:`gives_up`: the gate parser's skip: the branch's first act refuses, or
  hands back nothing (``return``, ``return None``/``False``, a returned reason)
  after at most a message (``if not ok: print(...); pytest.skip(...)``);
* :func:`refuses`: the effect's refusing branch: it raises first, or calls a refusal
  within its first statements (a ``return None`` there is a value, not a refusal:
  the caller decides);
* :func:`ends_refusing`: a walk's way not taken: the branch ends refusing, or
  ends returning nothing;
* :func:`may_stop`: a call of the function may not return.
"""

from __future__ import annotations

import ast

from contrib.analysis.pywalk import callee_name, own_nodes

REFUSING_CALLS = frozenset({"skip", "exit", "_exit", "abort", "fail", "xfail"})
_SAID_FIRST = 3  # statements a refusal may follow (messages before it)


def refusing_call(node: ast.AST) -> bool:
    """A call of :data:`REFUSING_CALLS` (``pytest.skip(...)``, ``sys.exit(1)``)."""
    return isinstance(node, ast.Call) and callee_name(node) in REFUSING_CALLS


def refusing_statement(statement: ast.stmt) -> bool:
    """A ``raise``, or a refusing call standing as a statement."""
    return isinstance(statement, ast.Raise) or (
        isinstance(statement, ast.Expr) and refusing_call(statement.value))


def _returns_nothing(statement: ast.stmt, reasons: bool = False) -> bool:
    """``return``, ``return None``, ``return False``; with ``reasons``, a returned
    sentence too (``return "not supported on this GPU"``, not ``return "trtllm"``)."""
    if not isinstance(statement, ast.Return):
        return False
    value = statement.value
    return value is None or (isinstance(value, ast.Constant) and (
        value.value in (None, False)
        or reasons and isinstance(value.value, str) and " " in value.value))


def refuses(body: list[ast.stmt]) -> bool:
    """The branch refuses: its first statement raises, or it makes a refusing call after
    at most a message or two (a ``raise`` after other work is one way out of several:
    ``if backend != "cudnn": return False`` then ``raise``)."""
    return bool(body) and (isinstance(body[0], ast.Raise) or any(
        isinstance(s, ast.Expr) and refusing_call(s.value) for s in body[:_SAID_FIRST]))


def gives_up(body: list[ast.stmt]) -> bool:
    """The branch gives up (a skip's body): it refuses (:func:`refuses`), or its first
    statement hands back nothing or a reason."""
    return refuses(body) or (bool(body) and _returns_nothing(body[0], reasons=True))


def ends_refusing(branch: ast.AST | list[ast.stmt]) -> bool:
    """The branch ends refusing, or returning nothing (None, False: "not here")."""
    if not isinstance(branch, list) or not branch:
        return False
    return refusing_statement(branch[-1]) or _returns_nothing(branch[-1])


def may_stop(function: ast.AST | None) -> bool:
    """Whether a call of ``function`` may not return: its own body raises, asserts, or
    calls ``pytest.skip``, ``sys.exit`` and the like (flashinfer's
    ``_skip_if_cp_unsupported`` skips on some GPUs, returns on others)."""
    return function is not None and any(
        isinstance(n, ast.Raise | ast.Assert) or refusing_call(n) for n in own_nodes(function))
