"""Which target a tree's JIT builds for a GPU with a CUDA release, and whether the GPU
runs it.

flashinfer at ad893cfab (#2725) builds SM 12.x for ``compute_120f`` from CUDA 13.0 and
for ``compute_120a`` below it; ``sm_120a`` runs on 12.0 alone, so with CUDA 12.9 a GB10
(12.1) JIT-compiles a module it cannot load: "no kernel image is available"
(flashinfer#2839, fixed at e2f821b8c by building ``120f`` from CUDA 12.9).  The places
are :mod:`~contrib.analysis.jitsites`'; here each fill the GPU decides (its value
differs on a GPU of another major) is run on the target with the release asked
(:class:`~contrib.analysis.archeval.TreeEval` given the toolkit), the f-string
formatted with what it gives, and the images the ``-gencode`` flags embed judged by
CUDA's rules (:mod:`~contrib.analysis.cudacompat`), with whether that release's nvcc
builds them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, NamedTuple

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archrun import run_body
from contrib.analysis.archtoolkit import WHEEL_RELEASES, Cuda, release_name
from contrib.analysis.archvalues import (
    ANY,
    Cap,
    Frame,
    Func,
    Toolkit,
    Values,
    index,
    ordered,
    vague,
)
from contrib.analysis.cudacompat import Image, ImageKind, ImageVerdict, judge, nvcc_builds
from contrib.analysis.jitsites import MAY_FORMAT, Fill, Site, sites
from contrib.analysis.pymodules import Reader, targets_of
from contrib.analysis.pywalk import walk
from contrib.arch import NVIDIA_FAMILIES, Arch


class Where(NamedTuple):
    """Where a target is chosen; ``says``: the message of the ``raise`` refusing one."""

    path: str
    line: int
    function: str
    says: str = ""


# `-gencode=arch=compute_120a,code=sm_120a`, `code=[sm_90a,compute_90a]`
_GENCODE = re.compile(r"arch=(?P<arch>compute_\w+),\s*code=(?P<code>\[[^\]]*\]|[\w]+)")


class BuildVerdict(StrEnum):
    """What a GPU gets from the JIT's build with one release (worst first)."""

    REFUSES = "refuses"  # the tree's choice raises with this release
    NVCC_REFUSES = "nvcc-refuses"  # this release's nvcc does not know a target built
    NO_IMAGE = "no-image"  # built, and the GPU runs none of it
    RUNS = "runs"  # its SASS, or PTX the driver compiles


@dataclass(frozen=True)
class Built:
    """What the JIT builds for the GPU with CUDA ``cuda`` (``12.9``; ``new``: a release
    new enough for every test), and the verdict; ``compute``: the virtual archs nvcc
    compiles for (``compute_120a``), ``targets``: the images it embeds (``sm_120a``;
    ``compute_90`` for PTX), ``runs``: the one the GPU runs, ``says``: the message the
    tree raises where it refuses to build."""

    cuda: str
    verdict: BuildVerdict
    compute: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    runs: str = ""
    says: str = ""  # what the tree's `raise` says where it refuses

    @property
    def crashes(self) -> bool:
        """Whether a module built so fails the GPU (no image, or no build at all)."""
        return self.verdict is not BuildVerdict.RUNS


@dataclass(frozen=True)
class JitTarget:
    """The JIT's target for ``arch``: where it is chosen (``path``:``line``, in
    ``function``) and formatted into nvcc's flags (``flags_path``:``flags_line``), what
    the release asked builds (``built``) and what the releases PyTorch ships wheels for
    build (``others``)."""

    arch: str
    path: str
    line: int
    function: str
    flags_path: str
    flags_line: int
    built: Built
    others: tuple[Built, ...] = ()

    @property
    def crashes(self) -> bool:
        return self.built.crashes


