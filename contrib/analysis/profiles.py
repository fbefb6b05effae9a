"""How an upstream builds its CUDA code and runs its tests, per upstream.

contrib checks a patched tree the way the upstream itself builds it: the same
nvcc flags, the same virtual architecture for a major, the same third-party
headers, and the same way of importing the package from a source checkout.
Where the upstream's build code says, the flags are read from it (flashinfer:
``flashinfer/jit/core.py`` ``gen_jit_spec``, ``flashinfer/jit/cpp_ext.py``
``build_cuda_cflags``, ``flashinfer/compilation_context.py``); the profile holds
what cannot be read (which file says it, the arch variant rule, where the
headers live) and a fallback for trees whose build code moved.

A tree no profile recognises gets :data:`GENERIC`: ``-std=c++17`` and the
target arch as given.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from contrib.analysis.pyparse import parse_python
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch

# Flags that change what the device code compiles to (PTX); the rest (-O3,
# --threads, -Xfatbin, -lineinfo, -fPIC...) only change how it is built.
_PTX_FLAG = re.compile(r"^(?:-D\w+(?:=\S*)?|-U\w+|-std=\S+|--expt-[\w-]+|-use_fast_math|"
                       r"--use_fast_math|-ftz=\S+|-prec-\w+=\S+|-fmad=\S+)$")


@dataclass(frozen=True)
class FlagSource:
    """A function in the upstream's build code whose string literals are nvcc flags."""

    path: str
    function: str  # a def name, or Class.ATTRIBUTE for a class-level list


@dataclass(frozen=True)
class Profile:
    """What contrib knows about building and testing one upstream."""

    name: str
    marker: str  # a path whose presence identifies the upstream's tree
    flag_sources: tuple[FlagSource, ...] = ()
    variant: Callable[[Arch], str] = lambda arch: arch.compute
    submodule_includes: tuple[str, ...] = ()  # tree paths, used when the cache has them
    package_includes: tuple[tuple[str, str], ...] = ()  # (python package, folder inside it)
    source_links: tuple[tuple[str, str], ...] = ()  # (link in the worktree, tree folder it points to)
    package_links: tuple[tuple[str, str, str], ...] = ()  # (link, submodule folder, package folder)
    jit_cache_env: str | None = None  # the variable that moves the upstream's JIT cache
    arch_env: Callable[[Arch], dict[str, str]] = field(default=lambda arch: {})
    # names the build code gives tree folders (``jit_env.FLASHINFER_CSRC_DIR`` -> csrc)
    tree_dir_names: tuple[tuple[str, str], ...] = ()

    def compute(self, arch: Arch) -> str:
        """The virtual architecture the upstream builds for ``arch`` (``compute_120f``)."""
        return self.variant(arch)


def flags_in(text: str | None, function: str) -> list[str]:
    """PTX-relevant flag literals in ``function`` of a Python build file (debug branches skipped)."""
    if not text:
        return []
    module = parse_python("", text)
    if not isinstance(module, ast.Module):
        return []
    owner, _, name = function.rpartition(".")
    for node in ast.walk(module):
        if owner and isinstance(node, ast.ClassDef) and node.name == owner:
            return _class_list(node, name)
        if not owner and isinstance(node, ast.FunctionDef) and node.name == function:
            return _literals(node.body)
    return []


def include_dirs_in(text: str | None, function: str, names: dict[str, str]) -> list[str]:
    """Tree folders ``function`` of a Python build file puts on the include path
    (``extra_include_paths=[jit_env.FLASHINFER_CSRC_DIR / "nv_internal", ...]``), each
    element a folder name of ``names`` joined with string literals; others are left out
    (generated or downloaded folders are not in the tree)."""
    if not text or not names:
        return []
    module = parse_python("", text)
    if not isinstance(module, ast.Module):
        return []
    found: list[str] = []
    for node in ast.walk(module):
        if not (isinstance(node, ast.FunctionDef) and node.name == function):
            continue
        for call in ast.walk(node):
            for keyword in getattr(call, "keywords", []) if isinstance(call, ast.Call) else []:
                if keyword.arg == "extra_include_paths" and isinstance(keyword.value, ast.List):
                    for item in keyword.value.elts:
                        folder = _folder(item, names)
                        if folder is not None and folder not in found:
                            found.append(folder)
    return found


