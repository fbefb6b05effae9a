"""What one call, one statement or one read of a tree's code says, for the walk.

A call is read to what it runs: the callee's definition as the tree's arch evaluator
resolves it (:class:`~contrib.analysis.reach.tree.PyTree`), the methods a class of the
tree runs when it is made, a method of an object made there, or, when the evaluator
cannot resolve it (``layernorm.forward_with_fusion(x)``), the tree's methods of that
name; a call landing in one of the lower package's modules
(``flashinfer.comm.trtllm_allreduce_fusion``) is an :class:`Outside`, with the strings
it is passed by keyword.  An assignment or a returned dict (sglang's passes return
``{"flashinfer_allreduce_fusion_backend": "auto"}``) sets a setting; a test reads one,
enabled by some values only (:func:`may_hold`).  :class:`Reading` keeps, per file, what
these questions need (parents, names, the files naming a word), shared by the walks of
every :class:`~contrib.audit.stack.mode.Mode`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from contrib.analysis.archvalues import Ext, Frame, Func, ordered
from contrib.analysis.pywalk import callee_name, parents, walk
from contrib.analysis.reach.objects import Methods, constructed, instance_methods
from contrib.analysis.reach.tree import PyTree

_WORD = re.compile(r"[A-Za-z_]\w{3,}")

Function = ast.FunctionDef | ast.AsyncFunctionDef


class Handed(str):
    """A step of a way that is a backend's name handed on as a value (``"trtllm_mha"``):
    the code picks it there, under conditions the walk does not weigh (sglang's choice
    when none is given).  A string, shown as the other steps are."""

    __slots__ = ()


class Called(str):
    """A step of a way that is a call: the name of the function called, shown as the
    other steps are, and where the call is (``site``: path and line), for a reader
    asking under which test the way went there."""

    site: tuple[str, int]

    def __new__(cls, name: str, site: tuple[str, int]) -> Called:
        step = super().__new__(cls, name)
        step.site = site
        return step


@dataclass(frozen=True)
class Outside:
    """A call into the lower package, and the steps from the gate to it."""

    dotted: str
    via: tuple[str, ...]
    # the strings it is passed by keyword, with their keywords (``backend="cublas"``; a
    # name the walk saw bound to a string: ``fmha_backend = "cutlass"`` then
    # ``Wrapper(backend=fmha_backend)``)
    keys: tuple[tuple[str, str], ...] = ()
    site: tuple[str, int] = field(default=("", 0), compare=False)  # the call's path, line

    def sites(self) -> list[tuple[str, int]]:
        """Where each call of its way is, the call into the lower package last (those
        the walk made; a flag's or a caller's step has none)."""
        return [s.site for s in self.via if isinstance(s, Called)] + [self.site]


@dataclass(frozen=True)
class Block:
    """Code a walk runs: ``code`` of ``holder`` in ``path``, and the steps that led there."""

    path: str
    holder: Function | None
    code: tuple[ast.AST, ...]
    via: tuple[str, ...]


class Reading:
    """The reading of one tree's code, kept per file; ``texts``: the tree's runtime
    files' texts, read when first asked; ``roots``: the lower package's top-level
    names."""

    def __init__(self, ev: PyTree, texts: Callable[[], dict[str, str]], roots: set[str]) -> None:
        self.ev, self.texts, self.roots = ev, texts, roots
        self._parents: dict[str, dict[int, ast.AST]] = {}
        self._index: dict[str, dict[str, list[ast.AST]]] = {}  # per file: named
        self._words: dict[str, list[str]] | None = None  # identifier -> files naming it
        self._naming: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}  # modules_naming
        self._methods = Methods(ev, texts)  # methods by name, of the files walked

    def call(self, block: Block, frame: Frame, call: ast.Call,
             bound: dict[str, str]) -> Iterator[Outside | Block]:
        """What ``call`` in ``block`` runs (``frame``: its code's), each a step below
        ``block``; ``bound``: the names the walk saw set to a string."""
        func = call.func.value if isinstance(call.func, ast.Subscript) else call.func
        self.ev.cap = (0, 0)
        values = ordered(self.ev.eval(func, frame))
        resolved = False
        site = (block.path, call.lineno)
        for value in values:
            if isinstance(value, Func):
                resolved = True
                yield Block(value.path, value.node, tuple(value.node.body),
                             (*block.via, Called(value.node.name, site)))
            elif isinstance(value, Ext) and value.dotted.split(".")[0] in self.roots:
                resolved = True
                yield Outside(value.dotted, block.via, passed(call, bound), site)
        if not resolved:  # a class of the tree made: what constructing it runs
            for method in constructed(self.ev, func, frame):
                resolved = True
                yield Block(method.path, method.node, tuple(method.node.body),
                             (*block.via, Called(method.node.name, site)))
        if not resolved and isinstance(func, ast.Attribute):  # a method of an object made here
            for method in instance_methods(self.ev, func, frame):
                resolved = True
                yield Block(method.path, method.node, tuple(method.node.body),
                             (*block.via, Called(method.node.name, site)))
        if not resolved and isinstance(func, ast.Attribute):
            for method in self._methods.named(func.attr):
                yield Block(method.path, method.node, tuple(method.node.body),
                             (*block.via, Called(method.node.name, site)))

    def frame(self, path: str, holder: Function | None) -> Frame:
        """The evaluator's frame for code of ``holder`` (module level when None)."""
        if holder is None:
            return Frame(path)
        return Frame(path, self.ev.function_scope(holder), None, id(holder))

    def parents(self, path: str) -> dict[int, ast.AST]:
        """Each node's parent in the module at ``path`` (kept)."""
        if path not in self._parents:
            module = self.ev.module(path)
            self._parents[path] = {} if module is None else parents(module[0])
        return self._parents[path]

    def holder(self, path: str, node: ast.AST) -> Function | None:
        """The innermost function around ``node``."""
        parents = self.parents(path)
        up = parents.get(id(node))
        while up is not None and not isinstance(up, Function):
            up = parents.get(id(up))
        return up if isinstance(up, Function) else None

    def modules_naming(self, word: str, pattern: re.Pattern[str], most: int,
                       skip: tuple[str, ...] = ()) -> list[tuple[str, ast.Module]]:
        """The parsed modules whose text matches ``pattern`` (around identifier ``word``),
        but those under the folders ``skip``; none when more than ``most`` files name it:
        a name that common is no lead."""
        if self._words is None:
            self._words = {}
            for path, text in self.texts().items():
                for name in set(_WORD.findall(text)):
                    self._words.setdefault(name, []).append(path)
        key = (word, pattern.pattern, skip)
        paths = self._naming.get(key)
        if paths is None:  # one search per word and pattern: each choice of a setting asks
            texts = self.texts()
            paths = self._naming[key] = [p for p in self._words.get(word, ())
                                         if not p.startswith(skip) and pattern.search(texts[p])]
        if len(paths) > most:
            return []
        modules = [(p, self.ev.module(p)) for p in paths]
        return [(p, m[0]) for p, m in modules if m is not None]

    def named(self, path: str, module: ast.Module) -> dict[str, list[ast.AST]]:
        """The module's attribute reads (``x.attr``), ``getattr(x, "attr")`` calls,
        calls by callee name and calls reading a variable by its name, each under its name, in the order of one walk (kept: a
        tree's walks ask one module for many names)."""
        index = self._index.get(path)
        if index is None:
            index = self._index[path] = {}
            for node in walk(module):
                if isinstance(node, ast.Attribute):
                    index.setdefault(node.attr, []).append(node)
                elif isinstance(node, ast.Call):
                    name = callee_name(node)
                    if name:
                        index.setdefault(name, []).append(node)
                    variable = env_name(node)  # get_bool_env_var("SGLANG_X")
                    if variable is not None:
                        index.setdefault(variable, []).append(node)
                    if (isinstance(node.func, ast.Name) and node.func.id == "getattr"
                            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                            and isinstance(node.args[1].value, str)
                            and node.args[1].value != name):
                        index.setdefault(node.args[1].value, []).append(node)
        return index


def decides_with(statement: ast.stmt, call: ast.Call) -> bool:
    """Whether ``statement`` decides with what ``call`` returns: an ``if`` testing it,
    or an assignment binding it to a name the code after reads."""
    if isinstance(statement, ast.If | ast.While):
        return any(node is call for node in ast.walk(statement.test))
    return isinstance(statement, ast.Assign) and all(
        isinstance(t, ast.Name) for t in statement.targets)


def passed(call: ast.Call, bound: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The strings ``call`` passes by keyword: literals, and names ``bound`` to one."""
    found = []
    for k in call.keywords:
        value = (k.value.value if isinstance(k.value, ast.Constant)
                 else bound.get(ast.unparse(k.value)))
        if k.arg is not None and isinstance(value, str):
            found.append((k.arg, value))
    return tuple(found)


def setting(value: ast.expr, strings: bool) -> object | None:
    """What an assignment sets that enables code reading it: True, or (``strings``) a
    non-empty string (a backend's name); None for anything else."""
    if isinstance(value, ast.Constant) and (value.value is True or (
            strings and isinstance(value.value, str) and value.value)):
        return value.value
    return None


def settings(table: ast.Dict) -> Iterator[tuple[str, object]]:
    """The attributes a returned dict of settings sets, with their values (True or a
    string): sglang's ``@register_post_process`` passes return ``{"flashinfer_allreduce_
    fusion_backend": "auto"}``, which the server's arguments take as attributes."""
    for key, value in zip(table.keys, table.values, strict=True):
        if (isinstance(key, ast.Constant) and isinstance(key.value, str)
                and key.value.isidentifier() and isinstance(value, ast.Constant)
                and (value.value is True or (isinstance(value.value, str) and value.value))):
            yield key.value, value.value


def reads(node: ast.AST, attr: str, getattr_too: bool) -> bool:
    """Whether ``node`` reads attribute ``attr``: ``x.attr``, or ``getattr(x, "attr"...)``."""
    if isinstance(node, ast.Attribute):
        return node.attr == attr and isinstance(node.ctx, ast.Load)
    return (getattr_too and isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and node.args[1].value == attr)


def may_hold(read: ast.AST, parent: ast.AST | None, value: object) -> bool:
    """Whether a test reading ``read`` is enabled by its being set to ``value``: a flag
    (True) is read by any test; a string only by a test that it is set (``is not
    None``, an ``if`` on it alone) or that it is this one (``==``/``in`` of strings
    holding it); not by ``!= "other"`` (what is done for any other setting) nor by
    code using its value (``backends = args.attention_backend or ...``: the string's
    own way, read where it is chosen)."""
    if value is True:
        return True
    if isinstance(parent, ast.If | ast.While | ast.IfExp) and parent.test is read:
        return True
    if not isinstance(parent, ast.Compare) or len(parent.ops) != 1:
        return False
    op, other = parent.ops[0], parent.comparators[0] if parent.left is read else parent.left
    if isinstance(other, ast.Constant) and other.value is None:
        return isinstance(op, ast.IsNot | ast.NotEq)
    if _never_a_string(other):
        return False  # the setting's converted value (`kv_cache_dtype == torch.float8_e4m3fn`)
    literals = {v.value for v in ([other] if isinstance(other, ast.Constant) else getattr(
        other, "elts", [])) if isinstance(v, ast.Constant)}
    if not literals:
        return True
    return isinstance(op, ast.Eq | ast.In) and value in literals


# objects of a library that are never a string: torch's dtypes and devices
# (`torch.float8_e4m3fn`, `torch.bfloat16`)
_NON_STRING_ROOTS = frozenset({"torch"})


def _never_a_string(node: ast.expr) -> bool:
    """Whether ``node`` names an object that no string setting equals: an attribute of
    :data:`_NON_STRING_ROOTS` (a dtype), or a tuple or list of them.  A test of a value
    against one reads what the setting was converted to (sglang's ``--kv-cache-dtype
    auto`` becomes the model's dtype, tested as ``kv_cache_dtype ==
    torch.float8_e4m3fn``), which the string's own test does not decide."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    if not items:
        return False
    for item in items:
        root = item
        while isinstance(root, ast.Attribute):
            root = root.value
        if not (isinstance(item, ast.Attribute) and isinstance(root, ast.Name)
                and root.id in _NON_STRING_ROOTS):
            return False
    return True


# -- the environment -----------------------------------------------------------------------

# a call reading a variable by its name: os.getenv, os.environ.get, sglang's
# get_bool_env_var / get_int_env_var
_ENV_CALL = re.compile(r"(?:^|\.)(?:getenv|environ\.get|get_\w*env\w*)$")
_ENV_FIELD_READS = frozenset({"get", "is_set"})  # sglang's envs.SGLANG_X.get()
_ENV_FIELD_SETS = frozenset({"set", "override"})  # envs.SGLANG_X.set(True)


def is_variable(name: str) -> bool:
    """Whether a setting's name is an environment variable's (upper case, as POSIX names
    them: ``SGLANG_ENABLE_JIT_DEEPGEMM``), read through the environment rather than as an
    attribute of the settings."""
    return name.isupper() and name.isidentifier()


def env_name(call: ast.Call) -> str | None:
    """The variable a call reads by name (``get_bool_env_var("SGLANG_X")``,
    ``os.getenv("X", "0")``), or None."""
    first = call.args[0] if call.args else None
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)
            and is_variable(first.value)):
        return None
    func = call.func
    dotted = ast.unparse(func) if isinstance(func, ast.Name | ast.Attribute) else ""
    return first.value if _ENV_CALL.search(dotted) else None


def env_read(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    """Where ``node`` (naming a variable) reads it: the call reading it by name, or the
    ``.get()`` (``.is_set()``) of a declared field (``envs.SGLANG_X.get()``), whose value
    the code tests; the field named alone is read too; None for a call setting it
    (``envs.SGLANG_X.set(True)``) or anything else."""
    if isinstance(node, ast.Call):
        return node if env_name(node) else None
    if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)):
        return None
    method, call = parents.get(id(node)), None
    if isinstance(method, ast.Attribute) and method.value is node:
        call = parents.get(id(method))
        if not (isinstance(call, ast.Call) and call.func is method):
            return None
        return call if method.attr in _ENV_FIELD_READS else None
    return node


def env_set(call: ast.Call) -> tuple[str, object] | None:
    """The variable a call sets, and the value a read of it then sees (True, or a
    string): ``envs.SGLANG_X.set(True)``, ``envs.SGLANG_X.override("triton")``."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _ENV_FIELD_SETS
            and isinstance(func.value, ast.Attribute) and is_variable(func.value.attr)
            and len(call.args) == 1 and isinstance(call.args[0], ast.Constant)):
        return None
    value = call.args[0].value
    if value is True or value in ("1", "true", "True"):
        return func.value.attr, True
    return (func.value.attr, value) if isinstance(value, str) and value else None
