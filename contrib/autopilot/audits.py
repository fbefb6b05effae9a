"""The dashboard's "Audit": every upstream audited for each ``[autopilot] audit_arch``.

Each upstream is audited at the tip its mirror holds: what this run's sync
fetched, or for an upstream no selected patchset lives on, what one fetch
brings (none with ``--no-fetch``); ``contrib audit``'s engine and its
tree-keyed cache do the rest.  "Since the last run" needs a memory that outlives a CI
runner: the cache (which the workflow keeps with ``actions/cache``) holds, per
upstream URL, branch and arch, the tip audited last and the tip before it.  A
run at a new tip compares with the last one; a run at the same tip compares
with the one before, so the section says the same thing until upstream moves
and an unchanged dashboard is not written.  A dry run leaves that memory alone.

The section holds no times or durations (they would change the body on every
run) and at most :data:`MAX_GATES` gates per list.  An audit that fails is one
line in the section and a :class:`~contrib.autopilot.state.Need`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

from contrib import environ
from contrib.arch import parse_arch
from contrib.audit.chains import VERDICTS
from contrib.audit.feature.explain import every
from contrib.audit.feature.show import feature_rows, markdown_step, read_at, shown
from contrib.audit.model import CAPABILITY, AuditGate, Mismatch
from contrib.audit.report import history_cell
from contrib.audit.run import audit_upstream
from contrib.autopilot.state import AuditView, Need, Run
from contrib.buglog import log_bug
from contrib.errors import ContribError
from contrib.git.cache import Mirror
from contrib.secrets import scrub
from contrib.ui import counted
from contrib.workspace.config import Upstream
from contrib.workspace.model import Workspace
from contrib.workspace.txn import atomic_write, check_inside

MAX_GATES = 30  # per list and upstream: the body has to stay under GitHub's limit
MAX_SECTION = 30_000  # characters, whatever the number of upstreams and archs


def audit_all(ws: Workspace, run: Run) -> list[AuditView]:
    """Audit every upstream for every ``audit_arch``; a failure becomes a Need of ``run``."""
    views = []
    for arch in ws.config.autopilot.audit_arch:
        for name in sorted(ws.config.upstreams):
            fetch = run.fetch and name not in run.fetched
            run.fetched.add(name)
            view = audit_one(ws, name, arch, fetch=fetch, remember=not run.dry_run)
            if view.error:
                run.problems.append(Need("audit", f"audit of {name} for {arch}: {view.error}",
                                         {"upstream": name, "arch": arch}))
            views.append(view)
    return views


def audit_one(ws: Workspace, name: str, arch: str, *, fetch: bool, remember: bool) -> AuditView:
    """The audit of ``name`` at its mirror's tip, compared with the tip audited before."""
    upstream = ws.config.upstream(name)
    view = AuditView(name, arch, upstream.github)
    try:
        mirror = Mirror(upstream).ensure(fetch_now=fetch)
        view.commit = str(mirror.tip())
        view.since = _since(upstream, arch, view.commit, mirror.git.try_rev_parse)
        audit = audit_upstream(ws, name, parse_arch(arch), at=view.commit, since=view.since,
                               fetch=False, features=every)
    except ContribError as exc:
        view.error = scrub(str(exc)).splitlines()[0]
        return view
    except Exception as exc:  # a bug must not cost the rest of the dashboard
        log = log_bug(exc)
        view.error = scrub(f"{type(exc).__name__}: {exc}").splitlines()[0] + \
            " (a bug in contrib's audit" + (f"; details in {log}" if log else "") + \
            ": please report it)"
        return view
    if remember:
        _remember(upstream, arch, view.commit, view.since)
    view.counts, view.excluding = audit.counts(), len(audit.excluding())
    view.uncovered = audit.uncovered_runtime()
    view.opened = [g for g in audit.gates if g.opened_by]
    view.closed = [g for g in audit.gates if g.closed_by]
    view.mismatches = audit.mismatches
    view.features = [(v, f, n) for v, f, n in feature_rows(shown(audit.features), arch,
                                                            read_at(audit))]
    view.feature_counts = {v.value: n for v in VERDICTS
                           if (n := sum(1 for c in audit.features if c.verdict == v))}
    return view


# -- the memory of the last audited tip ----------------------------------------------

def _memory(upstream: Upstream, arch: str) -> Path:
    key = hashlib.sha256(f"{upstream.url}\0{upstream.branch}\0{arch}".encode()).hexdigest()
    return environ.cache_root() / "audit" / "last" / f"{key[:32]}.json"


def _since(upstream: Upstream, arch: str, tip: str,
           exists: Callable[[str], object | None]) -> str | None:
    """The tip to compare ``tip`` with: the last one audited, or the one before it.

    A memory that is not what :func:`_remember` writes (edited by hand, nested too
    deeply to read, a value that is no commit) is refused naming the file: it would
    otherwise compare the tip with whatever it names."""
    path = _memory(upstream, arch)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None  # never audited here: nothing to compare with
    except (OSError, ValueError) as exc:
        raise _damaged(path, str(exc)) from None
    try:
        last = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _damaged(path, "not JSON" if isinstance(exc, ValueError) else "nested too deeply") from None
    if not isinstance(last, dict) or set(last) != {"commit", "since"} or not _is_sha(last["commit"]) \
            or not (last["since"] is None or _is_sha(last["since"])):
        raise _damaged(path, 'not {"commit": SHA, "since": SHA or null}')
    commit, before = last["commit"], last["since"]
    since = before if commit == tip else commit
    return str(since) if since and exists(str(since)) is not None else None


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40}", value) is not None


