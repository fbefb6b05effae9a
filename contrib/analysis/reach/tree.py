"""The tree the walks read: the arch evaluator, with the indexes kept for its tree.

Every walk of a tree (each GPU, each backend followed, each gate) reads the same
facts: what each function is, the ops registered in Python, the methods by name,
the registries, which files call a name, and the call graph as each GPU runs it
(:class:`~contrib.analysis.reach.graph.Graph`, made from the others).  They are
made on first use and live as long as the evaluator: typed attributes, not a bag
of strings.
"""

from __future__ import annotations

import ast
from functools import cached_property

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Cap
from contrib.analysis.pywalk import callee_name, parents, walk
from contrib.analysis.reach.backends import Key, Registry
from contrib.analysis.reach.endpoints import Facts
from contrib.analysis.reach.graph import Graph
from contrib.analysis.reach.names import CALLED
from contrib.analysis.reach.objects import Methods
from contrib.analysis.reach.ops import PyOps

CallSites = tuple[dict[int, ast.AST], dict[str, list[ast.Call]]]  # parents, calls by name


class PyTree(TreeEval):
    """The arch evaluator of one tree, with what the walks keep for it."""

    @cached_property
    def facts(self) -> Facts:
        """What each function and module is, whatever GPU runs it."""
        return Facts(self)

    @cached_property
    def ops(self) -> PyOps:
        """The ops the tree registers with torch in Python."""
        return PyOps(self)

    @cached_property
    def methods(self) -> Methods:
        """The methods of every file, by name."""
        return Methods(self, lambda: {p: self.read(p) or "" for p in self.index.paths()})

    @cached_property
    def registry(self) -> Registry:
        """What the tree's decorators register under a string."""
        return Registry(self)

    @cached_property
    def _graphs(self) -> dict[tuple[Cap | None, Key | None], Graph]:
        return {}

    @cached_property
    def _callers(self) -> dict[str, list[str]]:
        index: dict[str, list[str]] = {}
        for path in self.index.paths():
            for called in set(CALLED.findall(self.read(path) or "")):
                index.setdefault(called, []).append(path)
        return index

    @cached_property
    def _sites(self) -> dict[str, CallSites | None]:
        return {}

    def graph(self, cap: Cap | None, key: Key | None) -> Graph:
        """The call graph of the tree as the GPU ``cap`` runs it (None: every branch),
        following the backend ``key`` of a registry (None: every backend); kept."""
        found = self._graphs.get((cap, key))
        if found is None:
            found = self._graphs[(cap, key)] = Graph(self, self.facts, self.registry, self.ops,
                                                     self.methods, cap, key)
        return found

    def files_calling(self, name: str) -> list[str]:
        """The tree's files in which something named ``name`` is called (``name(`` in
        the text), from one index of every file."""
        return self._callers.get(name, [])

    def call_sites(self, path: str) -> CallSites | None:
        """A module's parents and its calls by the name called (None: it does not parse)."""
        if path not in self._sites:
            module = self.module(path)
            if module is None:
                self._sites[path] = None
            else:
                by_name: dict[str, list[ast.Call]] = {}
                for node in walk(module[0]):
                    if isinstance(node, ast.Call):
                        by_name.setdefault(_called(node), []).append(node)
                self._sites[path] = (parents(module[0]), by_name)
        return self._sites[path]


def _called(call: ast.Call) -> str:
    """The name a call is indexed under: the attribute or name called, "" for others
    (``kernel[grid](...)`` is not indexed as ``kernel``, as the caller search reads it)."""
    if isinstance(call.func, ast.Subscript):
        return ""
    return callee_name(call) or ""