def _folder(node: ast.expr, names: dict[str, str]) -> str | None:
    """``BASE / "a" / "b"`` (or ``str(...)`` of it) as a tree path, BASE from ``names``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" \
            and len(node.args) == 1:
        return _folder(node.args[0], names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left = _folder(node.left, names)
        right = node.right
        if left is None or not (isinstance(right, ast.Constant) and isinstance(right.value, str)):
            return None
        part = right.value.strip("/")
        return f"{left}/{part}" if left and part else (left or part)
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    return names.get(name) if isinstance(name, str) else None


def _class_list(node: ast.ClassDef, name: str) -> list[str]:
    for item in node.body:
        if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                for t in item.targets):
            return _literals([item])
    return []


def _literals(body: list[ast.stmt]) -> list[str]:
    flags: list[str] = []
    for statement in body:
        if isinstance(statement, ast.If) and "debug" in ast.unparse(statement.test).lower():
            flags += _literals(statement.orelse)  # debug builds add -O0, -G...: not what ships
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value.strip()
                if _PTX_FLAG.match(value) and value not in flags:
                    flags.append(value)
    return flags


def _flashinfer_variant(arch: Arch) -> str:
    # flashinfer/compilation_context.py _normalize_cuda_arch: 9.x -> a, 12.0 -> f
    # (family target; 12.1 and up keep a), 10+ -> a.
    if arch.major == 12 and arch.minor == 0:
        return "compute_120f"
    suffix = "a" if arch.major >= 9 else ""
    return f"compute_{arch.major}{arch.minor}{suffix}"


def _flashinfer_arch_env(arch: Arch) -> dict[str, str]:
    letter = _flashinfer_variant(arch)[-1]
    return {"FLASHINFER_CUDA_ARCH_LIST": f"{arch.major}.{arch.minor}" +
            (letter if letter.isalpha() else "")}


FLASHINFER = Profile(
    name="flashinfer",
    marker="flashinfer/jit/cpp_ext.py",
    flag_sources=(
        FlagSource("flashinfer/jit/core.py", "gen_jit_spec"),
        FlagSource("flashinfer/jit/cpp_ext.py", "build_cuda_cflags"),
        FlagSource("flashinfer/compilation_context.py", "CompilationContext.COMMON_NVCC_FLAGS"),
    ),
    variant=_flashinfer_variant,
    submodule_includes=("3rdparty/cccl/cub", "3rdparty/cccl/libcudacxx/include",
                        "3rdparty/cccl/thrust", "3rdparty/cutlass/include",
                        "3rdparty/cutlass/tools/util/include", "3rdparty/spdlog/include"),
    package_includes=(("flashinfer", "data/cccl/cub"), ("flashinfer", "data/cccl/libcudacxx/include"),
                      ("flashinfer", "data/cccl/thrust"), ("flashinfer", "data/cutlass/include"),
                      ("flashinfer", "data/cutlass/tools/util/include"),
                      ("flashinfer", "data/spdlog/include"), ("tvm_ffi", "include"),
                      ("tvm_ffi", "3rdparty/dlpack/include")),
    # What flashinfer's editable install does (build_backend.py _create_data_dir).
    source_links=(("flashinfer/data/csrc", "csrc"), ("flashinfer/data/include", "include")),
    package_links=(("flashinfer/data/cutlass", "3rdparty/cutlass", "data/cutlass"),
                   ("flashinfer/data/spdlog", "3rdparty/spdlog", "data/spdlog"),
                   ("flashinfer/data/cccl", "3rdparty/cccl", "data/cccl")),
    jit_cache_env="FLASHINFER_WORKSPACE_BASE",
    arch_env=_flashinfer_arch_env,
    tree_dir_names=(("FLASHINFER_CSRC_DIR", "csrc"), ("FLASHINFER_INCLUDE_DIR", "include")),
)

GENERIC = Profile(name="generic", marker="")
PROFILES = (FLASHINFER,)


def profile_for(tree: SourceTree) -> Profile:
    """The profile whose marker file the tree has, else :data:`GENERIC`."""
    return next((p for p in PROFILES if tree.exists(p.marker)), GENERIC)


_PACKAGE_DIRS = """
import importlib.util, json, os, sys
found = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    if spec is not None and spec.submodule_search_locations:
        found[name] = list(spec.submodule_search_locations)[0]
print(json.dumps(found))
"""


def package_dirs(python: str | None, names: list[str], cwd: Path | None = None) -> dict[str, Path]:
    """Where ``python`` would import each package from (found, not imported); {} without one."""
    if not python or not names:
        return {}
    try:
        done = subprocess.run([python, "-c", _PACKAGE_DIRS, *names], capture_output=True, text=True,
                              timeout=120, cwd=cwd or Path("/"))
        found = json.loads(done.stdout or "{}")
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {k: Path(v) for k, v in found.items() if isinstance(v, str)}


def installed_includes(profile: Profile, python: str | None) -> list[Path]:
    """Header folders an installed upstream package ships, in the profile's order."""
    dirs = package_dirs(python, sorted({p for p, _ in profile.package_includes}))
    return [dirs[p] / sub for p, sub in profile.package_includes if p in dirs and (dirs[p] / sub).is_dir()]


def prepare_worktree(profile: Profile, worktree: Path, python: str | None) -> list[str]:
    """Make a source checkout importable as the upstream's editable install makes it.

    flashinfer's JIT reads its sources from ``flashinfer/data/{csrc,include}``
    and third-party headers from ``flashinfer/data/{cutlass,spdlog,cccl}``:
    link them to the patched checkout, and the third-party ones to the
    submodules when checked out, else to the installed package's copies.
    Returns one line per link made.
    """
    made = []
    for link, target in profile.source_links:
        made += _link(worktree / link, worktree / target)
    installed = package_dirs(python, sorted({p for p, _ in profile.package_includes}))
    package = installed.get(profile.name)
    for link, submodule, inside in profile.package_links:
        sub = worktree / submodule
        if sub.is_dir() and any(sub.iterdir()):
            made += _link(worktree / link, sub)
        elif package is not None and (package / inside).is_dir():
            made += _link(worktree / link, package / inside)
    return made


def _link(link: Path, target: Path) -> list[str]:
    if link.exists() or link.is_symlink() or not target.exists():
        return []
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link, target_is_directory=True)
    return [f"{link.name} -> {target}"]
