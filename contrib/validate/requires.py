"""Cross-project requirements: a patchset that is only correct with a fix elsewhere.

The sglang SM120 gate is only correct with a flashinfer that contains #3903
(or carries our backport).  A patchset declares that in ``patchset.toml``::

    [[requires]]
    upstream = "flashinfer"                      # the other upstream (in contrib.toml)
    commit = "2deed6c15..."                      # the fix that must be present
    patchset = "flashinfer/sm120-trtllm-comm"    # optional: our backport of it
    pin_file = "python/pyproject.toml"           # where the patched tree pins it
    pin_package = "flashinfer_python"            # the pinned package name
    tag_format = "v{version}"                    # optional: release tag of a version
    reason = "..."

``check`` reads the pin from the *patched* tree, resolves the release tag in
the other upstream's cache and answers ``satisfied`` (the tag contains the
commit), ``satisfied by patchset ...`` (the workspace carries a patchset on
that tag) or ``failed`` with the exact fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contrib.errors import ContribError
from contrib.git.cache import Mirror
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.validation import Requirement


@dataclass
class Outcome:
    """What one requirement check found."""

    requirement: Requirement
    status: str  # satisfied | failed | skipped
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"requires": self.requirement.describe(), "status": self.status,
                "message": self.message, **self.details}


def requirements(ps: Patchset) -> list[Requirement]:
    """The patchset's ``[[requires]]`` entries (checked when patchset.toml was read)."""
    return list(ps.requires)


def read_pin(text: str, package: str) -> str | None:
    """The exact version pinned for ``package`` (``==X``), either spelling of its name."""
    names = {package, package.replace("_", "-"), package.replace("-", "_")}
    alternatives = "|".join(re.escape(n) for n in sorted(names))
    match = re.search(rf"[\"']\s*(?:{alternatives})\s*(?:\[[^\]]*\])?\s*==\s*([\w.+-]+)", text)
    return match.group(1) if match else None


def check(ws: Workspace, ps: Patchset,
          read_patched: Callable[[str], bytes | None]) -> list[Outcome]:
    """Check every requirement of ``ps`` against the patched tree and the caches."""
    return [_check_one(ws, ps, req, read_patched) for req in requirements(ps)]


def _check_one(ws: Workspace, ps: Patchset, req: Requirement,
               read_patched: Callable[[str], bytes | None]) -> Outcome:
    mirror = Mirror(ws.config.upstream(req.upstream)).ensure(fetch_now=False)
    fix = ""
    if req.commit:
        try:
            fix = mirror.resolve(req.commit)
        except ContribError as exc:
            return Outcome(req, "failed", f"{req.describe()}: {exc}")
    if not req.pin_file:
        return Outcome(req, "skipped", f"no pin_file declared; cannot tell which {req.upstream} "
                       f"{ps.target} runs with (needs {req.describe()})")
    raw = read_patched(req.pin_file)
    if raw is None:
        return Outcome(req, "failed", f"{req.pin_file} is not in the patched tree; fix "
                       f"pin_file in {ps.meta_path}")
    version = read_pin(raw.decode("utf-8", errors="replace"), req.pin_package)
    if version is None:
        return Outcome(req, "failed", f"{req.pin_file} pins no exact {req.pin_package}==X; "
                       f"cannot prove {req.describe()} is present")
    tag = req.tag_format.format(version=version)
    details: dict[str, Any] = {"pin": f"{req.pin_package}=={version}", "tag": tag}
    if fix:
        details["commit"] = fix
    tag_sha = mirror.git.try_rev_parse(f"refs/tags/{tag}")
    if tag_sha is None:
        return Outcome(req, "failed", f"{req.pin_file} pins {req.pin_package}=={version} but "
                       f"{req.upstream} has no tag {tag}; fetch it (contrib status {req.upstream}) "
                       "or fix tag_format", details)
    details["tag_sha"] = tag_sha
    if fix and mirror.git.is_ancestor(fix, tag_sha):
        return Outcome(req, "satisfied", f"{req.pin_package}=={version} ({tag}) contains "
                       f"{fix[:12]}", details)
    carrier = _carrying_patchset(ws, req, tag_sha, mirror)
    if carrier:
        details["patchset"] = carrier
        return Outcome(req, "satisfied", f"satisfied by patchset {carrier}: it carries the fix "
                       f"on {tag} ({tag_sha[:12]})", details)
    if not fix:  # a draft's requirement: only our patchset carries the fix
        name = req.patchset.partition("/")[2]
        todo = (f"carry it at {tag} (contrib sync {req.patchset} --to {tag})"
                if (ws.root / "patchsets" / req.upstream / name).is_dir() else
                f"draft it there (contrib enable {req.upstream} --at {tag} --name {name})")
        return Outcome(req, "failed", f"{req.pin_package}=={version} ({tag}) lacks patchset "
                       f"{req.patchset}: {todo}", details)
    first = _first_release(mirror, fix)
    fix_hint = (f"bump {req.pin_package} to {first}" if first
                else f"wait for a {req.upstream} release containing {fix[:12]}")
    if req.patchset:
        fix_hint += (f", or carry patchset {req.patchset} at {tag} "
                     f"(contrib sync {req.patchset} --to {tag})")
    return Outcome(req, "failed", f"{req.pin_package}=={version} ({tag}) lacks {req.upstream} "
                   f"{fix[:12]}: {fix_hint}", details)


def _carrying_patchset(ws: Workspace, req: Requirement, tag_sha: str, mirror: Mirror) -> str:
    """The patchset (and target) that carries the fix for the pinned release: one with a
    version at that release's tag, or one carried on a release line (a target branch
    other than the upstream's own) whose current version descends from the tag."""
    if not req.patchset:
        return ""
    try:
        targets = ws.patchsets([req.patchset])
    except ContribError:
        return ""
    if any(v.base == tag_sha for v in targets[0].versions()):
        return targets[0].target
    default = ws.config.upstream(req.upstream).branch
    for carrier in targets:
        base = carrier.current.base
        if (carrier.branch != default and mirror.git.try_rev_parse(base)
                and mirror.git.is_ancestor(tag_sha, base)):
            return carrier.target
    return ""


def _first_release(mirror: Mirror, commit: str) -> str:
    out = mirror.git.run("tag", "--contains", commit, "--sort=v:refname", "--list", "v*")
    tags = [t for t in out.split() if re.match(r"^v\d+(\.\d+)*$", t)]
    return tags[0] if tags else ""
