"""What a walk can end at that classes a gate, and what a tree function is.

An :class:`Endpoint` is where a walk stops because what it found decides a class:
a JIT builder (its units are read), a Triton or CuTe DSL kernel, prebuilt kernel
binaries fetched at run time (:func:`fetches_cubins`), an op built ahead of time, a
vendor library's call, or code that only checks.  :class:`Facts` keeps
what each function of a tree is, whatever GPU runs it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Ext, Frame, Func
from contrib.analysis.gates import KEYWORD
from contrib.analysis.hostarch import CUTE_FAMILIES
from contrib.analysis.jitsources import module_strings
from contrib.analysis.pywalk import callee_name, name_of, walk
from contrib.analysis.reach.objects import classes_of

_ARCH_FLAG = re.compile(r"\b(?:compute|sm)_(\d{2,3})[af]?\b")
_FLAG_TEXT = re.compile(r"arch=|compute_\d")  # a string that is an nvcc arch flag
_SOURCE = re.compile(r"[^./\s]\.(?:cu|cuh|cpp|cc)$")  # a file's name, not a bare suffix


# Libraries with kernels of their own for every architecture of their release, named
# by their top-level Python module (a fact about the library, not an upstream's).
VENDOR_LIBRARIES = {"cudnn": "NVIDIA cuDNN",
                    "triton_kernels": "Triton's triton_kernels (Triton, compiled for the GPU)"}
# Libraries whose kernels are built for some architectures only, as each says of itself
# (by top-level Python module): a call into one is kernel work in that library for any
# other architecture.
ARCH_LIBRARIES: dict[str, tuple[str, tuple[int, ...]]] = {
    # README, "Requirements: NVIDIA SM90 architecture GPU" (github.com/Tencent/hpc-ops)
    "hpc": ("Tencent HPC-Ops", (9,)),
}


class EndpointKind(StrEnum):
    """What an :class:`Endpoint` is."""

    JIT = "jit"  # a tree function that builds CUDA units
    TRITON = "triton"  # a @triton.jit kernel
    CUTILE = "cutile"  # a cuTile Python kernel (@ct.kernel of cuda.tile)
    CUTE = "cute"  # a CuTe DSL kernel or class
    CUBIN = "cubin"  # a tree function that fetches prebuilt kernel binaries (cubins)
    AOT = "aot"  # an op built ahead of time (torch.ops.NS.op)
    LIB = "lib"  # a vendor library with kernels of its own
    CHECKS = "checks"  # the code behind a gate only checks (asserts, raises)


CHECKS = EndpointKind.CHECKS


@dataclass(frozen=True)
class Endpoint:
    """Something reached that can class a gate; ``majors``: what its build flags name
    (a CuTe kernel's: its archs; prebuilt cubins': :func:`cubin_majors`); ``chain``:
    the calls that led to it."""

    kind: EndpointKind
    path: str
    name: str  # qualified name in ``path`` (the op's dotted name for aot)
    majors: tuple[int, ...] = ()
    chain: tuple[str, ...] = ()  # the calls that led to it, outermost first


class Facts:
    """What a tree's functions and modules are whatever GPU runs them (a function's
    kind, its nvcc flags' majors, qualified names, a module's CuTe namespaces): kept
    with the evaluator, so the walks for each GPU and backend read each once."""

    def __init__(self, ev: TreeEval) -> None:
        self.ev = ev
        self.names: dict[str, dict[int, str]] = {}
        self.cute: dict[str, tuple[int, ...]] = {}
        self.kinds: dict[int, tuple[EndpointKind | None, tuple[int, ...]]] = {}
        self.owners: dict[str, dict[int, ast.ClassDef]] = {}
        self._tables: dict[str, dict[str, list[str]]] = {}

    def owner(self, path: str, key: int) -> ast.ClassDef | None:
        """The class whose method is the function ``key`` (its node's id) of ``path``."""
        owners = self.owners.get(path)
        if owners is None:
            module = self.ev.parsed(path)
            owners = self.owners[path] = classes_of(module) if module is not None else {}
        return owners.get(key)

    def qualname(self, path: str, node: ast.AST) -> str:
        names = self.names.get(path)
        if names is None:
            names = self.names[path] = _qualnames(self.ev.parsed(path))
        return names.get(id(node), getattr(node, "name", "?"))

    def kind(self, func: Func, frame: Frame) -> tuple[EndpointKind | None, tuple[int, ...]]:
        """``jit``, ``triton``, ``cute``, ``cubin`` or None (a plain function), and its
        majors.  Fetching prebuilt kernels wins over building units: flashinfer's
        ``gen_trtllm_gen_gemm_module`` compiles a runner with no kernel of its own, and
        the cubins it fetches are what the target would run."""
        found = self.kinds.get(id(func.node))
        if found is None:
            node = func.node
            kind = (EndpointKind.TRITON if _is_triton(node) else EndpointKind.CUTILE
                    if _is_cutile(self.ev, func.path, node) else EndpointKind.CUTE
                    if _is_cute(node) else EndpointKind.CUBIN
                    if fetches_cubins(node)
                    else EndpointKind.JIT if _builds(node, self.tables(func.path)) else None)
            flags = (_flag_majors(self.ev, frame, node) if kind in (None, EndpointKind.JIT)
                     else cubin_majors(self.ev, frame, node) if kind == EndpointKind.CUBIN
                     else self.cute_majors(func.path) if kind == EndpointKind.CUTE
                     else CUTILE_MAJORS if kind == EndpointKind.CUTILE else ())
            found = self.kinds[id(node)] = (kind, flags)
        return found

    def tables(self, path: str) -> dict[str, list[str]]:
        """A module's tables of string literals (:func:`module_strings`), read once."""
        if path not in self._tables:
            module = self.ev.parsed(path)
            self._tables[path] = module_strings(module) if module is not None else {}
        return self._tables[path]

    def cute_majors(self, path: str) -> tuple[int, ...]:
        """The archs of the arch-specific CuTe namespaces a module uses (empty: generic)."""
        if path not in self.cute:
            module = self.ev.parsed(path)
            used: set[str] = set()
            for n in walk(module) if module is not None else ():
                if isinstance(n, ast.Attribute | ast.Name):
                    used.add(n.attr if isinstance(n, ast.Attribute) else n.id)
                elif isinstance(n, ast.ImportFrom | ast.Import):
                    used |= {a.name.rsplit(".", 1)[-1] for a in n.names}
            self.cute[path] = tuple(sorted({m for name, majors in CUTE_FAMILIES.items()
                                            if name in used for m in majors}))
        return self.cute[path]


def _qualnames(module: ast.Module | None) -> dict[int, str]:
    """Every function and class of ``module`` by node id, named as the gate finder names
    them (``Outer.method``)."""
    names: dict[int, str] = {}
    stack: list[tuple[ast.AST, str]] = [(module, "")] if module is not None else []
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}" if prefix else child.name
                names[id(child)] = name
                stack.append((child, name))
            elif not isinstance(child, ast.expr):
                stack.append((child, prefix))
    return names