class JitReading:
    """The JIT targets of one tree, read on first use and kept per (arch, release)."""

    def __init__(self, read: Reader, paths: Iterable[str]) -> None:
        self.read = read
        self.paths = [p for p in paths if p.endswith(".py")]
        self._trees: dict[str, ast.Module | None] = {}
        self._sites: list[Site] | None = None
        self._kept: dict[tuple[str, str], JitTarget | None] = {}

    def sites(self, ev: TreeEval) -> list[Site]:
        """Where the tree formats an nvcc target (:func:`~contrib.analysis.jitsites.sites`)."""
        if self._sites is None:
            found: list[Site] = []
            for path in self.paths:
                if MAY_FORMAT.search(self.read(path) or "") and (module := ev.module(path)):
                    found += sites(path, module[0])
            self._sites = found
        return self._sites

    def target(self, arch: Arch, cuda: Cuda) -> JitTarget | None:
        """What the JIT builds for ``arch`` with ``cuda``; None where no target the
        tree formats is chosen by the GPU (or none can be read)."""
        key = (arch.name, cuda.name)
        if key not in self._kept:
            self._kept[key] = self._target(arch, cuda)
        return self._kept[key]

    def _target(self, arch: Arch, cuda: Cuda) -> JitTarget | None:
        read = self._built(arch, cuda.version)
        if read is None:
            return None
        built, where, site = read
        others = []
        for release in WHEEL_RELEASES:
            other = self._built(arch, release) if release != cuda.version else read
            if other is not None:
                others.append(other[0])
        return JitTarget(arch.name, where.path, where.line, where.function, site.path,
                         site.line, built, tuple(others))

    def _built(self, arch: Arch, version: tuple[int, int] | None
               ) -> tuple[Built, Where, Site] | None:
        """What the release ``version`` builds for ``arch``, where it is chosen, and
        the site formatting it; None where the GPU chooses nothing read here."""
        ev = TreeEval(self.read, self.paths, self._trees, toolkit=Toolkit(version))
        name = release_name(version)
        probe = next(c for c in NVIDIA_FAMILIES if c[0] != arch.major)
        for site in self.sites(ev):
            for fill in site.fills:
                mine = _fill(ev, fill, (arch.major, arch.minor))
                if mine is None or _same(mine[0], _fill(ev, fill, probe)):
                    continue  # not reached, or the same on a GPU of another major
                values, where = mine
                if not values:
                    return Built(name, BuildVerdict.REFUSES, says=where.says), where, site
                built = _one(name, [_formatted(ev, site, v) for v in ordered(values)], arch, version)
                if built is not None:
                    return built, where, site
        return None


def _one(name: str, each: list[list[str] | None], arch: Arch,
         version: tuple[int, int] | None) -> Built | None:
    """What is built where the GPU's choice may be any of several (each one's flags):
    their verdict where they share one, else nothing decided (None)."""
    if not each or any(flags is None for flags in each):
        return None
    judged = [_judged(name, flags, arch, version) for flags in each if flags is not None]
    if any(b is None for b in judged) or len({b.verdict for b in judged if b}) != 1:
        return None
    return judged[0] if len(judged) == 1 else _judged(
        name, sorted({f for flags in each if flags for f in flags}), arch, version)


def _same(values: Values, other: tuple[Values, Where] | None) -> bool:
    return other is not None and other[0] == values


def _fill(ev: TreeEval, fill: Fill, cap: Cap) -> tuple[Values, Where] | None:
    """What ``fill`` adds on the GPU ``cap`` (its function run, read at the statement),
    and where it is chosen: the ``return`` of the function it calls that gives it, else
    the statement itself; None where no path reaches it."""
    ev.cap = cap
    function = fill.function
    states = _run(ev, Func(fill.path, function), (), (), [fill.statement])[fill.statement]
    if not states:
        return None
    where = Where(fill.path, fill.statement.lineno, _qualname(fill.owner, function))
    out: set[Any] = set()
    scope = ev.function_scope(function)
    for state in states:
        frame = Frame(fill.path, scope, state, id(function))
        called = _called(ev, fill, frame)
        if called is None:
            out |= ev.eval(fill.element, frame)
            continue
        out |= called[0]
        if called[1].line:
            where = called[1]
    return frozenset(out), where


def _called(ev: TreeEval, fill: Fill, frame: Frame) -> tuple[Values, Where] | None:
    """The values a fill's call of a tree function (``self._normalize_cuda_arch(major,
    minor)``) returns, and where: the first ``return`` reached, else the first
    ``raise`` (line 0: neither is); None for anything else."""
    node = fill.element
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    func = _method(fill, node.func)
    name = _qualname(fill.owner, func.node) if func is not None else ""
    if func is None:
        found = [v for v in ev.eval(node.func, frame) if isinstance(v, Func)]
        func = found[0] if len(found) == 1 else None
        name = func.node.name if func is not None else ""
    if func is None:
        return None
    args = tuple(ev.eval(a, frame) for a in node.args)
    if _bound_method(fill, node.func, func):
        args = (ANY, *args)
    kwargs = tuple((k.arg, ev.eval(k.value, frame)) for k in node.keywords if k.arg)
    ends = [n for n in walk(func.node) if isinstance(n, ast.Return | ast.Raise)]
    out: set[Any] = set()
    reached: dict[bool, Where] = {}  # the first `return` reached, the first `raise`
    scope = ev.function_scope(func.node)
    for statement, seen in _run(ev, func, args, kwargs, ends).items():
        value = statement.value if isinstance(statement, ast.Return) else None
        for state in seen:
            if value is not None:
                out |= ev.eval(value, Frame(func.path, scope, state, id(func.node)))
            reached.setdefault(value is not None, Where(func.path, statement.lineno, name,
                                                        _message(statement)))
    return frozenset(out), reached.get(True) or reached.get(False) or Where(func.path, 0, name)


