"""The title and body of a patchset's pull request.

The body tells a reviewer what the change is and what was validated where:
a first line with the validation verdict as it is, the summary from
``patchset.toml``, what was proven for the patchset's arch and what was not
(:mod:`contrib.pr.proof`: the stages passed, those skipped and why, whether a GPU
of the target ran it), the chain of gates a ``contrib enable`` draft opens and
what lies below it, the patch list, the validation record (:mod:`contrib.record`:
each run, the host and GPUs it ran on, each stage, what was skipped and why; the bench
stage's figures with the GPUs, driver and CUDA they were measured on, or, for a patch
that changes a kernel path, that no figure was measured), the sign-off the upstream's
contributing guide asks for (:mod:`contrib.carry.signoff`), a
``git range-diff`` against the previously pushed version on updates, the
patchsets it requires, and a hidden marker that ties the PR to
``UPSTREAM/NAME`` at one version.  Rendering is a pure function of its
inputs, so an unchanged patchset yields a byte-identical body (and no edit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contrib.pr.conventions import (
    Conventions,
    checks_block,
    collected_block,
    hooks_block,
    owners_block,
    signoff_block,
    ticks,
)
from contrib.pr.proof import Built, Opened, Proof
from contrib.pr.template import Check, Role, Section, fill
from contrib.record import Run, Stage, StageStatus, Standing
from contrib.secrets import scrub
from contrib.ui import counted

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
    validation: Standing
    forced: bool = False
    problem: str = ""  # why open-pr would have refused, when forced
    range_diff: str | None = None
    previous_version: str | None = None
    requires: Sequence[str] = ()
    other_lines: Sequence[str] = ()  # the patchset's other target branches, if any
    proof: Proof | None = None  # from the record and [decisions]; None: the arch is unknown
    conventions: Conventions | None = None  # the upstream's template, hooks and owners
    kernel: tuple[str, ...] = ()  # the C/CUDA sources the patch changes


def marker(target: str, version: str) -> str:
    """The hidden line that ties a PR body to one patchset version."""
    return f"<!-- contrib:patchset={target} version={version} -->"


def render_title(title: str, target: str) -> str:
    """The PR title: the patchset's title, or its name when it has none."""
    return " ".join(title.split()) or target


def render_body(data: BodyInput) -> str:
    """The full Markdown body, scrubbed of any registered secret."""
    pieces = _pieces(data)
    conventions = data.conventions
    if conventions is not None and conventions.template is not None:
        middle = templated(conventions, pieces, data.validation)
    else:
        middle = [text for _, text in pieces]
    parts = [verdict_line(data.validation, data.forced), *middle]
    parts.append(
        f"<sub>Carried with contrib as `{data.target}` on `{data.base_branch}` at "
        f"{data.version[:12]}. The branch is rewritten when the patchset is rebased.</sub>"
    )
    parts.append(marker(data.target, data.version))
    body = "\n\n".join(parts) + "\n"
    if len(body) > MAX_BODY:
        body = body[: MAX_BODY - 200] + "\n\n… (body truncated)\n\n" + marker(data.target, data.version) + "\n"
    return scrub(body)


Place = Role | Check  # a template's section by what it asks for, or the item it holds


def _pieces(data: BodyInput) -> list[tuple[tuple[Place, ...], str]]:
    """The body's parts in their order, each with the template sections it belongs in,
    first choice first."""
    pieces: list[tuple[tuple[Place, ...], str]] = [
        ((Role.DESCRIPTION, Role.CHANGES), data.summary.strip() or f"Patchset `{data.target}`.")]
    if data.requires:
        pieces.append(((Role.ISSUES, Role.DESCRIPTION),
                       "**Requires:** " + ", ".join(data.requires)))
    if data.proof is not None and data.proof.others is not None:
        pieces.append(((Role.TESTS, Role.DESCRIPTION), others_line(data.proof.others)))
    if data.proof is not None and data.proof.validated:
        pieces.append(((Role.TESTS,), proof_section(data.proof)))
    if data.proof is not None and data.proof.chain:
        pieces.append(((Role.CHANGES, Role.DESCRIPTION), chain_section(data.proof)))
    pieces.append(((Role.CHANGES, Role.DESCRIPTION), _patch_list(data)))
    pieces.append(((Role.TESTS,), _validation_section(data.validation, data.forced,
                                                      data.problem)))
    performance = performance_line(data.validation, data.kernel)
    if performance:
        pieces.append(((Role.PERFORMANCE, Role.TESTS), performance))
    pieces += convention_pieces(data.conventions)
    if data.range_diff:
        pieces.append(((Role.NOTES, Role.CHANGES), _range_diff_section(
            data.range_diff, data.previous_version, data.version)))
    if data.other_lines:
        pieces.append(((Role.DESCRIPTION,), f"This PR is for the `{data.base_branch}` line; "
                       f"the same change is carried on "
                       f"{', '.join(f'`{b}`' for b in data.other_lines)} too, each line with "
                       "a PR of its own where it still needs one."))
    return pieces


