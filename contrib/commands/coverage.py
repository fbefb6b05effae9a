"""``contrib coverage WHEEL|DIR|DIST|REQ --arch ARCH [--platform P]``: the device code a
source ships and, per arch, whether a GPU of it runs each object: native, ptx-jit or
no-image.

Options in, outcome out: the sources are :mod:`contrib.analysis.wheels` and
:mod:`contrib.analysis.shipped`, the reading :mod:`contrib.analysis.binaries`, the rules
:mod:`contrib.analysis.cudacompat`.  A requirement without ``--platform`` is read once
per platform its archs ship in (``sm_120a,sm_121a``: the x86_64 wheel for 12.0, the
aarch64 one for GB10).  Exit 0 when every object with device code has an image for every
arch, 1 when one has none, 2 on bad input (a damaged wheel, no cuobjdump, no wheel here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrib.analysis.binaries import DEVICE_SUFFIXES, is_object, require_cuobjdump
from contrib.analysis.cudacompat import (
    JIT_COST,
    ImageKind,
    ImageVerdict,
    Judgement,
    judge,
)
from contrib.analysis.shipped import (
    Shipped,
    Source,
    SourceKind,
    installed,
    read_source,
    resolved,
    source_at,
)
from contrib.analysis.wheels import Platform, Wheel, parse_requirement, platform_for, resolve
from contrib.arch import Arch, parse_archs
from contrib.errors import UsageError
from contrib.ui import UI, counted

NO_IMAGE_SAYS = "no kernel image is available for execution on the device"


@dataclass(frozen=True)
class Covered:
    """One source read for some archs: its objects and each one's judgement per arch."""

    source: Source
    archs: tuple[Arch, ...]
    objects: tuple[Shipped, ...]

    def judged(self, shipped: Shipped) -> dict[str, Judgement]:
        images = [image for image, _ in shipped.reading.images]
        return {arch.name: judge(images, arch) for arch in self.archs}

    @property
    def with_code(self) -> list[Shipped]:
        return [s for s in self.objects if s.reading.device_code]


def coverage(ui: UI, target: str, *, arch: str | None, directory: Path | None,
             platform: str | None, find_links: Sequence[Path], download: bool,
             only: str | None) -> int:
    """Read ``target``'s objects and judge them for each GPU of ``arch``."""
    archs = list(dict.fromkeys(parse_archs(_arch(arch, directory))))
    chosen = Platform(platform) if platform else None
    sources = _sources(target, archs, chosen, list(find_links), download)
    cuobjdump = require_cuobjdump()
    results = []
    for source, judged in sources:
        with ui.task(f"reading {source.label}") as task:
            objects = read_source(source, cuobjdump, only=only, step=task.step)
        results.append(Covered(source, tuple(judged), tuple(objects)))
    for n, covered in enumerate(results):
        if n:
            ui.info("")
        _show(ui, covered)
    verdicts = [j.verdict for c in results for s in c.with_code for j in c.judged(s).values()]
    if ImageVerdict.PTX_JIT in verdicts:
        ui.info(f"ptx-jit: {JIT_COST}.")
    ui.emit({"archs": [a.name for a in archs], "cuobjdump": str(cuobjdump),
             "readings": [_document(c) for c in results],
             "jit_cost": JIT_COST if ImageVerdict.PTX_JIT in verdicts else None})
    return 1 if ImageVerdict.NO_IMAGE in verdicts else 0


def _arch(given: str | None, directory: Path | None) -> str:
    """``--arch``, else the workspace's ``[defaults] arch`` when run inside one."""
    if given is not None:
        return given
    from contrib.workspace.model import Workspace

    try:
        ws = Workspace.find(directory)
    except UsageError:
        raise UsageError("contrib coverage: give --arch (e.g. --arch sm_120a,sm_121a)") from None
    return ws.config.default_arch(None, "coverage")


