"""The nvcc flags an upstream's own build passes, read from its build code at the commit.

A unit compiled without them is not the unit the upstream builds:
flashinfer v0.5.3's units call constexpr host functions from device code,
which nvcc accepts only with ``--expt-relaxed-constexpr``, the flag its JIT
(``flashinfer/jit/cpp_ext.py``) passes.  What is read, wherever in the file
it is written:

- a Python build file (the files a profile names: flashinfer's
  ``jit/core.py``, ``jit/cpp_ext.py``, ``compilation_context.py``): the string
  literals bound to a name that says CUDA or nvcc flags (``cuda_cflags``,
  ``COMMON_NVCC_FLAGS``), by ``=``, ``+=``, ``.append`` or ``.extend``, in any
  function (``build_cuda_cflags`` at the tip, ``generate_ninja_build_for_op``
  at v0.5.3), a debug branch's left out, and a list named for one arch
  (``sm90a_nvcc_flags``: the modules for that arch pass it) too;
- a ``CMakeLists.txt`` (sglang's sgl-kernel, :mod:`contrib.analysis.cmakeflags`):
  the flags of the targets that compile the unit.

Only flags that change the device code are kept (``-D``, ``-U``, ``-std=``,
``--expt-*``, fast math); ``-O3``, ``--threads``, ``-gencode`` are not.  Each
file is read once per blob (its git blob id).  Where nothing is read, the
:data:`ESSENTIALS` are used and the origin says so.
"""

from __future__ import annotations

import ast
import hashlib
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from contrib.analysis.pyparse import parse_python
from contrib.analysis.tree import SourceTree

# Flags that change what the device code compiles to (PTX).
PTX_FLAG = re.compile(r"^(?:-D\w+(?:=\S*)?|-U\w+|-std=\S+|--expt-[\w-]+|-use_fast_math|"
                      r"--use_fast_math|-ftz=\S+|-prec-\w+=\S+|-fmad=\S+)$")
# A name a build binds nvcc's flags to: cuda_cflags, COMMON_NVCC_FLAGS, SGL_KERNEL_CUDA_FLAGS.
FLAG_NAME = re.compile(r"(?:cuda|nvcc)\w*flags|flags\w*(?:cuda|nvcc)", re.I)
_ARCH_NAME = re.compile(r"(?:^|_)sm_?\d+", re.I)
# What every CUDA C++ build of these upstreams passes, used only when nothing is read.
ESSENTIALS = ("-std=c++17", "--expt-relaxed-constexpr")


@dataclass(frozen=True)
class NvccFlag:
    """One flag and where the build code says it (``file:line``)."""

    text: str
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "contrib"


@dataclass(frozen=True)
class BuildFlags:
    """The flags a unit compiles with, as read; ``fallback`` when none was read."""

    flags: tuple[NvccFlag, ...]
    fallback: bool = False

    def texts(self) -> list[str]:
        return [f.text for f in self.flags]

    def files(self) -> list[str]:
        return list(dict.fromkeys(f.file for f in self.flags if f.file))

    def origin(self) -> str:
        """Where the flags came from, for the stage's details and the audit's JSON."""
        if self.fallback:
            return ("contrib's nvcc essentials (" + " ".join(ESSENTIALS) +
                    "): no nvcc flag found in the upstream's build code")
        return "read from " + ", ".join(self.files())


def essentials() -> BuildFlags:
    """:data:`ESSENTIALS`, marked as the fallback."""
    return BuildFlags(tuple(NvccFlag(f, "", 0) for f in ESSENTIALS), fallback=True)


_CACHE: dict[tuple[str, str], object] = {}
_LOCK = threading.Lock()
T = TypeVar("T")


def blob_id(text: str) -> str:
    """The git blob id of ``text`` (utf-8): a file read once per blob."""
    data = text.encode("utf-8", errors="replace")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def per_blob(kind: str, text: str, read: Callable[[str], T]) -> T:
    """``read(text)``, once per (kind, blob) in this process."""
    key = (kind, blob_id(text))
    with _LOCK:
        if key in _CACHE:
            return cast(T, _CACHE[key])
    value = read(text)
    with _LOCK:
        _CACHE[key] = value
    return value


def python_flags(text: str) -> tuple[tuple[str, int], ...]:
    """(flag, line) of every device-code flag a Python build file binds to a CUDA/nvcc
    flags name, in file order, unique; cached per blob."""
    return per_blob("py", text, _read_python)


def _read_python(text: str) -> tuple[tuple[str, int], ...]:
    module = parse_python("", text)
    if not isinstance(module, ast.Module):
        return ()
    found: dict[str, int] = {}
    for node in _live(module.body):
        for value in _flag_values(node):
            for item in ast.walk(value):
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    flag = item.value.strip()
                    if PTX_FLAG.match(flag):
                        found.setdefault(flag, item.lineno)
    return tuple(found.items())


def _live(body: Sequence[ast.stmt]) -> Iterable[ast.AST]:
    """Every node of ``body``, a debug branch's left out (``if debug:`` adds -G, -O0...:
    not what ships; its ``else`` is)."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and "debug" in ast.unparse(node.test).lower():
            stack.extend(reversed(node.orelse))
        else:
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _flag_values(node: ast.AST) -> list[ast.AST]:
    """The expressions ``node`` adds to a flags name: ``X = [...]``, ``X += [...]``,
    ``X.append("...")``, ``X.extend([...])``."""
    if isinstance(node, ast.Assign) and any(_is_flag_name(t) for t in node.targets):
        return [node.value]
    if isinstance(node, ast.AugAssign | ast.AnnAssign) and _is_flag_name(node.target) \
            and node.value is not None:
        return [node.value]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("append", "extend", "insert") and _is_flag_name(node.func.value):
        return list(node.args)
    return []


def _is_flag_name(node: ast.AST) -> bool:
    """A name of nvcc's flags for every build: not one for an arch (flashinfer's
    ``sm90a_nvcc_flags``, which the SM90 modules alone pass)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return bool(FLAG_NAME.search(name)) and not _ARCH_NAME.search(name)


def read_python(tree: SourceTree, paths: Iterable[str]) -> BuildFlags:
    """The flags the Python build files ``paths`` bind, in their order; the fallback
    when none holds any."""
    flags: list[NvccFlag] = []
    seen: set[str] = set()
    for path in paths:
        text = tree.read_text(path)
        for flag, line in python_flags(text) if text else ():
            if flag not in seen:
                seen.add(flag)
                flags.append(NvccFlag(flag, path, line))
    return BuildFlags(tuple(flags)) if flags else essentials()


def merged(read: BuildFlags, *more: Iterable[str]) -> list[str]:
    """The read flags, then each of ``more`` (a gate's ``extra_cuda_cflags``,
    ``validation.ptx_flags``) not already there."""
    out = read.texts()
    for flags in more:
        out += [f for f in flags if f not in out]
    return out
