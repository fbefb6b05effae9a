"""The walk: what a piece of code reaches through the tree's calls, at any depth.

Breadth first over the call graph of the GPU that runs the code
(:class:`~contrib.analysis.reach.graph.Graph`), each function once (with the
nvcc majors of the chain that reaches a JIT builder), up to :data:`MAX_DEPTH`
calls down and :data:`MAX_FUNCTIONS` functions: the call chains for the reader,
and what the chains end at (:class:`~contrib.analysis.reach.endpoints.Endpoint`).
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass, field, replace

from contrib.analysis.archvalues import Cap, Frame, Func
from contrib.analysis.reach.backends import Key
from contrib.analysis.reach.endpoints import Endpoint, EndpointKind
from contrib.analysis.reach.tree import PyTree

MAX_CALLS = 120  # call chains kept per gate, for the reader


MAX_FUNCTIONS = 1500  # tree functions walked per gate (each once)


MAX_DEPTH = 16  # calls followed below the gated code


@dataclass
class Reached:
    """What a piece of code reaches: call chains for the reader, endpoints by identity."""

    calls: list[tuple[str, ...]] = field(default_factory=list)  # each outermost first
    endpoints: list[Endpoint] = field(default_factory=list)


def reach(ev: PyTree, frame: Frame, code: list[ast.AST], cap: Cap | None = None,
          key: Key | None = None) -> Reached:
    """The calls in ``code`` and, through the tree's definitions, what they lead to;
    ``cap``: the GPU that runs it (the branches it does not take are not followed);
    ``key``: the backend of a registry the walk follows (tests of the others' names
    are not taken)."""
    walks = ev.graph(cap, key)
    out = Reached()
    seen: set[tuple[int, tuple[int, ...]]] = set()
    queue: deque[tuple[list[tuple[str, list[Func | Endpoint]]], tuple[str, ...], int,
                       tuple[int, ...]]] = deque([(walks.resolve(frame, code), (), 0, ())])
    walked = 0
    while queue and walked < MAX_FUNCTIONS:
        calls, prefix, depth, flags = queue.popleft()
        for name, callees in calls:
            chain = (*prefix, name)
            shown = chain
            for callee in callees:
                if isinstance(callee, Endpoint):
                    out.endpoints.append(replace(callee, chain=chain))
                    continue
                known = walks.function(callee)
                majors = flags + tuple(m for m in known.flags if m not in flags)
                visit = (id(callee.node), majors if known.kind == EndpointKind.JIT else ())
                if visit in seen:
                    continue
                seen.add(visit)
                walked += 1
                if known.kind is not None:
                    # prebuilt cubins whose own reading names no arch: the flags of the
                    # chain that builds their runner (as a JIT module's)
                    kept = (majors if known.kind == EndpointKind.JIT else known.flags or majors
                            if known.kind == EndpointKind.CUBIN else known.flags)
                    out.endpoints.append(Endpoint(known.kind, callee.path, known.qualname, kept,
                                                chain))
                    if known.kind in (EndpointKind.TRITON, EndpointKind.CUTILE):
                        shown = (*prefix, f"{known.kind}:{name}")
                elif depth < MAX_DEPTH:
                    queue.append((known.calls, chain, depth + 1, majors))
            if len(out.calls) < MAX_CALLS and shown not in out.calls:
                out.calls.append(shown)
    return out