def _sources(target: str, archs: list[Arch], platform: Platform | None,
             find_links: list[Path], download: bool) -> list[tuple[Source, list[Arch]]]:
    """What to read, and for which archs: a path or an installed distribution once for
    all; a requirement once per platform (``--platform``, else the one each arch ships in)."""
    path = Path(target).expanduser()
    if path.exists():
        if platform or download or find_links:
            raise UsageError(f"{target}: --platform, --find-links and --download choose a "
                             "requirement's wheel, and this is a file or folder: drop them")
        return [(source_at(path), archs)]
    if "/" in target or target.endswith(".whl") or is_object(target):
        raise UsageError(f"{target}: no such file or folder; pass a wheel, a folder of "
                         "objects, an installed distribution or a requirement (NAME==VERSION)")
    requirement = parse_requirement(target)
    if not (requirement.specifier or platform or download or find_links):
        try:
            return [(installed(requirement.name), archs)]
        except UsageError:
            pass  # not installed here: a wheel of any version found offline will do
    groups: dict[Platform, list[Arch]] = {}
    for arch in archs:
        groups.setdefault(platform or platform_for(arch), []).append(arch)
    wheels: dict[Path, tuple[Wheel, list[Arch]]] = {}  # a wheel for any platform is read once
    for plat, judged in groups.items():
        wheel = resolve(requirement, plat, find_links, download=download)
        wheels.setdefault(wheel.path, (wheel, []))[1].extend(judged)
    return [(resolved(wheel), judged) for wheel, judged in wheels.values()]


def _show(ui: UI, covered: Covered) -> None:
    source, objects = covered.source, covered.with_code
    about = ", ".join(x for x in (source.distribution and f"{source.distribution} "
                                  f"{source.version}", source.platform) if x)
    ui.info(f"{source.label}{f' ({about})' if about else ''}: "
            f"{counted(len(objects), 'object')} with device code")
    if source.kind is SourceKind.WHEEL and source.label != source.path.name:
        ui.info(f"  from {source.path}")
    host_only = len(covered.objects) - len(objects)
    if host_only:
        ui.info(f"  {counted(host_only, 'object')} with host code only, not shown")
    if not objects:
        return
    rows = _rows(covered)
    ui.table("coverage", ["object", "SASS", "PTX", "ops", *(a.name for a in covered.archs)],
             [[row.label, row.sass, row.ptx, row.ops,
               *(row.judged[a.name].verdict.value for a in covered.archs)] for row in rows],
             wrap=["SASS", "PTX"])
    for arch in covered.archs:
        missing = [row for row in rows if row.judged[arch.name].verdict is ImageVerdict.NO_IMAGE]
        if missing:
            ui.info(f"{arch.name}: no image for {arch.capability} in "
                    f"{sum(len(row.members) for row in missing)} of "
                    f"{counted(len(objects), 'object')} (\"{NO_IMAGE_SAYS}\"): "
                    + ", ".join(_shorten([row.label for row in missing])))


@dataclass(frozen=True)
class Row:
    """A line of the table: one shared object, or a folder's cubins with the same images."""

    label: str
    sass: str
    ptx: str
    ops: str
    members: tuple[Shipped, ...]
    judged: dict[str, Judgement]


def _rows(covered: Covered) -> list[Row]:
    groups: dict[tuple[str, str, str], list[Shipped]] = {}
    for shipped in covered.with_code:
        sass = " ".join(i.target for i in shipped.reading.of(ImageKind.SASS)) or "-"
        ptx = " ".join(i.target for i in shipped.reading.of(ImageKind.PTX)) or "-"
        folder, _, _ = shipped.path.rpartition("/")
        key = (f"{folder}/" if shipped.path.endswith(DEVICE_SUFFIXES) else shipped.path, sass, ptx)
        groups.setdefault(key, []).append(shipped)
    rows = []
    for (name, sass, ptx), members in groups.items():
        first = members[0]
        kind = "cubins" if first.path.endswith(".cubin") else "fatbins"
        label = first.path if len(members) == 1 else f"{name} ({len(members)} {kind})"
        ops = str(len(first.reading.ops)) if first.reading.ops else "-"
        rows.append(Row(label, sass, ptx, ops, tuple(members), covered.judged(first)))
    return rows


def _shorten(labels: list[str], most: int = 4) -> list[str]:
    return labels if len(labels) <= most else [*labels[:most], f"and {len(labels) - most} more"]


def _document(covered: Covered) -> dict[str, Any]:
    return {"source": covered.source.to_dict(), "archs": [a.name for a in covered.archs],
            "objects": [{"path": s.path, "sha256": s.sha256, **s.reading.to_dict(),
                         "verdicts": {name: j.to_dict() for name, j in covered.judged(s).items()}}
                        for s in covered.objects]}
