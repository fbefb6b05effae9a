"""The title and body of a patchset's pull request.

The body tells a reviewer what the change is and what was validated where:
the summary from ``patchset.toml``, the patch list, the validation table from
``validation.json`` (each stage, the host and GPU it ran on, what was skipped
and why), a ``git range-diff`` against the previously pushed version on
updates, the patchsets it requires, and a hidden marker that ties the PR to
``UPSTREAM/NAME`` at one version.  Rendering is a pure function of its
inputs, so an unchanged patchset yields a byte-identical body (and no edit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contrib.secrets import scrub

# GitHub refuses bodies over 65,536 characters; keep room for the rest.
MAX_BODY = 60_000
MAX_RANGE_DIFF = 20_000


@dataclass(frozen=True)
class CommitLine:
    """One commit on the PR branch, as the patch list shows it."""

    sha: str
    patch: str  # the patch file it came from
    subject: str
    author: str


@dataclass(frozen=True)
class BodyInput:
    """Everything the body is made of."""

    target: str  # UPSTREAM/NAME
    version: str  # the upstream commit this version applies to
    base_branch: str
    summary: str
    commits: Sequence[CommitLine]
    validation: Mapping[str, Any] | None
    forced: bool = False
    range_diff: str | None = None
    previous_version: str | None = None
    requires: Sequence[str] = ()


def marker(target: str, version: str) -> str:
    """The hidden line that ties a PR body to one patchset version."""
    return f"<!-- contrib:patchset={target} version={version} -->"


def render_title(title: str, target: str) -> str:
    """The PR title: the patchset's title, or its name when it has none."""
    return " ".join(title.split()) or target


def render_body(data: BodyInput) -> str:
    """The full Markdown body, scrubbed of any registered secret."""
    parts = [data.summary.strip() or f"Patchset `{data.target}`."]
    if data.requires:
        parts.append("**Requires:** " + ", ".join(data.requires))
    parts.append(_patch_list(data))
    parts.append(_validation_section(data.validation, data.forced))
    if data.range_diff:
        parts.append(_range_diff_section(data.range_diff, data.previous_version, data.version))
    parts.append(
        f"<sub>Carried with contrib as `{data.target}` on `{data.base_branch}` at "
        f"{data.version[:12]}. The branch is rewritten when the patchset is rebased.</sub>"
    )
    parts.append(marker(data.target, data.version))
    body = "\n\n".join(parts) + "\n"
    if len(body) > MAX_BODY:
        body = body[: MAX_BODY - 200] + "\n\n… (body truncated)\n\n" + marker(data.target, data.version) + "\n"
    return scrub(body)


def _patch_list(data: BodyInput) -> str:
    lines = [f"### Patches ({len(data.commits)}, on `{data.version[:12]}`)", ""]
    for i, c in enumerate(data.commits, 1):
        lines.append(f"{i}. {_md(c.subject)} ({_md(c.author)}) — `{c.patch}`, {c.sha[:12]}")
    return "\n".join(lines)


def _md(text: str) -> str:
    """Keep one-line text from breaking Markdown tables and lists."""
    return " ".join(text.split()).replace("|", "\\|")


