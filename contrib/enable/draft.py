"""``contrib enable``'s engine: from the audit's gates to a validated draft patchset.

1. audit the upstream at REF (:func:`contrib.audit.run.audit_upstream`, so a
   better audit means better drafts);
2. pick the gates: those a feature's chain opens here, as ``contrib why`` reads it
   (:mod:`contrib.enable.select`); or those named (:mod:`contrib.enable.select`)
   with the chain of gates that must open with each (:mod:`contrib.enable.chain`),
   all in one patchset; or each uncovered chain, a patchset each;
3. refuse a chain whose kernels are compiled out for the target (the guards
   named), skip one a patchset covers already;
4. splice the edits (:mod:`contrib.enable.forms`), commit them on REF per area
   (:mod:`contrib.enable.commits`) and write the patchset through the version
   writer ``new`` uses: ``upstream_status = "Draft"``, the audit's evidence in
   the summary, each gate's :class:`~contrib.workspace.schema.Decided` (widened or
   left, what, why) in ``[decisions]``;
5. validate it with every stage that can run here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import tomlkit

from contrib.analysis.tree import GitTree
from contrib.arch import Arch
from contrib.audit.coverage import patch_coverage
from contrib.audit.model import INTENTIONAL, AuditGate, admits_text
from contrib.audit.report import UpstreamAudit
from contrib.audit.run import audit_upstream
from contrib.carry.dep3 import Forward, Stamp, signoff_at, stamped, vendor
from contrib.carry.versions import Event, How, add_event, stage_version
from contrib.clock import now_iso
from contrib.enable.chain import gate_chain
from contrib.enable.commits import AreaCommit, area_of, make_commits, subject, subject_style
from contrib.enable.edits import CannotEdit
from contrib.enable.forms import Editor
from contrib.enable.select import (
    Skipped,
    feature_gates,
    label,
    named,
    no_feature,
    picker,
    refusal,
    uncovered,
)
from contrib.errors import ContribError, UsageError
from contrib.git.cache import Mirror
from contrib.git.process import ProgressFn
from contrib.git.repo import Git
from contrib.ui import UI
from contrib.validate.run import validate
from contrib.workspace.layout import META_NAME
from contrib.workspace.model import Workspace, check_name
from contrib.workspace.schema import Decided, Done, UpstreamStatus, decisions_table

_NAME_MAX = 48


@dataclass
class Drafted:
    """One patchset ``contrib enable`` wrote, and what validate made of it."""

    patchset: str
    version: str
    gates: list[str]
    patches: list[str]
    folder: str = ""
    verdict: str = "not validated"
    skipped: list[str] = field(default_factory=list)  # the stages that could not run here
    unmet: list[str] = field(default_factory=list)  # the required stages not passed
    overridden: str = ""  # the audit's refusal that --force drafted past
    # Why the ptx stage could not run here: the class then stands on the #if guards alone.
    unproven: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class EnableRun:
    """What one run drafted and skipped for one upstream at one commit."""

    upstream: str
    commit: str
    drafted: list[Drafted] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    asked: bool = False  # gates or features were named (a run without drafts nothing left)

    def to_dict(self) -> dict[str, Any]:
        return {"upstream": self.upstream, "commit": self.commit,
                "drafted": [d.to_dict() for d in self.drafted],
                "skipped": [s.to_dict() for s in self.skipped]}

    @property
    def needs_attention(self) -> bool:
        """A gate refused for kernel work, a draft that failed a stage, or nothing
        drafted of what was named (a run naming none: nothing left to do is done)."""
        return any(s.refused for s in self.skipped) or any(
            d.verdict == "failed" for d in self.drafted) or (self.asked and not self.drafted)


def enable(ws: Workspace, upstream: str, arch: Arch, *, at: str | None, specs: list[str],
           name: str | None, fetch: bool, check: UI, progress: ProgressFn | None = None,
           step: Any = None, force: bool = False, requires: Sequence[str] = (),
           features: Sequence[str] = (), only: bool = False) -> EnableRun:
    """Draft (and validate, reporting to ``check``) a patchset: one for the gates
    ``specs`` name and the chains they bring (``only``: the named gates alone), one for
    the gates ``features``' chains open here, or with neither, one per uncovered chain.
    ``force`` drafts a chain the audit refuses for kernel work too (the gate's half of
    the whole fix, which validate then fails on the guards it names); ``requires``:
    patchsets of the upstreams below (``UP/NAME``) each draft needs, as ``[[requires]]``."""
    if name is not None:
        check_name(name)
    if features and specs:
        raise UsageError("name a feature (--feature) or gates, not both: the feature's "
                         "chain says which gates it opens")
    for target in requires:
        _below_target(ws, upstream, target)
    seen: list[str] = []
    audit = audit_upstream(ws, upstream, arch, at=at, since=None, fetch=fetch,
                           progress=progress, step=step,
                           features=picker(list(features), seen) if features else None)
    if features and not audit.features:
        raise UsageError(no_feature(upstream, audit.ref, list(features), seen))
    needs = [_requirement(audit, target, arch) for target in requires]
    git = Mirror(ws.config.upstream(upstream)).ensure(fetch_now=False).git
    run = EnableRun(upstream, audit.commit, asked=bool(specs or features))
    tree = GitTree(git, audit.commit)
    for chain, must, default in _chains(audit, tree, arch, specs, only, run):
        drafted = _draft_chain(ws, git, tree, audit, chain, arch, name or default, run, force,
                               needs, must)
        if drafted is not None:
            _validate(ws, check, drafted, arch)
            run.drafted.append(drafted)
    return run


# The gates a draft opens, those of them it must widen (else nothing is drafted), and
# its default name.
_Plan = tuple[list[AuditGate], set[tuple[str, int]], str]


def _chains(audit: UpstreamAudit, tree: GitTree, arch: Arch, specs: list[str], only: bool,
            run: EnableRun) -> list[_Plan]:
    """What to draft: the features' gates (the audit followed only those), the named
    gates with their chains, or each uncovered chain."""
    if audit.features:
        found = feature_gates(audit.name, audit.gates, audit.features, arch.name)
        run.skipped += found.skipped
        return [(found.gates, {_place(g) for g in found.gates}, found.name)] if found.gates else []
    if specs:
        starts = named(audit.gates, specs, arch, f"{audit.name} at {audit.commit[:12]}")
        chain = list(starts) if only else _union(
            gate_chain(audit.gates, tree, start, arch) for start in starts)
        return [(chain, {_place(g) for g in starts}, _default_name(starts[0]))]
    plans: list[_Plan] = []
    taken: set[tuple[str, int]] = set()
    for start in uncovered(audit.gates):
        if _place(start) in taken:
            continue
        chain = gate_chain(audit.gates, tree, start, arch)
        taken |= {_place(g) for g in chain}
        plans.append((chain, {_place(start)}, _default_name(start)))
    return plans


def _place(gate: AuditGate) -> tuple[str, int]:
    return (gate.file, gate.line)


def _union(chains: Iterable[list[AuditGate]]) -> list[AuditGate]:
    """The gates of ``chains``, each once, in order: one patchset for what was named."""
    out: dict[tuple[str, int], AuditGate] = {}
    for chain in chains:
        for gate in chain:
            out.setdefault(_place(gate), gate)
    return list(out.values())


def _draft_chain(ws: Workspace, git: Git, tree: GitTree, audit: UpstreamAudit,
                 chain: list[AuditGate], arch: Arch, target: str,
                 run: EnableRun, force: bool = False,
                 needs: Sequence[dict[str, str]] = (),
                 must: set[tuple[str, int]] | None = None) -> Drafted | None:
    start = chain[0]
    refused = next((r for g in chain if (r := refusal(g, tree)) is not None), None)
    if refused is not None and not force:
        run.skipped.append(refused)
        return None
    intentional = next((g for g in chain if g.class_ == INTENTIONAL), None)
    if intentional is not None:
        run.skipped.append(Skipped(label(start), f"left out on purpose: {intentional.reason}"))
        return None
    covered = _covered_by(ws, git, audit.name, chain)
    if covered:
        run.skipped.append(Skipped(label(start), f"covered by {covered}"))
        return None
    if (ws.root / "patchsets" / audit.name / target).exists():
        run.skipped.append(Skipped(label(start), f"patchset {audit.name}/{target} exists; "
                                   "give another --name to draft it again"))
        return None
    editor = Editor(tree, arch)
    decisions: dict[str, Decided] = {}
    for gate in chain:
        try:
            decided = Decided(label(gate), Done.WIDENED, editor.widen(gate), _why(gate))
        except CannotEdit as exc:
            if _place(gate) in (must or {_place(start)}):
                run.skipped.append(Skipped(label(start), str(exc)))
                return None
            decided = Decided(label(gate), Done.LEFT, why=str(exc))
        decisions[decided.gate] = decided
    drafted = _write(ws, git, audit, chain, editor, decisions, arch, target, needs)
    drafted.overridden = refused.why if refused is not None else ""
    return drafted


def _why(gate: AuditGate) -> str:
    """Why the gate is widened: what the audit read of it."""
    klass = gate.class_ or "not read as excluding by the audit"
    return f"{gate.effect.why or 'it omits the target'}; class {klass}" + (
        f" ({gate.reason})" if gate.reason else "")


def _covered_by(ws: Workspace, git: Git, upstream: str, chain: list[AuditGate]) -> str | None:
    """The patchset already changing a function of the chain (the audit's covered_by
    counts excluding gates only; a named gate may be one it does not)."""
    for gate in chain:
        if gate.covered_by:
            return gate.covered_by
    for ps in ws.patchsets([upstream]):
        try:
            patches = [raw for _, raw in ps.current.patch_texts()]
        except ContribError:
            continue
        cover = patch_coverage(ps.target, git, ps.current.base, patches)
        if any((g.file, g.function) in cover.functions for g in chain):
            return ps.target
    return None


def _default_name(gate: AuditGate) -> str:
    stem = gate.function.rsplit(".", 1)[-1].strip("_")
    stem = re.sub(r"^(?:gen|get)_|_module$", "", stem)
    slug = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:_NAME_MAX].strip("-")
    return f"enable-{slug or 'gate'}"


def _below_target(ws: Workspace, upstream: str, target: str) -> None:
    """UsageError unless ``target`` is ``UP/NAME`` of another upstream of the workspace."""
    below, _, name = target.partition("/")
    if not name or "/" in name:
        raise UsageError(f"--requires {target}: give the patchset below as UPSTREAM/NAME")
    check_name(name)
    ws.config.upstream(below)  # an unknown upstream is named with its did-you-mean
    if below == upstream:
        raise UsageError(f"--requires {target}: a patchset of {upstream} itself; --requires "
                         "names a patchset of the upstream below, which this one pins")


def _requirement(audit: UpstreamAudit, target: str, arch: Arch) -> dict[str, str]:
    """The ``[[requires]]`` table tying a draft to ``target`` (``UP/NAME``) below: where
    the audited tree pins UP, as the audit's stack read it."""
    below = target.partition("/")[0]
    pinned = next((s for s in audit.stack if s.get("upstream") == below and s.get("pin")), None)
    if pinned is None:
        raise UsageError(f"--requires {target}: {audit.name} at {audit.commit[:12]} pins no "
                         f"version of {below} the audit could read (`contrib audit "
                         f"{audit.name}` says why in its notes)")
    tag, version = str(pinned["tag"]), str(pinned["version"])
    return {"upstream": below, "patchset": target,
            "pin_file": str(pinned["pin"]).rpartition(":")[0],
            "pin_package": str(pinned["package"]),
            "tag_format": tag.replace(version, "{version}", 1) if version in tag else "v{version}",
            "reason": f"the gates it opens call into {below} {tag}, which turns {arch.name} "
                      f"away until {target} is carried"}


