"""The docs that describe the package stay true to the tree under ``contrib/``.

``docs/development.md``'s "Layout" has a table, ``| where | what |``, with a row per
package (`contrib/audit/`) that names each of its modules (`engine`) and subpackages
(`stack/`) in backticks, once; above it, the layer line names every top-level package.
A module added, moved or removed fails here, naming the row to change.  Only lowercase
identifiers in backticks count as names, so `EffectKind` or `contrib.toml` in a row's
text are words, not modules.

The package docstrings (``__init__.py``) cite modules with Sphinx roles
(:mod:`contrib.audit.run`, :class:`~.tree.PyTree`); each must name something that exists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "contrib"
DOC = ROOT / "docs" / "development.md"
NAME = re.compile(r"`([a-z_][a-z0-9_]*/?)`")
ROLE = re.compile(r":(?:mod|class|func|data|meth|attr|exc|obj):`~?([\w.]+)`")


def layout_section() -> str:
    text = DOC.read_text()
    start = text.index("\n## Layout\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def table_rows() -> dict[str, str]:
    """Each row of the layout table: its package folder (`contrib/audit/`) -> its text."""
    rows = {}
    for line in layout_section().splitlines():
        if not line.startswith("| `"):
            continue
        where, what = line[1:].split("|", 1)
        rows[where.split("`")[1]] = what.rstrip().rstrip("|")
    return rows


def packages() -> dict[str, set[str]]:
    """Each package folder under contrib/ (`contrib/audit/`) -> the names its row must hold."""
    out = {}
    for folder in sorted([PACKAGE, *PACKAGE.rglob("*")]):
        if not folder.is_dir() or folder.name == "__pycache__" or not any(folder.glob("*.py")):
            continue
        modules = {f.stem for f in folder.glob("*.py") if f.name != "__init__.py"}
        subpackages = {f"{sub.name}/" for sub in folder.iterdir()
                       if sub.is_dir() and any(sub.glob("*.py"))}
        out[f"{folder.relative_to(ROOT).as_posix()}/"] = modules | subpackages
    return out


def where_else(name: str, tree: dict[str, set[str]]) -> str:
    rows = [f"`{row}`" for row, names in tree.items() if name in names]
    return f" (found in {', '.join(rows)}: name it in its row)" if rows else ""


def test_layout_table_names_every_module_in_its_package_row() -> None:
    rows, tree = table_rows(), packages()
    problems = []
    for package, names in tree.items():
        if package not in rows:
            problems.append(f"add a row | `{package}` | ... | naming "
                            + ", ".join(f"`{n}`" for n in sorted(names)))
            continue
        named = NAME.findall(rows[package])
        problems += [f"row `{package}`: add `{name}` ({package}{name}{'' if name.endswith('/') else '.py'})"
                     f" with a few words on what it decides"
                     for name in sorted(names - set(named))]
        problems += [f"row `{package}`: `{name}` is no module or package there: remove it"
                     + where_else(name, tree)
                     for name in sorted(set(named) - names)]
        problems += [f"row `{package}`: `{name}` is named twice; name it once"
                     for name in sorted({n for n in named if named.count(n) > 1})]
    problems += [f"row `{row}`: no such package: remove the row or rename it"
                 for row in sorted(set(rows) - set(tree))]
    assert not problems, "docs/development.md, ## Layout table:\n" + "\n".join(problems)


def layer_line() -> list[str]:
    """The names of the layer line, `base < workspace < git | forge < ...`, lowest first."""
    paragraphs = layout_section().split("\n\n")
    line = next(p for p in paragraphs if p.startswith("base <"))
    return [name.strip() for name in re.split(r"[<|]", line)]


def test_layer_line_names_every_top_level_package() -> None:
    layers = layer_line()
    top = {f.name for f in PACKAGE.iterdir() if f.is_dir() and (f / "__init__.py").exists()}
    modules = {f.stem for f in PACKAGE.glob("*.py")}
    missing = sorted(top - set(layers))
    unknown = sorted(set(layers) - top - modules - {"base"})
    assert not missing and not unknown, (
        "docs/development.md, ## Layout, the layer line (`base < workspace < ...`): "
        + "".join(f"\nadd `{name}` at its layer (pyproject.toml, [tool.importlinter])"
                  for name in missing)
        + "".join(f"\n`{name}` is no top-level package or module: remove it" for name in unknown))


def resolves(target: str, package: str) -> bool:
    """Whether a role's target names a module, or a name its module defines at top level."""
    dotted = package + target if target.startswith(".") else target
    if not dotted.startswith("contrib"):
        dotted = f"{package}.{dotted}"
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = PACKAGE.parent.joinpath(*parts[:cut])
        source = path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"
        if source.exists():
            return cut == len(parts) or parts[cut] in top_level_names(source)
    return False


def top_level_names(source: Path) -> set[str]:
    """What a module defines or imports at its top level, read without importing it."""
    names = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def test_package_docstrings_cite_what_exists() -> None:
    problems = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        package = ".".join(init.parent.relative_to(PACKAGE.parent).parts)
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        problems += [f"{init.relative_to(ROOT)}: `{target}` names nothing that exists"
                     for target in ROLE.findall(doc) if not resolves(target, package)]
    assert not problems, "\n".join(problems)
