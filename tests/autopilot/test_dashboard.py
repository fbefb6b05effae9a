"""The dashboard body: what counts as a change, the footer, GitHub's size limit."""

from __future__ import annotations

import pytest

from contrib.autopilot.dashboard import FOOTER, MARKER, MAX_BODY, content, render
from contrib.autopilot.forges import Forges
from contrib.autopilot.state import Need, Run
from contrib.workspace.model import Workspace as ContribWorkspace
from testing.workspace import Workspace


def _run(problems: list[Need]) -> Run:
    forges = Forges("https://api.github.com", None, None, None, dry_run=True)
    return Run(dry_run=True, policy="update", gpu_missing=[], forges=forges,
               problems=problems)


def test_footer_changes_are_not_content(workspace: Workspace,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = ContribWorkspace(workspace.root)
    first = render(ws, [], _run([]), None)
    assert first.startswith(MARKER + "\n") and "No patchsets yet" in first
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1800000000")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "me/ws")
    monkeypatch.setenv("GITHUB_RUN_ID", "99")
    later = render(ws, [], _run([]), None)
    assert later != first and content(later) == content(first)
    assert "[this run](https://github.com/me/ws/actions/runs/99)" in later.split(FOOTER)[1]
    with_need = render(ws, [], _run([Need("push", "push failed")]), None)
    assert content(with_need) != content(first) and "**push**: push failed" in with_need


def test_a_huge_needs_section_is_cut_to_githubs_limit(workspace: Workspace) -> None:
    ws = ContribWorkspace(workspace.root)
    problems = [Need("github", f"problem {i}: " + "x" * 200) for i in range(1000)]
    body = render(ws, [], _run(problems), None)
    assert len(body) <= MAX_BODY
    assert "problem 0:" in body and "problem 999:" not in body
    assert "(cut short:" in body and body.rstrip().endswith("</sub>")