def _message(statement: ast.stmt) -> str:
    """``"SM 12.x requires CUDA >= 12.9"`` of ``raise RuntimeError("...")``; "" else."""
    exc = statement.exc if isinstance(statement, ast.Raise) else None
    first = exc.args[0] if isinstance(exc, ast.Call) and exc.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""


def _run(ev: TreeEval, func: Func, args: tuple[Values, ...],
         kwargs: tuple[tuple[str, Values], ...], statements: list[Any]
         ) -> dict[Any, list[dict[str, Values]]]:
    """``func`` run with ``args``: the names at each of ``statements`` as paths reach it."""
    env = ev.bind(func, args, kwargs) or {}
    watch: dict[int, list[dict[str, Values]]] = {id(s): [] for s in statements}
    frame = Frame(func.path, ev.function_scope(func.node), env, id(func.node))
    run_body(ev, func.node.body, frame, watch)
    return {s: watch[id(s)] for s in statements}


def _method(fill: Fill, callee: ast.expr) -> Func | None:
    """``self.m`` / ``cls.m`` / ``Owner.m`` of the fill's class: its method ``m``."""
    owner = fill.owner
    if owner is None or not isinstance(callee, ast.Attribute) \
            or not isinstance(callee.value, ast.Name) \
            or callee.value.id not in ("self", "cls", owner.name):
        return None
    found = next((item for item in owner.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                  and item.name == callee.attr), None)
    return Func(fill.path, found) if found is not None else None


def _bound_method(fill: Fill, callee: ast.expr, func: Func) -> bool:
    """Whether calling ``func`` through ``callee`` passes the instance (or class) first."""
    if fill.owner is None or not isinstance(callee, ast.Attribute) \
            or not isinstance(callee.value, ast.Name) or callee.value.id == fill.owner.name:
        return False
    return not any(isinstance(d, ast.Name) and d.id == "staticmethod"
                   for d in func.node.decorator_list)


def _qualname(owner: ast.ClassDef | None, function: ast.AST) -> str:
    name = getattr(function, "name", "?")
    return f"{owner.name}.{name}" if owner is not None else name


def _formatted(ev: TreeEval, site: Site, value: Any) -> list[str] | None:
    """The flags ``site`` formats for ``value`` (the loop's item, or the f-string's own
    value); None when it is not a known text."""
    texts = [value]
    if site.target is not None:
        scope = ev.function_scope(site.function)
        env = {name: frozenset({_pick(value, where)}) for name, where in targets_of(site.target)}
        texts = list(ev.eval(site.fstring, Frame(site.path, scope, env, id(site.function))))
    if not texts or any(not isinstance(t, str) or vague(t) for t in texts):
        return None
    return sorted(texts)


def _pick(value: Any, where: tuple[int, ...]) -> Any:
    for n in where:
        value = index(value, n)
    return value


def images_of(flags: Iterable[str]) -> tuple[list[str], list[Image]]:
    """The virtual archs of ``-gencode`` flags and the images nvcc embeds for them:
    each ``code=`` target, SASS for ``sm_``, PTX for ``compute_``."""
    virtual: list[str] = []
    found: list[Image] = []
    for flag in flags:
        for match in _GENCODE.finditer(flag):
            virtual.append(match["arch"])
            for code in match["code"].strip("[]").split(","):
                kind = ImageKind.PTX if code.strip().startswith("compute_") else ImageKind.SASS
                image = Image.parse(kind, code.strip())
                if image is not None:
                    found.append(image)
    return list(dict.fromkeys(virtual)), list(dict.fromkeys(found))


def _judged(name: str, flags: list[str], arch: Arch, version: tuple[int, int] | None
            ) -> Built | None:
    """What ``flags`` build for ``arch``; None where they embed no image read here (an
    ``-arch=`` form, not a ``-gencode``)."""
    virtual, images = images_of(flags)
    if not images:
        return None
    built = Built(name, BuildVerdict.RUNS, tuple(virtual), tuple(i.target for i in images))
    if version is not None and any(nvcc_builds(i, version) is False for i in images):
        return replace(built, verdict=BuildVerdict.NVCC_REFUSES)
    judgement = judge(images, arch)
    if judgement.verdict is ImageVerdict.NO_IMAGE or judgement.image is None:
        return replace(built, verdict=BuildVerdict.NO_IMAGE)
    return replace(built, runs=judgement.image.target)
