"""Units compiled to PTX for several archs, each function fingerprinted, each build cached.

The ``others`` stage asks whether a patch changes what the archs the upstream
already ships compile: every unit at stake, at the base and patched, for each
of those archs.  A build here is one tree's unit for one virtual architecture,
with the flags the upstream's build passes (:func:`contrib.analysis.ptxrun.unit_flags`,
then the caller's), headers searched as the PTX stage searches them
(:func:`contrib.analysis.ptxjobs.prepare_headers`); what it keeps is each
function's :class:`~contrib.analysis.ptxshape.Shape`.  Builds are kept in the
PTX cache (:mod:`contrib.analysis.ptx_cache`) under a key of the unit's include
closure, flags, outside folders, nvcc and the arch, so a repeat compiles
nothing and reads only the closures, and a unit the patch leaves alone is
compiled once for both trees.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from contrib.analysis import ptx
from contrib.analysis.buildflags import merged
from contrib.analysis.profiles import installed_includes
from contrib.analysis.ptx_cache import read_cached, unit_key, write_cached
from contrib.analysis.ptxjobs import PtxRequest, prepare_headers
from contrib.analysis.ptxrun import unit_flags
from contrib.analysis.ptxshape import Shape, shapes

_VERSION = "contrib-ptx-shapes-3"  # 2: module ids left out; 3: opcodes packed


@dataclass
class Build:
    """One unit of one tree compiled for one virtual architecture (or not)."""

    unit: str
    compute: str
    ok: bool
    shapes: dict[str, Shape] = field(default_factory=dict)
    first_error: str = ""
    lacking: list[str] = field(default_factory=list)  # headers nvcc could not find
    cached: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "first_error": self.first_error, "lacking": self.lacking,
                "shapes": {k: v.to_data() for k, v in self.shapes.items()}}


@dataclass(frozen=True)
class _Todo:
    unit: str
    compute: str
    key: str


def build_all(req: PtxRequest, nvcc: str, nvcc_id: str, computes: dict[str, list[str]],
              extra_dirs: list[str],
              progress: Callable[[int, int, str], None] | None = None) -> dict[tuple[str, str], Build]:
    """Each unit of ``req`` for each of its ``computes`` (unit -> virtual archs), from
    the cache or compiled in parallel: (unit, compute) -> :class:`Build`."""
    read = unit_flags(req.tree, req.profile, [u.path for u in req.units])
    flags = {u.path: merged(read[u.path], req.extra_flags) for u in req.units}
    outside = installed_includes(req.profile, req.python) + [Path(d) for d in extra_dirs]
    found: dict[tuple[str, str], Build] = {}
    todo: list[_Todo] = []
    for unit in req.units:
        content = unit_key(req.tree, unit.path, "", flags[unit.path], outside, nvcc_id,
                           False, req.tree_dirs)
        for compute in computes.get(unit.path, []):
            key = hashlib.sha256(f"{_VERSION}\0{content}\0{compute}".encode()).hexdigest()
            hit = _load(key, unit.path, compute)
            if hit is not None:
                found[(unit.path, compute)] = hit
            else:
                todo.append(_Todo(unit.path, compute, key))
    if todo:
        root, dirs, _ = prepare_headers(req, extra_dirs)
        out = req.workdir / "ptx-shapes"
        out.mkdir(parents=True, exist_ok=True)

        def build(item: _Todo) -> Build:
            return _compile(nvcc, item, root, dirs, flags[item.unit], out)

        with ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 1))) as pool:
            for done, (item, built) in enumerate(zip(todo, pool.map(build, todo), strict=True)):
                found[(item.unit, item.compute)] = built
                if progress is not None:
                    progress(done + 1, len(todo), f"others: compiled {item.unit} for {item.compute}")
                if built.ok or not built.lacking:
                    write_cached(item.key, built.to_dict())
    return found


def _compile(nvcc: str, item: _Todo, root: Path, dirs: Sequence[Path], flags: list[str],
             out: Path) -> Build:
    started = time.monotonic()
    keep = out / f"{hashlib.sha256(item.key.encode()).hexdigest()[:16]}.ptx"
    outcome = ptx.compile_ptx(nvcc, root / item.unit, item.compute, dirs, out, flags, keep=keep,
                              unit=item.unit)
    built = Build(item.unit, item.compute, outcome.ok, first_error=outcome.first_error,
                  lacking=outcome.lacking())
    if outcome.ok:
        try:
            text = keep.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            built.ok, built.first_error = False, f"nvcc wrote no PTX ({exc.strerror})"
        else:
            built.shapes = shapes(text, [str(root), str(root.resolve())])
    keep.unlink(missing_ok=True)
    built.seconds = round(time.monotonic() - started, 2)
    return built


def _load(key: str, unit: str, compute: str) -> Build | None:
    data = read_cached(key)
    if data is None:
        return None
    try:
        table = data["shapes"]
        built = {str(k): Shape.from_data(v) for k, v in table.items()}
        return Build(unit, compute, bool(data["ok"]), built, str(data.get("first_error") or ""),
                     [str(h) for h in data.get("lacking") or []], cached=True)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # a record of another shape: compile again