def _damaged(path: Path, why: str) -> ContribError:
    return ContribError(f"{path}: the memory of the last audited tip is damaged ({why}); "
                        "remove it (the next audit then compares with nothing)")


def _remember(upstream: Upstream, arch: str, tip: str, since: str | None) -> None:
    with contextlib.suppress(ContribError):  # without it the next run compares with nothing
        check_inside(environ.cache_root(), _memory(upstream, arch))  # no write through a symlink
        atomic_write(_memory(upstream, arch), json.dumps({"commit": tip, "since": since}))


# -- the section ---------------------------------------------------------------------

def section(views: list[AuditView]) -> str:
    """The "Audit" section of the dashboard ("" when no arch is audited)."""
    if not views:
        return ""
    out = ["## Audit", "",
           "Architecture gates that turn each target away, at each upstream's tip "
           "(`contrib audit UPSTREAM --arch ARCH` gives every detail).", ""]
    for arch in dict.fromkeys(v.arch for v in views):
        out += [f"### `{arch}`", ""]
        for view in (v for v in views if v.arch == arch):
            out += _upstream_lines(view)
    text = "\n".join(out)
    if len(text) > MAX_SECTION:
        text = text[:MAX_SECTION].rsplit("\n", 1)[0] + \
            "\n\n(cut short: `contrib audit` gives the rest)\n"
    return text


def _upstream_lines(view: AuditView) -> list[str]:
    head = f"#### {view.upstream}"
    if view.error:
        return [head, "", f"The audit failed: {view.error}", ""]
    counts = ", ".join(f"{n} {k}" for k, n in view.counts.items()) or "none"
    out = [f"{head} at {_commit(view.github, view.commit)}", "",
           f"{counted(view.excluding, 'gate')} turn{'s' if view.excluding == 1 else ''} `{view.arch}` away ({counts}); "
           f"{len(view.uncovered)} at runtime that no patchset covers.", ""]
    if view.mismatches:  # first: the target is sent where the upstream below refuses it
        out += [f"**{counted(len(view.mismatches), 'mismatch', 'mismatches')} with the "
                "upstream below** (admitted here, refused there):", ""]
        out += [f"- {_gate_at(view, m)}: {m.message}"
                for m in view.mismatches[:MAX_GATES]]
        out += _more(len(view.mismatches))
        out.append("")
    if view.features:  # by feature, the worst first, as `contrib audit` leads
        said = ", ".join(f"{n} {v}" for v, n in view.feature_counts.items())
        out += [f"{counted(sum(view.feature_counts.values()), 'feature')} ({said}); "
                f"{counted(len(view.features), 'row')} with a gate on the way:", "",
                "| verdict | feature | next |", "| --- | --- | --- |"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in (v, f"`{f}`", markdown_step(n))) + " |"
                for v, f, n in view.features[:MAX_GATES]]
        out += _more(len(view.features))
        out.append("")
    if view.uncovered:
        out += ["| uncovered runtime gate | function | class |", "| --- | --- | --- |"]
        out += [f"| {_gate(view, g)} | `{g.function}` | {g.class_ or '-'} |"
                for g in view.uncovered[:MAX_GATES]]
        out += _more(len(view.uncovered))
        out.append("")
    if view.since is None:
        return [*out, "No earlier audit to compare with yet.", ""]
    since = _commit(view.github, view.since)
    if not view.opened and not view.closed:
        return [*out, f"Since {since}: nothing opened or closed.", ""]
    for word, gates in (("Opened", view.opened), ("Closed", view.closed)):
        if gates:
            out += [f"{word} since {since}:", ""]
            out += [f"- {_gate(view, g)} `{g.function}`: {_history(view, g)}"
                    for g in gates[:MAX_GATES]]
            out += _more(len(gates))
            out.append("")
    return out


def _more(count: int) -> list[str]:
    return [f"… and {count - MAX_GATES} more"] if count > MAX_GATES else []


def _gate(view: AuditView, gate: AuditGate) -> str:
    """``file:line``, linked to the line at the audited commit on GitHub."""
    text = f"`{gate.file}:{gate.line}`"
    if not view.github:
        return text
    return f"[{text}](https://github.com/{view.github}/blob/{view.commit}/{gate.file}#L{gate.line})"


def _gate_at(view: AuditView, mismatch: Mismatch) -> str:
    """A mismatch's gate, as :func:`_gate` writes an audited one."""
    return _gate(view, AuditGate(mismatch.file, mismatch.line, mismatch.function, CAPABILITY,
                                 None, False))


def _history(view: AuditView, gate: AuditGate) -> str:
    link = gate.opened_by or gate.closed_by
    if not link:
        return history_cell(gate) or "commit not found"
    pr = f" (#{link.pr})" if link.pr and f"#{link.pr}" not in link.subject else ""
    return f"{_commit(view.github, link.sha)} {link.subject}{pr}"


def _commit(github: str, sha: str) -> str:
    text = f"`{sha[:7]}`"
    return f"[{text}](https://github.com/{github}/commit/{sha})" if github else text
