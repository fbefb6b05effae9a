"""The upstream's own conventions for a PR, read from its files at the commit.

Its pull request template (:mod:`contrib.pr.template`, at the base: the one GitHub
offers), its ``pre-commit`` hooks (:mod:`contrib.pr.hooks`, at the patched tip: the
ones its CI runs on the PR) and its CODEOWNERS (:mod:`contrib.pr.owners`, at the base:
the file GitHub reads on the PR's target).  Nothing here is written per upstream.

Its other PR checks (flashinfer's ``scripts/check_pr_api_diff.py``, say), the scripts
of the tree its PR workflows run, are run in the hooks' checkout, offline
(:mod:`contrib.pr.checks`); a failed one refuses the PR as a failed hook does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contrib.carry.signoff import Asked, asks_for_signoff
from contrib.git.repo import Git
from contrib.pr.checks import CheckResult, Checks, CheckStatus, run_checks
from contrib.pr.collected import Collected, Collection, collected, is_test
from contrib.pr.hooks import Hooks, HookStatus, run_hooks
from contrib.pr.owners import CodeOwners, Owned, read_codeowners
from contrib.pr.template import Check, Template, read_template
from contrib.record import StageStatus, Standing

_FOLD = 5  # more checks than this that need CI to run: folded under <details>


@dataclass(frozen=True)
class SignOffs:
    """The upstream asks for ``Signed-off-by``: where, and the sign-offs of each commit
    of the PR branch, in order."""

    asked: Asked
    signers: tuple[tuple[str, ...], ...]

    @property
    def unsigned(self) -> int:
        return sum(1 for s in self.signers if not s)


@dataclass(frozen=True)
class Conventions:
    """What the upstream asks of a PR, and what contrib did about it."""

    template: Template | None
    owners: CodeOwners | None
    touched: tuple[str, ...]  # every path the patchset changes, removed ones too
    hooks: Hooks | None
    hook_failures_allowed: bool = False  # opened with --allow-hook-failures
    collected: tuple[Collected, ...] = ()  # the tests it adds or names, and the PR's CI
    signoff: SignOffs | None = None  # where the upstream asks for Signed-off-by
    checks: Checks | None = None  # its PR workflows' checks, run on the patched tree

    def owned(self) -> list[Owned]:
        return self.owners.owners_of(self.touched) if self.owners is not None else []


def read_conventions(git: Git, base: str, tip: str, *, offline: bool, run: bool = True,
                     tests: Sequence[str] = ()) -> Conventions:
    """The conventions at ``base`` (template, CODEOWNERS) and ``tip`` (the hooks, run on
    the touched files and the PR workflows' checks on the tree, unless ``run`` is false;
    whether the PR's CI runs the tests the patchset adds and ``tests``, those its
    validation names)."""
    touched = tuple(git.run("diff", "--name-only", "--no-renames", "-z", base, tip,
                            strip=False).split("\0")[:-1])
    named = list(dict.fromkeys([t for t in touched if is_test(t)] + list(tests)))
    return Conventions(read_template(git, base), read_codeowners(git, base), touched,
                       run_hooks(git, base, tip, offline=offline) if run else None,
                       collected=tuple(collected(git, tip, named)),
                       signoff=_signoffs(git, base, tip),
                       checks=run_checks(git, base, tip) if run else None)


def _signoffs(git: Git, base: str, tip: str) -> SignOffs | None:
    """Where the upstream's files at ``base`` ask for Signed-off-by, and each commit's."""
    asked = asks_for_signoff(git, base)
    if asked is None:
        return None
    out = git.run("log", "--reverse", "--format=%(trailers:key=Signed-off-by,valueonly,"
                  "separator=%x1f)%x00", f"{base}..{tip}", strip=False)
    return SignOffs(asked, tuple(tuple(v.strip() for v in entry.strip().split("\x1f")
                                       if v.strip()) for entry in out.split("\0")[:-1]))


def signoff_block(signoff: SignOffs) -> str:
    """What the upstream asks (the Developer Certificate of Origin's sign-off) and
    whether every commit carries it."""
    asked = signoff.asked
    where = (f"`{_md(asked.path)}` (line {asked.line}: {_md(asked.words)})" if asked.line
             else f"`{_md(asked.path)}` (the DCO app's settings)")
    total = len(signoff.signers)
    if not signoff.unsigned:
        who = ", ".join(f"`{_md(n)}`" for n in dict.fromkeys(n for s in signoff.signers
                                                             for n in s))
        return (f"**Sign-off:** each commit carries `Signed-off-by:` ({who}), as the "
                f"upstream's {where} asks.")
    return (f"**Sign-off:** the upstream's {where} asks for `Signed-off-by:`; "
            f"{signoff.unsigned} of {total} commits carry none (add it with "
            "`git commit --amend -s` in `contrib edit`, then `contrib refresh`).")


def hook_refusal(hooks: Hooks) -> str:
    """Why open-pr refuses: the hooks that failed, in one line."""
    failed = ", ".join(f"{r.id} ({r.detail})" if r.detail else r.id for r in hooks.failed)
    return f"the upstream's pre-commit hooks failed on the touched files: {failed}"


def check_refusal(checks: Checks) -> str:
    """Why open-pr refuses: the PR checks that failed, in one line."""
    failed = ", ".join(f"`{r.check.command()}` ({r.detail})" for r in checks.failed)
    return f"the upstream's PR checks failed on the patched tree: {failed}"


def checks_block(checks: Checks, allowed: bool) -> str:
    """Each PR check of the upstream's workflows, its command and how it went."""
    lines = ["**Upstream PR checks**: the scripts of the tree the workflows that run on a "
             "pull request run (at the patched tip), run by contrib on the patched tree, "
             "offline:", ""]
    unstarted = [r for r in checks.results if r.check.needs]  # CI's context or runners
    folded = len(unstarted) > _FOLD
    for r in checks.results:
        if not (folded and r.check.needs):
            lines.append(_check_line(r))
    if folded:
        lines += ["", f"<details><summary>{len(unstarted)} more the workflows run, not run "
                  "here: they need CI's context, the upstream's runners or an earlier "
                  "step's output</summary>", "", *map(_check_line, unstarted), "",
                  "</details>"]
    if checks.failed and allowed:
        lines += ["", "Opened with `contrib open-pr --allow-hook-failures` (it covers these "
                  "checks too): the failed checks are still to be fixed."]
    return "\n".join(lines)


def ticks(conventions: Conventions, validation: Standing) -> dict[Check, str]:
    """The checklist kinds contrib ran, each with what it ran and how it went."""
    out = {}
    hooks = conventions.hooks
    if hooks is not None and hooks.results and not hooks.failed and not hooks.not_run:
        out[Check.HOOKS] = f"contrib ran `{_md(hooks.command())}`: {_counts(hooks)}"
    tests = _tests_passed(validation)
    if tests:
        out[Check.TESTS_PASS] = tests
    return out


def _tests_passed(validation: Standing) -> str:
    """"contrib validate ran `pytest ...` on ...", when every run's tests stage that ran
    passed; "" otherwise."""
    runs = validation.record.runs if validation.record is not None else ()
    ran = [(r, s) for r in runs if (s := r.stage("tests")) is not None
           and s.status in (StageStatus.PASSED, StageStatus.FAILED)]
    if not ran or any(s.status != StageStatus.PASSED for _, s in ran):
        return ""
    said = []
    for run, stage in ran:
        selected = stage.details.get("selected")
        tests = " ".join(map(str, selected[:5])) if isinstance(selected, list) else ""
        more = " ..." if isinstance(selected, list) and len(selected) > 5 else ""
        said.append(f"`pytest {_md(tests)}{more}` on {run.arch} ({_md(run.host.describe())})"
                    f": {_md(stage.reason)}")
    return "contrib validate ran " + "; ".join(said)


def hooks_block(hooks: Hooks, allowed: bool) -> str:
    """Which hooks ran on which files, and how each went."""
    if not hooks.results:
        return (f"**pre-commit** (`{hooks.config}`): no hook ran"
                + (": the patchset adds or changes no file." if not hooks.files else "."))
    lines = [f"**pre-commit**: contrib ran the upstream's hooks (`{hooks.config}` at the "
             f"patched tip) on the {len(hooks.files)} touched "
             f"{'file' if len(hooks.files) == 1 else 'files'}: `{_md(hooks.command())}`: "
             f"{_counts(hooks)}.", "", "| hook | result |", "| --- | --- |"]
    rows: dict[tuple[HookStatus, str], list[str]] = {}  # hooks with one outcome: one row
    for r in hooks.results:
        rows.setdefault((r.status, r.detail), []).append(f"`{_md(r.id)}`")
    for (status, detail), names in rows.items():
        lines.append(f"| {', '.join(names)} | {status}{f': {_md(detail)}' if detail else ''} |")
    if hooks.failed and allowed:
        lines += ["", "Opened with `contrib open-pr --allow-hook-failures`: the failed hooks "
                  "are still to be fixed."]
    return "\n".join(lines)


def _counts(hooks: Hooks) -> str:
    names = {HookStatus.SKIPPED: "skipped (no file of their kind)"}
    return ", ".join(f"{n} {names.get(s, str(s))}" for s, n in hooks.counts().items())


def _check_line(r: CheckResult) -> str:
    where = f"in `{_md(r.check.cwd)}/`, " if r.check.cwd else ""
    said = {CheckStatus.FAILED: "**failed**"}.get(r.status, str(r.status))
    detail = f" ({_md(r.detail)})" if r.detail else ""
    return f"- `{_md(r.check.command())}` ({where}`{_md(r.check.workflow)}`): {said}{detail}"


def owners_block(owners: CodeOwners, owned: Sequence[Owned]) -> str:
    """The code owners of the touched paths, grouped, named without notifying anyone."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for o in owned:
        groups.setdefault(o.owners, []).append(o.path)
    lines = [f"**Code owners** of the touched paths (`{owners.path}` at the base; not "
             "requested while this PR is a draft):", ""]
    for names, paths in groups.items():
        who = " ".join(f"`{_md(n)}`" for n in names) if names else "no owner"
        shown = ", ".join(f"`{_md(p)}`" for p in paths[:5]) + (
            f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        lines.append(f"- {shown}: {who}")
    return "\n".join(lines)


def collected_block(conventions: Conventions) -> str:
    """Whether the upstream's CI on a PR runs each test the patchset adds or names."""
    lines = ["**Upstream CI**: the tests this PR adds or its validation ran, and whether "
             "the workflows that run on a pull request (at the patched tip) run them:", ""]
    for c in conventions.collected:
        added = " (added or changed here)" if c.test in conventions.touched else ""
        head = f"- `{_md(c.test)}`{added}: "
        if c.how == Collection.RUN:
            lines.append(head + f"run by `{_md(c.workflow)}` (`{_md(c.via)}`)")
        elif c.how == Collection.BY_SCRIPT:
            lines.append(head + f"in `{_md(c.named)}/`, which `{_md(c.via)}` (run by "
                         f"`{_md(c.workflow)}`) collects from; that script decides whether "
                         "it runs")
        else:
            lines.append(head + "**not run**: no command of a PR workflow, nor a script one "
                         "runs, names it or a folder above it; it needs registering where "
                         "the upstream's CI collects tests")
    return "\n".join(lines)


def _md(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("`", "'")
