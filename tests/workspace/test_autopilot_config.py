"""``[autopilot]`` in contrib.toml: typed, defaults, every mistake names file:line (exit 2)."""

from __future__ import annotations

import pytest

from contrib.workspace.config import DEFAULT_DASHBOARD_TITLE, DEFAULT_MAX_OPEN_DRAFTS, load_config
from testing.workspace import Workspace

CASES = [
    ("unknown key", '[autopilot]\nrepo = "me/ws"\nprz = "create"\n',
     ":3: unknown key 'prz' in [autopilot]"),
    ("bad policy", '[autopilot]\nprs = "always"\n', ":2: autopilot.prs must be one of"),
    ("bad repo", '[autopilot]\nrepo = "just-a-name"\n', ":2: autopilot.repo must be OWNER/NAME"),
    ("wrong type", "[autopilot]\nprs = 1\n", ":2: autopilot.prs must be a string"),
    ("empty title", '[autopilot]\ndashboard_title = " "\n', ":2: autopilot.dashboard_title"),
    ("not a table", 'autopilot = "yes"\n', ":1: [autopilot] must be a table"),
    ("negative ceiling", "[autopilot]\nmax_open_drafts = -1\n",
     ":2: autopilot.max_open_drafts must be an integer >= 0"),
    ("ceiling as text", '[autopilot]\nmax_open_drafts = "2"\n',
     ":2: autopilot.max_open_drafts must be an integer >= 0"),
]


@pytest.mark.parametrize(("label", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_autopilot_table(workspace: Workspace, label: str, text: str,
                             expected: str) -> None:
    (workspace.root / "contrib.toml").write_text(text)
    result = workspace.run("autopilot", "--no-fetch")
    assert result.code == 2, result.err
    assert "contrib.toml" in result.err and expected in result.err
    assert "Traceback" not in result.err


def test_defaults_and_values(workspace: Workspace) -> None:
    assert load_config(workspace.root).autopilot.prs == "update"
    assert load_config(workspace.root).autopilot.dashboard_title == DEFAULT_DASHBOARD_TITLE
    assert load_config(workspace.root).autopilot.repo == ""
    assert load_config(workspace.root).autopilot.max_open_drafts == DEFAULT_MAX_OPEN_DRAFTS == 2
    workspace.write_config('\n[autopilot]\nrepo = "me/ws"\nprs = "never"\n'
                           'dashboard_title = "SM120 carries"\nmax_open_drafts = 0\n')
    settings = load_config(workspace.root).autopilot
    assert (settings.repo, settings.prs, settings.dashboard_title, settings.max_open_drafts) == (
        "me/ws", "never", "SM120 carries", 0)
