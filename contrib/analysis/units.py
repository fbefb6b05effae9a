"""Which translation units a patch puts at stake: everything its touched gates build.

A JIT gate such as flashinfer's ``gen_trtllm_comm_module`` compiles several
units (``trtllm_allreduce.cu``, ``trtllm_allreduce_fusion.cu``,
``trtllm_moe_allreduce_fusion.cu``); sglang's fusion runs the second.  So the
PTX stage compiles every unit a touched gate names, every unit the patch
changes, and every unit of the tree whose ``#include`` closure reaches a header
the patch changes, with no hand-written list (``validation.ptx_sources`` adds to
it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from contrib.analysis.includes import IncludeGraph, find_units, is_cuda_source
from contrib.analysis.tree import SourceTree

UNIT_SUFFIXES = (".cu",)


@dataclass(frozen=True)
class Unit:
    """One translation unit to compile, and why."""

    path: str
    why: str  # "built by gen_trtllm_comm_module", "includes include/x.cuh", ...
    gate: bool  # built by a touched gate (or changed, or listed): a compile error fails the stage
    builder: str = ""  # the JIT function that builds it ("gen_trtllm_comm_module"); "": none


def units_at_stake(tree: SourceTree, gate_sources: Iterable[tuple[str, str]],
                   changed: Iterable[str], listed: Iterable[str] = ()) -> list[Unit]:
    """Units to compile: the gates' (``(function, name)``), listed, changed, and includers of changed headers."""
    units: dict[str, Unit] = {}

    def add(path: str | None, why: str, gate: bool, builder: str = "") -> None:
        if path and path.endswith(UNIT_SUFFIXES) and path not in units and tree.exists(path):
            units[path] = Unit(path, why, gate, builder)

    for function, name in gate_sources:
        for path in find_units(tree, [name]):
            add(path, f"built by {function}", True, function)
    for path in listed:
        add(path, "listed in validation.ptx_sources", True)
    changed = [c for c in changed if is_cuda_source(c)]
    for path in changed:
        add(path, "changed by the patch", True)
    headers = [c for c in changed if not c.endswith(UNIT_SUFFIXES)]
    for path, header in includers(tree, headers).items():
        add(path, f"includes {header}, which the patch changes", False)
    return list(units.values())


def includers(tree: SourceTree, headers: list[str]) -> dict[str, str]:
    """Every unit whose include closure reaches one of ``headers``: unit -> the header."""
    if not headers:
        return {}
    reached = IncludeGraph(tree).includers(headers)
    return {path: header for path, header in reached.items() if path.endswith(UNIT_SUFFIXES)}


def gate_flags(tree: SourceTree, gates: Iterable[tuple[str, str]]) -> list[str]:
    """nvcc flags the touched gates' own functions pass (``extra_cuda_cflags=["-DX"]``)."""
    from contrib.analysis.profiles import flags_in

    flags: list[str] = []
    for file, function in gates:
        for flag in flags_in(tree.read_text(file), function.rsplit(".", 1)[-1]):
            if flag not in flags:
                flags.append(flag)
    return flags


def gate_include_dirs(tree: SourceTree, gates: Iterable[tuple[str, str]]) -> list[str]:
    """Tree folders the touched gates' own functions add to the include path
    (``extra_include_paths=[...]``), as the upstream's profile names them."""
    from contrib.analysis.profiles import include_dirs_in, profile_for

    names = dict(profile_for(tree).tree_dir_names)
    wanted: list[str] = []
    for file, function in gates:
        for folder in include_dirs_in(tree.read_text(file), function.rsplit(".", 1)[-1], names):
            if folder not in wanted:
                wanted.append(folder)
    if not wanted:
        return []
    held = {"/".join(p.split("/")[:n]) for p in tree.paths() for n in range(1, p.count("/") + 1)}
    return [folder for folder in wanted if folder in held]