def _stages(validation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Stages as a list of dicts with a name, whether stored as a list or a mapping."""
    raw = validation.get("stages") or []
    if isinstance(raw, Mapping):
        return [{"name": k, **v} if isinstance(v, Mapping) else {"name": k, "status": v}
                for k, v in raw.items()]
    return [dict(s) for s in raw if isinstance(s, Mapping)]


def overall(validation: Mapping[str, Any] | None) -> str | None:
    """The recorded verdict (``passed``/``failed``/...), or None without validation."""
    if validation is None:
        return None
    verdict = (validation.get("verdict") or validation.get("overall")
               or validation.get("status") or validation.get("result"))
    if verdict:
        return str(verdict)
    statuses = [str(s.get("status", "")) for s in _stages(validation)]
    if not statuses:
        return None
    return "failed" if "failed" in statuses else "passed"


def _host_text(host: Any) -> str:
    """``hostname, 2x NVIDIA RTX PRO 6000 (12.0), nvcc 13.0`` from a host dict."""
    if not isinstance(host, Mapping):
        return str(host) if host else ""
    bits = [str(host.get("hostname") or host.get("name") or "")]
    gpus = host.get("gpus") or []
    if isinstance(gpus, Sequence) and not isinstance(gpus, str) and gpus:
        names: dict[str, int] = {}
        for gpu in gpus:
            if isinstance(gpu, Mapping):
                cc = gpu.get("compute_capability") or gpu.get("capability") or ""
                label = f"{gpu.get('name', 'GPU')}" + (f" (sm {cc})" if cc else "")
            else:
                label = str(gpu)
            names[label] = names.get(label, 0) + 1
        bits += [f"{n}x {label}" if n > 1 else label for label, n in names.items()]
    elif "gpus" in host:
        bits.append("no GPU" if host.get("nvidia_smi", True) else "no GPU (no nvidia-smi)")
    nvcc = host.get("nvcc") or host.get("nvcc_version")
    if nvcc:
        bits.append(f"nvcc {nvcc}")
    return ", ".join(b for b in bits if b)


def _arch_name(arch: Any) -> str:
    """validation.json keeps arch as {"name": "sm_120a", ...}; older files as a string."""
    if isinstance(arch, Mapping):
        return str(arch.get("name") or "?")
    return str(arch or "?")


def _findings(stage: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = stage.get("findings")
    if isinstance(raw, Sequence) and not isinstance(raw, str):
        return [f for f in raw if isinstance(f, Mapping)]
    return []


def _stage_notes(stage: Mapping[str, Any]) -> str:
    notes = []
    if stage.get("reason"):
        notes.append(str(stage["reason"]))
    counts = stage.get("counts")
    if isinstance(counts, Mapping) and counts:
        notes.append(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in counts.items()))
    elif _findings(stage):
        notes.append(f"{len(_findings(stage))} finding(s)")
    tests = stage.get("selected") or stage.get("selected_tests") or stage.get("tests")
    if isinstance(tests, Sequence) and not isinstance(tests, str) and tests:
        shown = ", ".join(f"`{t}`" for t in list(tests)[:5])
        notes.append(f"tests: {shown}" + (f" (+{len(tests) - 5})" if len(tests) > 5 else ""))
    return _md("; ".join(notes))


def _validation_section(validation: Mapping[str, Any] | None, forced: bool) -> str:
    head = "### Validation"
    if validation is None:
        return f"{head}\n\n**Not validated**: opened with `contrib open-pr --force`."
    verdict = overall(validation) or "unknown"
    arch = _arch_name(validation.get("arch"))
    host = _host_text(validation.get("host"))
    lines = [head, "", f"`contrib validate` for **{arch}**: **{verdict}**"
             + (f" on {_md(host)}" if host else "") + "."]
    if forced:
        lines.append("")
        lines.append(f"**Validation was forced**: the recorded verdict is `{verdict}`; "
                     "opened with `contrib open-pr --force`.")
    stages = _stages(validation)
    if stages:
        lines += ["", "| stage | result | ran on | notes |", "| --- | --- | --- | --- |"]
        for stage in stages:
            where = _host_text(stage.get("host")) or (host if stage.get("status") != "skipped" else "")
            lines.append(f"| {_md(str(stage.get('name') or stage.get('stage') or '?'))} "
                         f"| {_md(str(stage.get('status', '?')))} | {_md(where) or '—'} "
                         f"| {_stage_notes(stage) or '—'} |")
    waived = [(st, f) for st in stages for f in _findings(st) if f.get("waived") is not None]
    if waived:
        lines += ["", "Waived findings (still reported, with the reason recorded in patchset.toml):"]
        lines += [f"- {_md(str(st.get('name', '?')))}: `{_md(str(f.get('location', '?')))}` "
                  f"{_md(str(f.get('message', '')))} — waived: {_md(str(f['waived']))}"
                  for st, f in waived]
    return "\n".join(lines)


def _range_diff_section(range_diff: str, previous: str | None, version: str) -> str:
    text = range_diff.rstrip()
    if len(text) > MAX_RANGE_DIFF:
        text = text[:MAX_RANGE_DIFF] + "\n… (range-diff truncated)"
    text = text.replace("```", "`\u200b``")  # keep the fence closed
    since = f" (version {previous[:12]} -> {version[:12]})" if previous else ""
    return (f"### Changes since the previous push{since}\n\n"
            f"<details><summary>git range-diff</summary>\n\n```\n{text}\n```\n\n</details>")