def convention_pieces(conventions: Conventions | None) -> list[tuple[tuple[Place, ...], str]]:
    """The hooks run and the code owners, as pieces of the body."""
    if conventions is None:
        return []
    pieces: list[tuple[tuple[Place, ...], str]] = []
    if conventions.hooks is not None:
        pieces.append(((Check.HOOKS, Role.CHECKLIST, Role.TESTS),
                       hooks_block(conventions.hooks, conventions.hook_failures_allowed)))
    if conventions.checks is not None:
        pieces.append(((Role.CHECKLIST, Role.TESTS),
                       checks_block(conventions.checks, conventions.hook_failures_allowed)))
    if conventions.collected:
        pieces.append(((Role.TESTS, Check.TESTS_PASS, Role.CHECKLIST),
                       collected_block(conventions)))
    if conventions.signoff is not None:
        pieces.append(((Role.CHECKLIST, Role.NOTES), signoff_block(conventions.signoff)))
    if conventions.owners is not None and conventions.touched:
        pieces.append(((Role.NOTES,), owners_block(conventions.owners, conventions.owned())))
    return pieces


def templated(conventions: Conventions, pieces: Sequence[tuple[tuple[Place, ...], str]],
              validation: Standing) -> list[str]:
    """The upstream's template with each piece in the first section it belongs in, and
    the checklist ticked where contrib ran the thing; the pieces no section takes after
    it."""
    template = conventions.template
    assert template is not None
    blocks: dict[Section, list[str]] = {}
    rest = []
    for places, text in pieces:
        section = next((s for p in places if (s := template.section_for(p)) is not None), None)
        if section is None:
            rest.append(text)
        else:
            blocks.setdefault(section, []).append(text)
    filled = fill(template, blocks, ticks(conventions, validation))
    return [filled, *rest, f"<sub>Sections from the upstream's `{template.path}`.</sub>"]


def _patch_list(data: BodyInput) -> str:
    lines = [f"### Patches ({len(data.commits)}, on `{data.version[:12]}`)", ""]
    for i, c in enumerate(data.commits, 1):
        lines.append(f"{i}. {_md(c.subject)} ({_md(c.author)}) — `{c.patch}`, {c.sha[:12]}")
    return "\n".join(lines)


_SHOWN = 5  # units listed below the chain; the rest are counted


def proof_section(proof: Proof) -> str:
    """What the record proves for the arch, and what it does not, in a few lines: a
    draft the autopilot holds back is never proposed, so no hold-back reason is here."""
    lines = ["### What was proven", "", f"For {proof.arch}, `contrib validate` passed:", ""]
    lines += [f"- {_md(p)}" for p in proof.passed] or ["- no stage"]
    gaps = [f"- {_md(_named(f, 'failed'))}" for f in proof.failed]
    gaps += [f"- {_md(_named(s, 'skipped'))}" for s in proof.skipped]
    if not proof.gpu:
        gaps.append(f"- No GPU of the target ({proof.arch}) ran this patch.")
    else:
        lines += ["", f"A GPU of the target ({proof.arch}) ran this patch."]
    return "\n".join(lines + (["", "Not proven here:", "", *gaps] if gaps else []))


def _named(item: str, how: str) -> str:
    """``tests: why`` -> ``tests, skipped: why``."""
    name, _, why = item.partition(": ")
    return f"{name}, {how}: {why}" if why else f"{name}, {how}"


def chain_section(proof: Proof) -> str:
    """The gates the patch opens, in the order ``contrib enable`` chained them, and the
    CUDA units below them."""
    lines = ["### The chain", "",
             f"The gates this patch opens for {proof.arch}, in the order `contrib enable` "
             "chained them from its audit of the base:", ""]
    lines += [f"{i}. {_gate(g)}" for i, g in enumerate(proof.chain, 1)]
    return "\n".join(lines + ["", *_below(proof)])


def _gate(gate: Opened) -> str:
    at = gate.at
    head = (f"`{_md(f'{at.path}:{at.line}')}` `{_md(at.function)}`" if at is not None
            else f"`{_md(gate.label)}`")
    if gate.left:
        return f"{head}: left as it is: {_md(gate.why)}"
    if not gate.read:
        return f"{head}: changed; the gates stage did not read it"
    after = _list(gate.after) if gate.after is not None else "a value contrib cannot read"
    if gate.before is None:
        return f"{head}: a new gate, admits majors {after}"
    return f"{head}: admits majors {_list(gate.before)} -> {after}"


