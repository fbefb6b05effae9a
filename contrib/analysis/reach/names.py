"""How code names what it calls: a callee's name, and whether a name is worth following.

A name is followed by text alone (a regex over the tree's files, a method looked
up by name) only when it is distinctive: ``_get_trtllm_module``, not ``forward``.
"""

from __future__ import annotations

import re

_COMMON = frozenset({"forward", "run", "apply", "get", "set", "update", "call", "build",
                     "load", "init", "reset", "close", "start", "stop", "step", "wait"})


def distinctive(name: str) -> bool:
    """Whether a function name is specific enough to be followed by name alone."""
    return name not in _COMMON and not name.startswith("__") and "_" in name.strip("_")


CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")  # a name called, in source text


MAX_REGISTERED = 3  # a name registered by more decorators than this is no lead
