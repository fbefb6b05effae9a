"""Conditions on the CUDA toolkit's version: they choose a build, not a GPU.

``torch.version.cuda >= "12.8"``, ``get_cuda_version() >= (12, 8)``,
``nvcc_major < 13``: validate's gate parser reads ``major < 13`` as it reads a
device's major, so the audit drops them.  A condition is the toolkit's when its
text names the toolkit's version, or when a name in it was last assigned,
before the condition and in the same function, from such a value (also through
one more name: ``ver = torch.version.cuda; major = int(ver.split(".")[0])``).
"""

from __future__ import annotations

import ast
import re

# `cuda_major < 13`, `get_cuda_version().major`, `CUDA_VERSION >= 12080`: the toolkit's.
TOOLKIT = re.compile(r"cuda_?version|cuda_runtime|cudart|\bcuda_major\b|\bcuda_minor\b|"
                     r"version\.cuda|nvcc_?ver|nvcc_major|driver_version|toolkit", re.I)  # fmt: skip
_NAME = re.compile(r"[A-Za-z_]\w*")


def on_toolkit(text: str, function: ast.AST | None, line: int) -> bool:
    """Whether the condition ``text`` at ``line`` of ``function`` is on the toolkit's version."""
    if TOOLKIT.search(text):
        return True
    if function is None:
        return False
    tainted = toolkit_names(function, line)
    return bool(tainted) and bool(set(_NAME.findall(text)) & tainted)


def toolkit_names(function: ast.AST, line: int) -> set[str]:
    """Names whose last assignment in ``function`` before ``line`` holds the toolkit's version."""
    assigns = sorted((node.lineno, node) for node in ast.walk(function)
                     if isinstance(node, ast.Assign | ast.AnnAssign) and node.lineno < line)  # fmt: skip
    tainted: set[str] = set()
    for _, node in assigns:
        value = node.value
        if value is None:
            continue
        text = ast.unparse(value)
        toolkit = bool(TOOLKIT.search(text)) or bool(set(_NAME.findall(text)) & tainted)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for name in (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
            (tainted.add if toolkit else tainted.discard)(name)
    return tainted