def _write(ws: Workspace, git: Git, audit: UpstreamAudit, chain: list[AuditGate],
           editor: Editor, decisions: dict[str, Decided], arch: Arch, target: str,
           needs: Sequence[dict[str, str]] = ()) -> Drafted:
    """The edits as commits on the audited commit, written as the patchset's version."""
    start = chain[0]
    what = start.function.rsplit(".", 1)[-1]
    style = subject_style(git, audit.commit)
    areas: dict[str, dict[str, bytes]] = {}
    for path, edit in editor.files.items():
        if edit.splices:
            areas.setdefault(area_of(path), {})[path] = edit.result()
    if not areas:
        raise UsageError(f"{label(start)}: nothing to change for {arch.name}")
    commits = [AreaCommit(area, files, _message(subject(style, area, what, arch), files,
                                                chain, decisions))
               for area, files in areas.items()]
    at = now_iso()
    exported = stamped(git, audit.commit, make_commits(git, audit.commit, commits), Stamp(
        at[:10], Forward.NO, vendor(f"{audit.name}/{target}"),
        signoff_at(git, ws.root, audit.commit, audit.name)))
    meta = _meta(commits[0].message.splitlines()[0], chain, decisions, arch, audit.commit)
    if needs:
        meta["requires"] = tomlkit.aot()
        for need in needs:
            meta["requires"].append(tomlkit.item(dict(need)))
    add_event(meta, Event(How.ENABLE, audit.commit, at,
                          detail=f"drafted from the audit for {arch.name}"))
    folder = ws.root / "patchsets" / audit.name / target
    with ws.transaction() as txn:
        stage_version(txn, folder, audit.commit, exported)
        txn.write(folder / META_NAME, tomlkit.dumps(meta))
    return Drafted(f"{audit.name}/{target}", audit.commit, [label(g) for g in chain],
                   [n for n, _ in exported], str(folder / audit.commit))