def _list(majors: Sequence[int]) -> str:
    return ", ".join(map(str, majors)) or "none"


def _below(proof: Proof) -> list[str]:
    """The units the ptx stage compiled below the chain, or why none."""
    ptx = proof.ptx
    if proof.built:
        lines = [f"Below them, the CUDA units the ptx stage compiled for "
                 f"{proof.compute or proof.arch}:", ""]
        lines += [f"- {_unit(u)}" for u in proof.built[:_SHOWN]]
        more = len(proof.built) - _SHOWN
        return lines + ([f"- and {counted(more, 'unit')} more"] if more > 0 else [])
    if ptx is None:
        return ["Below them: nothing was compiled here (no ptx stage in the record)."]
    if ptx.status == StageStatus.NOT_APPLICABLE:
        return [f"Below them: no device code ({_md(ptx.reason)})."]
    return [f"Below them: nothing was compiled here (ptx {ptx.status}: {_md(ptx.reason)})."]


def _unit(unit: Built) -> str:
    head = f"`{_md(unit.path)}` ({_md(unit.why)})" if unit.why else f"`{_md(unit.path)}`"
    if not unit.ok:
        return f"{head}: not compiled here"
    if not unit.entries:
        return f"{head}: no kernel of its own; the kernels it launches were not compiled here"
    kernels = ", ".join(f"`{_md(k)}`" for k in unit.kernels[:3]) + (
        ", ..." if len(unit.kernels) > 3 else "")
    return f"{head}: {counted(unit.entries, 'kernel entry')}" + (f" ({kernels})" if kernels
                                                                  else "")


def others_line(stage: Stage) -> str:
    """What the ``others`` stage found on the archs the upstream already builds."""
    if stage.status == StageStatus.PASSED:
        return f"**Other architectures:** {_md(stage.reason)} (`contrib validate`, others stage)."
    changed = [f"{d.get('arch')}: {d.get('text')}" for d in stage.details.get("differences") or []
               if isinstance(d, Mapping)] or [f.message for f in stage.findings if f.blocking]
    if stage.status == StageStatus.FAILED and changed:
        shown = "; ".join(_md(c) for c in changed[:_SHOWN])
        more = f" (+{len(changed) - _SHOWN} more)" if len(changed) > _SHOWN else ""
        return f"**Other architectures change:** {shown}{more} (`contrib validate`, others stage)."
    return f"**Other architectures:** not shown unchanged (others {stage.status}: {_md(stage.reason)})."


def _md(text: str) -> str:
    """Keep one-line text from breaking Markdown tables and lists."""
    return " ".join(text.split()).replace("|", "\\|")


def verdict_line(validation: Standing, forced: bool) -> str:
    """The body's first line: the verdict as it is, never better."""
    if validation.record is None:
        line = f"**Not validated** ({_md(validation.reason)})"
    else:
        line = f"**Validation:** {_md(validation.summary())}"
    return line + (". Opened with `contrib open-pr --force`." if forced else ".")


def _stage_notes(stage: Stage) -> str:
    notes = [stage.reason] if stage.reason else []
    if stage.counts:
        notes.append(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in stage.counts.items()))
    tests = stage.details.get("selected")
    if isinstance(tests, list) and tests:
        shown = ", ".join(f"`{t}`" for t in tests[:5])
        notes.append(f"tests: {shown}" + (f" (+{len(tests) - 5})" if len(tests) > 5 else ""))
    return _md("; ".join(str(n) for n in notes))


def _run_table(run: Run) -> list[str]:
    lines = ["", f"**{run.arch}** ({run.kind} run, {run.compute}) on {_md(run.host.describe())}, "
             f"finished {run.finished_at}:", "", "| stage | result | notes |", "| --- | --- | --- |"]
    lines += [f"| {_md(s.name)} | {s.status} | {_stage_notes(s) or '—'} |" for s in run.stages]
    return lines


def bench_table(runs: Sequence[Run]) -> list[str]:
    """The bench stage's figures, one row per run and metric: medians, ratio, interval;
    then where each run measured them: its GPUs, the driver and CUDA (nvcc)."""
    rows, measured = [], []
    for run in runs:
        stage = run.stage("bench")
        figures = (stage.details.get("metrics") or []) if stage is not None else []
        for figure in figures:
            rows.append(f"| {run.arch} ({run.kind}) | {_md(str(figure.get('metric')))} "
                        f"({figure.get('better')} is better) | {_figure_cells(figure)} |")
        if figures and stage is not None:
            measured.append(f"- {run.arch} ({run.kind}): {_md(_platform(run, stage))}")
    if not rows:
        return []
    return ["", "Benchmark (`contrib validate` bench stage: base and patched in interleaved pairs; "
            "95% interval of the ratio bootstrapped over the pairs):", "",
            "| run | metric | base median | patched median | patched/base | 95% CI | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- |", *rows, "", "Measured on:", "",
            *measured]


