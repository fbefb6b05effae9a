"""The compile jobs of a set of units: what validate's PTX stage and ``audit --compile`` both build.

A :class:`PtxRequest` names the units, the upstream's build profile and the
arch; :func:`prepare_headers` writes the units and their include closure to a
scratch tree and orders the ``-I`` folders as the upstream's build does;
:func:`jobs_for` keys each compile by its content for :mod:`contrib.analysis.ptx_cache`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from contrib.analysis import includes
from contrib.analysis.profiles import Profile, installed_includes
from contrib.analysis.ptx_cache import Job, unit_key
from contrib.analysis.tree import SourceTree, materialize
from contrib.analysis.units import Unit
from contrib.arch import Arch
from contrib.workspace.validation import Waiver


@dataclass
class PtxRequest:
    """What the PTX stage hands :func:`check`."""

    tree: SourceTree
    arch: Arch
    units: list[Unit]
    profile: Profile
    python: str | None
    extra_flags: list[str]
    extra_dirs: list[str]  # validation.ptx_include_dirs, unexpanded
    waivers: list[Waiver]
    workdir: Path
    kernel_lines: dict[str, tuple[str, int]]
    progress: Callable[[int, int, str], None] | None = None  # (compiled, of N, unit)
    tree_dirs: list[str] = field(default_factory=list)  # the gates' extra_include_paths
    reference: Arch | None = None  # an arch admitted before: judges the target's empty entries


def jobs_for(req: PtxRequest, flags_of: Mapping[str, Sequence[str]], root: Path,
             dirs: list[Path], outside: list[Path], nvcc_id: str,
             sass: str | None = None) -> list[Job]:
    """One compile of each unit of ``req`` (its flags in ``flags_of``), from the tree
    :func:`prepare_headers` wrote under ``root``, keyed by its content for the cache."""
    compute = req.profile.compute(req.arch)
    return [Job(u.path, root / u.path, compute, dirs, list(flags_of[u.path]),
                unit_key(req.tree, u.path, compute, flags_of[u.path], outside, nvcc_id,
                         sass is not None, req.tree_dirs), sass)
            for u in req.units]


def expand_dirs(dirs: Sequence[str]) -> tuple[list[str], list[str]]:
    """``validation.ptx_include_dirs`` with ``~`` and ``$VAR`` expanded, and those that
    name a variable not set here (still holding a ``$``)."""
    expanded = [os.path.expandvars(os.path.expanduser(d)) for d in dirs]
    return expanded, [d for d in expanded if "$" in d]


def unset_dirs_reason(unset: Sequence[str]) -> str:
    """Why a stage that needs ``validation.ptx_include_dirs`` compiles nothing."""
    return (f"validation.ptx_include_dirs names {', '.join(unset)}, an environment variable "
            "that is not set here")


def prepare_headers(req: PtxRequest, extra: list[str]) -> tuple[Path, list[Path], list[Path]]:
    """(materialized tree root, -I folders in search order, the folders outside the tree)."""
    root = req.workdir / "ptx-tree"
    closure = includes.include_closure(req.tree, [u.path for u in req.units],
                                       includes.IncludeResolver(req.tree, extra=req.tree_dirs)).files
    materialize(req.tree, sorted(set(closure) | {u.path for u in req.units}), root)
    submodules = [s for s in req.profile.submodule_includes if _has_files(req.tree, s)]
    if submodules:
        materialize(req.tree, [p for p in req.tree.paths() if p.startswith(tuple(s + "/" for s in submodules))], root)
    outside = installed_includes(req.profile, req.python) + [Path(d) for d in extra]
    tree_dirs = [root / d for d in [*includes.include_roots(req.tree), *req.tree_dirs,
                                    *submodules]]
    # csrc/ and the other folders of the units: flashinfer's units include "tvm_ffi_utils.h"
    unit_dirs = [root / Path(u.path).parent for u in req.units]
    ordered = list(dict.fromkeys([*tree_dirs, *unit_dirs, *outside]))
    return root, ordered, outside


def _has_files(tree: SourceTree, folder: str) -> bool:
    prefix = folder + "/"
    return any(p.startswith(prefix) for p in tree.paths())
