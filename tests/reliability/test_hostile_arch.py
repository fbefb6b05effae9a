"""Hostile ``--arch`` values on the command line: exit 2 in one line, never a second arch."""

from __future__ import annotations

import pytest

from testing.workspace import Workspace

HOSTILE = ["sm_\u0661\u0662\u0660a", "\uff11\uff12\uff10", "sm_1\u0662\u0660a", "\u0661\u0662.\u0660",
           "sm_120a\u200b", "sm_120a\nsm_90a", "sm_120a\0", "sm_" + "1" * 10_000, "12.0.0", "sm_120aa",
           "-1", ""]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("command", ["validate", "audit"])
def test_a_hostile_arch_is_exit_2_in_one_line(workspace: Workspace, command: str, value: str) -> None:
    result = workspace.run(command, "--arch", value)
    assert result.code == 2, (result.code, result.err[-300:])
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
