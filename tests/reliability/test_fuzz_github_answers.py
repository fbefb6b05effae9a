"""Hypothesis: whatever JSON GitHub answers, the shape checks give a value object or one
MalformedAnswer line naming the request, never another exception.

The answers are built around GitHub's real shapes (a PR, an issue, a comment,
a check-run page, a combined status, reviews, a repository), with any field
replaced, dropped or retyped, and as any JSON value at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contrib.forge import shapes
from contrib.forge.api import MalformedAnswer
from testing.audit import FIGURES

FUZZ = settings(max_examples=100, deadline=None)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)

REF = {"label": "me:contrib/x", "ref": "contrib/x", "sha": "ab" * 20}
SHAPES: dict[str, dict[str, Any]] = {
    "pull request": {"number": 1, "html_url": "https://github.com/o/r/pull/1", "state": "open",
                     "title": "t", "body": "b", "draft": True, "merged_at": None,
                     "merge_commit_sha": None, "head": REF, "base": {**REF, "ref": "main"}},
    "issue": {"number": 2, "html_url": "https://github.com/o/r/issues/2", "state": "closed",
              "title": "t", "body": None},
    "comment": {"id": 3, "html_url": "https://github.com/o/r/issues/2#c3", "body": "b",
                "user": {"login": "me"}},
    "check run": {"status": "completed", "conclusion": "success", "name": "build"},
    "combined status": {"state": "success", "statuses": [{"state": "success", "context": "c"}]},
    "review": {"state": "APPROVED", "user": {"login": "ann"}},
    "repository": {"full_name": "o/r", "permissions": {"push": True}},
}

READERS: dict[str, Callable[[shapes.Answer], Any]] = {
    "pull request": lambda a: shapes.pull_request(a, a.data),
    "issue": lambda a: (shapes.issue(a, a.data), shapes.is_pull_request(a, a.data)),
    "comment": lambda a: shapes.comment(a, a.data),
    "check run": lambda a: shapes.check_run_verdict(a, a.data),
    "combined status": shapes.status_verdicts,
    "review": lambda a: shapes.review_decision(a, [a.data]),
    "repository": lambda a: (shapes.can_push(a), shapes.user(a, {"x-oauth-scopes": "repo"})),
}


def _mutated(kind: str) -> st.SearchStrategy[Any]:
    base = SHAPES[kind]
    edits = st.dictionaries(st.sampled_from(sorted(base)), json_values, max_size=3)
    drops = st.sets(st.sampled_from(sorted(base)), max_size=2)
    return st.builds(lambda e, d: {k: v for k, v in {**base, **e}.items() if k not in d},
                     edits, drops)


@pytest.mark.parametrize("kind", list(SHAPES))
@FUZZ
@given(data=st.data())
def test_any_answer_is_a_value_or_one_line(kind: str, data: st.DataObject) -> None:
    value = data.draw(st.one_of(_mutated(kind), json_values))
    answer = shapes.Answer("GET /repos/o/r/thing", value)
    try:
        READERS[kind](answer)
    except MalformedAnswer as exc:
        message = str(exc)
        assert message.startswith("GitHub's answer to GET /repos/o/r/thing is not usable: ")
        assert "\n" not in message and exc.exit_code == 1
        FIGURES["fuzzed GitHub answers refused in one line"] += 1