def _message(title: str, files: dict[str, bytes], chain: list[AuditGate],
             decisions: dict[str, Decided]) -> str:
    """The commit's message: its subject, then each edit of its files in words."""
    lines = [decided.what for g in chain if g.file in files
             and (decided := decisions[label(g)]).done is Done.WIDENED]
    body = "\n".join(f"- {line}" for line in lines)
    return f"{title}\n\n{body}\n"


def _meta(title: str, chain: list[AuditGate], decisions: dict[str, Decided], arch: Arch,
          base: str) -> tomlkit.TOMLDocument:
    doc = tomlkit.document()
    doc["title"] = title
    doc["summary"] = tomlkit.string(_summary(chain, arch), multiline=True)
    doc["arch"] = arch.name
    doc["current"] = base
    doc["upstream_status"] = str(UpstreamStatus.DRAFT)
    doc["created"] = now_iso()
    doc["decisions"] = decisions_table(decisions.values())
    return doc


def _summary(chain: list[AuditGate], arch: Arch) -> str:
    """What the audit said of each gate: what it admits, its class and its evidence."""
    out = [f"Drafted by `contrib enable` for {arch.name} from the audit:"]
    for gate in chain:
        out.append(f"- {label(gate)}: admits {admits_text(gate.admits)}; "
                   f"{gate.effect.why or 'excludes'}; "
                   f"class {gate.class_ or 'not read as excluding'}")
        if gate.reason:
            out.append(f"  {gate.reason}")
        out += [f"  evidence: {e}" for e in gate.evidence[:5]]
    return "\n".join(out) + "\n"


def _validate(ws: Workspace, check: UI, drafted: Drafted, arch: Arch) -> None:
    """Every stage that can run here: the verdict for the target's arch, the stages
    skipped and those required and not passed, on ``drafted``."""
    try:
        _, document = validate(ws, check, [drafted.patchset], arch=arch.name, junit=None)
    except ContribError as exc:
        drafted.verdict = f"not validated: {exc}"
        return
    drafted.verdict = str(document.get("verdict", "not validated"))
    for one in document.get("validations", [])[:1]:
        drafted.skipped = list(one.get("skipped", []))
        drafted.unmet = list(one.get("unmet", []))
        drafted.unproven = next((str(s.get("reason", "")) for s in one.get("run", {}).get(
            "stages", []) if s.get("name") == "ptx" and s.get("status") == "skipped"), "")