def admissible_majors(node: ast.ClassDef) -> tuple[int, ...] | None:
    """The majors of a CuTe DSL class's ``admissible_archs = ["sm_100a", ...]``."""
    for item in node.body:
        targets = item.targets if isinstance(item, ast.Assign) else (
            [item.target] if isinstance(item, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "admissible_archs" for t in targets):
            value = getattr(item, "value", None)
            found = [int(m) // 10 for c in walk(value) if isinstance(c, ast.Constant)
                     and isinstance(c.value, str) for m in _ARCH_FLAG.findall(c.value)] if value else []
            return tuple(sorted(set(found)))
    return None


def _flag_majors(ev: TreeEval, frame: Frame, node: ast.AST) -> tuple[int, ...]:
    """The majors the literal nvcc arch flags a function names (``compute_100a``),
    its own strings and the names it reads (``sm100a_nvcc_flags``)."""
    found: set[int] = set()
    for inner in walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            if _FLAG_TEXT.search(inner.value):
                found |= {int(m) // 10 for m in _ARCH_FLAG.findall(inner.value)}
        elif isinstance(inner, ast.Name) and "flag" in inner.id.lower():
            ev.cap = (0, 0)
            for value in ev.eval(inner, frame):
                for text in value if isinstance(value, tuple) else (value,):
                    if isinstance(text, str) and _FLAG_TEXT.search(text):
                        found |= {int(m) // 10 for m in _ARCH_FLAG.findall(text)}
    return tuple(sorted(found))


def _builds(node: ast.FunctionDef | ast.AsyncFunctionDef, tables: dict[str, list[str]]) -> bool:
    """Whether a function builds CUDA units: it names a source or holds a JIT list, or
    reads a module table of sources by name (``_SOURCE_FILES = ["moe_binding.cu", ...]``)
    and hands nvcc flags on (``extra_cuda_cflags=``)."""
    if builds([node]):
        return True
    read = {n.id for n in walk(node) if isinstance(n, ast.Name) and n.id in tables}
    return any(_SOURCE.search(v.strip()) for name in read for v in tables[name]) and any(
        isinstance(n, ast.keyword) and n.arg in _FLAG_KEYWORDS for n in walk(node))


_FLAG_KEYWORDS = frozenset({"extra_cuda_cflags", "extra_cflags", "nvcc_flags", "cuda_cflags"})


def builds(code: Iterable[ast.AST]) -> bool:
    """Whether ``code`` builds CUDA units: it names a source (a literal or an f-string:
    ``f"cake_selective_state_update_{name}.cu"``) or holds a JIT list.  A bare suffix
    is no source: flashinfer's ``generate_ninja_build_for_op`` tests ``source.suffix ==
    ".cu"`` for whatever sources it is handed."""
    for inner in (n for node in code for n in walk(node)):
        if isinstance(inner, ast.keyword) and inner.arg == KEYWORD:
            return True
        text = _string_text(inner)
        if text is not None and "\n" not in text and _SOURCE.search(text.strip()):
            return True
    return False


def _string_text(node: ast.AST) -> str | None:
    """A string literal's text, an f-string's with ``x`` for each field; None for others."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "x" for v in node.values)
    return None


def own_build(ev: TreeEval, frame: Frame, function: ast.AST | None, qualname: str,
              code: list[ast.AST]) -> Endpoint | None:
    """The JIT module a gate inside its builder guards: sglang's
    ``_jit_qprep_bf16_fp8_module`` refuses unless major 9, then ``return load_jit("...",
    cuda_files=["qprep_bf16_fp8_sm90/entry.cuh"])``.  The code the gate guards names
    the sources itself, so the build is the function's own and no call leads to it;
    that function's endpoint, or None."""
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or not builds(code):
        return None
    majors = _flag_majors(ev, frame, function)
    return Endpoint(EndpointKind.JIT, frame.path, qualname, majors, (qualname,))


_CUBIN = re.compile(r"cubin|fatbin", re.IGNORECASE)  # CUDA's words for a device binary
# a cubin file, or a macro handing a build the folder its runner loads cubins from
_CUBIN_TEXT = re.compile(r"\.(?:cubin|fatbin)\b|^-D\w*(?:CUBIN|FATBIN)\w*=", re.IGNORECASE)
_ARCH_NAME = re.compile(r"(?<![a-z0-9])sm_?(\d{2,3})[af]?(?![0-9])", re.IGNORECASE)


def fetches_cubins(node: ast.AST) -> bool:
    """Whether a function runs prebuilt kernel binaries instead of (or besides) kernels
    built here.  The reading is CUDA's own word for a device binary, "cubin" (and
    "fatbin"), where the function loads one:

    1. it calls a loader named so (``setup_cubin_loader(path)``, ``load_cubin(...)``);
    2. a string names a cubin file (``cubin_name + ".cubin"``), or a macro handing the
       runner it builds the folder it loads cubins from
       (``-DTLLM_GEN_GEMM_CUBIN_PATH=...``: flashinfer's trtllm-gen runners).

    Fetching an artifact is not enough: flashinfer's ``gen_moe_utils_module`` fetches
    trtllm-gen's headers with ``get_artifact`` and reads ``FLASHINFER_CUBIN_DIR`` as an
    include folder, but compiles its kernels here.  A sentence (a log line) is not read.
    Triton's and CuTe DSL's own compiled cubins are not these: their functions are read
    as those kernels first."""
    for inner in walk(node):
        if isinstance(inner, ast.Call):
            called = inner.func.attr if isinstance(inner.func, ast.Attribute) else \
                inner.func.id if isinstance(inner.func, ast.Name) else ""
            if _CUBIN.search(called):
                return True
        text = _string_text(inner)
        if text is not None and not any(c.isspace() for c in text) and _CUBIN_TEXT.search(text):
            return True
    return False


def cubin_majors(ev: TreeEval, frame: Frame, node: ast.AST) -> tuple[int, ...]:
    """The majors the prebuilt binaries a function fetches are made for: the archs
    their names carry (``f"{kernel}_sm100f.cubin"``, a value it reads named for archs:
    ``ArtifactPath.DSL_FMHA_ARCHS = ("sm_100a", "sm_103a")``), else those of what it
    calls or returns named for archs (flashinfer's DeepGEMM ``load`` wraps its cubins in
    ``SM100FP8GemmRuntime``), else the majors of the nvcc flags of the runner it builds
    to launch them (``sm100a_nvcc_flags``: a runner built only for SM100 loads only
    SM100's cubins; a loader that builds none takes its runner's:
    :meth:`~contrib.analysis.reach.graph.Graph.function`); empty when none is read."""
    found: set[int] = set()
    named: set[int] = set()
    returns = getattr(node, "returns", None)
    if returns is not None:
        named |= {int(m) // 10 for m in _ARCH_NAME.findall(ast.unparse(returns))}
    for inner in walk(node):
        if isinstance(inner, ast.Call):
            named |= {int(m) // 10 for m in _ARCH_NAME.findall(callee_name(inner) or "")}
        text = _string_text(inner)
        if text is not None and _CUBIN_TEXT.search(text):
            found |= {int(m) // 10 for m in _ARCH_NAME.findall(text)}
        elif isinstance(inner, ast.Name | ast.Attribute) and "arch" in (
                inner.id if isinstance(inner, ast.Name) else inner.attr).lower():
            ev.cap = (0, 0)
            for value in ev.eval(inner, frame):
                for item in value if isinstance(value, tuple) else (value,):
                    if isinstance(item, str):
                        found |= {int(m) // 10 for m in _ARCH_NAME.findall(item)}
    return tuple(sorted(found or named)) or _flag_majors(ev, frame, node)


_CUTE_DECORATOR = re.compile(r"(?:cutlass\.)?cute(?:\.experimental)?\.(?:kernel|jit)\b")


def _is_cute(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@cute.kernel`` / ``@cute.jit``, and their ``cute.experimental`` forms (CuTe DSL:
    compiled when first called)."""
    return any(_CUTE_DECORATOR.match(ast.unparse(d)) for d in node.decorator_list)


def _is_triton(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@triton.jit`` / ``@triton.autotune(...)`` / ``@triton.heuristics(...)`` / ``@jit``
    from triton (``@triton.testing.perf_report`` marks a benchmark, not a kernel)."""
    for decorator in node.decorator_list:
        text = ast.unparse(decorator)
        if text.startswith(_TRITON_KERNEL) or text in ("jit", "triton_jit"):
            return True
    return False


def _is_cutile(ev: TreeEval, path: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@ct.kernel`` that the evaluator binds to ``cuda.tile.kernel`` however the module
    imports it (``import cuda.tile as ct``, ``from cuda import tile``): a cuTile Python
    kernel, compiled from Tile IR for the GPU it runs on when first launched."""
    for decorator in node.decorator_list:
        if name_of(decorator) == "kernel":
            ev.cap = (0, 0)
            func = decorator.func if isinstance(decorator, ast.Call) else decorator
            if any(isinstance(v, Ext) and v.dotted == "cuda.tile.kernel"
                   for v in ev.eval(func, Frame(path))):
                return True
    return False


# cuTile (CUDA 13.1: Blackwell, compute capability 10.x and 12.x; 13.2 added Ampere
# and Ada, 8.x): the majors Tile IR compiles for, a fact of the toolkit.
CUTILE_MAJORS = (8, 10, 12)


_TRITON_KERNEL = ("triton.jit", "triton.autotune", "triton.heuristics")
