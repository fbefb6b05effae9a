"""No import circle in the package, not even one closed only under ``TYPE_CHECKING``.

import-linter's layer contracts say which way the layers import; a circle inside one
layer (two modules of the autopilot importing each other, one of them only for a type)
slips past them.  The graph is grimp's (import-linter's own), with every import
counted, those made for the type checker alone included.
"""

from __future__ import annotations

import grimp


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, by
    hand: the graph is a few hundred modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            module, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    group.append(top)
                    if top == module:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_back() -> None:
    graph = grimp.build_graph("contrib", exclude_type_checking_imports=False)
    assert _circles(graph) == []


def test_the_check_sees_a_circle_closed_for_the_type_checker() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")  # under TYPE_CHECKING, say
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _circles(graph) == [["pkg.a", "pkg.b"]]