def _platform(run: Run, stage: Stage) -> str:
    """``GPU 0: NVIDIA H200 (9.0), 1: ...; driver 580.65.06; CUDA: nvcc release 13.0``."""
    host = run.host
    used = [str(g) for g in stage.details.get("gpus") or []]
    if not used:
        used = [f"{g.name} ({g.compute_capability})" for g in host.gpus]
    gpus = f"GPU {', '.join(used)}" if used else "no GPU recorded"
    driver = f"driver {host.driver}" if host.driver else "driver not recorded"
    cuda = f"CUDA: nvcc {host.nvcc}" if host.nvcc else "CUDA: no nvcc found"
    return f"{gpus}; {driver}; {cuda}"


def performance_line(validation: Standing, kernel: Sequence[str]) -> str:
    """For a patch that changes a kernel path and has no measured figure: a line that
    says so, and why (no bench stage, or the bench stage's own reason)."""
    runs = validation.record.runs if validation.record is not None else ()
    if not (kernel or any(_units_at_stake(r) for r in runs)):
        return ""
    stages = [s for r in runs if (s := r.stage("bench")) is not None]
    if any(s.details.get("metrics") for s in stages):
        return ""
    if validation.record is None:
        why = "the version is not validated"
    elif not stages:
        why = "the record has no bench stage"
    else:
        why = "; ".join(dict.fromkeys(f"bench {s.status}: {s.reason}" for s in stages))
    what = (f"it changes {', '.join(f'`{_md(p)}`' for p in kernel[:_SHOWN])}"
            + (f" and {counted(len(kernel) - _SHOWN, 'more CUDA source')}"
               if len(kernel) > _SHOWN else "") if kernel
            else "its ptx stage found CUDA units at stake")
    return f"**Performance:** no figure was measured ({_md(why)}); {what}."


def _units_at_stake(run: Run) -> bool:
    """The run's ptx stage had CUDA units to compile: a kernel path, a JIT module's
    build among them (the stage is not-applicable only when there is none)."""
    ptx = run.stage("ptx")
    return ptx is not None and ptx.status != StageStatus.NOT_APPLICABLE


def _figure_cells(figure: Mapping[str, Any]) -> str:
    against = figure.get("compared_with") or "base"
    reference = figure.get(f"{against}_median")
    if figure.get("ratio") is None:  # not compared: the reason stands where the number would
        why = figure.get("base_error") or figure.get("note") or "no value"
        return (f"{_md(str(why))} | {_num(figure.get('patched_median'))} | — | — | "
                f"{figure.get('verdict')}")
    low, high = figure.get("ci95") or (None, None)
    label = "" if against == "base" else " (baseline)"
    note = f": {figure['note']}" if figure.get("note") else ""
    return (f"{_num(reference)}{label} | {_num(figure.get('patched_median'))} | "
            f"{figure['ratio']:.3f} | {_num(low)} to {_num(high)} | {figure.get('verdict')}{_md(note)}")


def _num(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "—"


def _validation_section(validation: Standing, forced: bool, problem: str) -> str:
    head = "### Validation"
    if validation.record is None:
        return (f"{head}\n\n**Not validated**: {_md(validation.reason)}. "
                "Opened with `contrib open-pr --force`.")
    lines = [head, "", f"`contrib validate`: **{_md(validation.summary())}**."]
    if forced:
        lines += ["", f"**Validation was forced**: {_md(problem)}; opened with "
                  "`contrib open-pr --force`."]
    runs = validation.record.runs
    for run in runs:
        lines += _run_table(run)
    lines += bench_table(runs)
    waived = [(r, st, f) for r in runs for st in r.stages for f in st.findings
              if f.waived is not None]
    if waived:
        lines += ["", "Waived findings (still reported, with the reason recorded in patchset.toml):"]
        lines += [f"- {r.arch} {_md(st.name)}: `{_md(f.location)}` {_md(f.message)} — "
                  f"waived: {_md(str(f.waived))}" for r, st, f in waived]
    return "\n".join(lines)


def _range_diff_section(range_diff: str, previous: str | None, version: str) -> str:
    text = range_diff.rstrip()
    if len(text) > MAX_RANGE_DIFF:
        text = text[:MAX_RANGE_DIFF] + "\n… (range-diff truncated)"
    text = text.replace("```", "`\u200b``")  # keep the fence closed
    since = f" (version {previous[:12]} -> {version[:12]})" if previous else ""
    return (f"### Changes since the previous push{since}\n\n"
            f"<details><summary>git range-diff</summary>\n\n```\n{text}\n```\n\n</details>")
