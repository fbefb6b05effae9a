"""What the `contrib why` benchmarks share: a scratch workspace naming the mirrors, one
question (features of an upstream at a commit, for an arch) answered through the code
path of ``contrib why``, and the corpus files read with one line per mistake.

``why_history``, ``works_history`` and ``fixes_history`` ask through :func:`ask`; the
answer of a feature the commit does not declare is ``absent`` (a miss, never a crash of
the script).  JIT modules are read as built with a CUDA release new enough for every
version test, whatever nvcc this machine has, so a corpus answers alike everywhere.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from contrib.analysis.archtoolkit import ASSUMED  # noqa: E402
from contrib.arch import parse_arch  # noqa: E402
from contrib.audit.chains import Chain, Feature  # noqa: E402
from contrib.audit.run import audit_upstream  # noqa: E402
from contrib.audit.serial import link_json  # noqa: E402
from contrib.errors import ContribError, UsageError  # noqa: E402
from contrib.workspace.model import Workspace  # noqa: E402

MIRRORS = {
    "flashinfer": Path("/work/.mirror/flashinfer-ai+flashinfer/repo"),
    "sglang": Path("/work/.mirror/mmangkad-dev+sglang/repo"),
}
STACKED = {"sglang": ("flashinfer",)}  # the upstreams each one runs on (its pins followed)
ABSENT = "absent"  # the verdict of a feature the commit does not declare
VERDICTS = ("on", "gate-only", "needs-kernel-work", "crash", "unknown")


def scratch_workspace(mirrors: Mapping[str, Path], cache: Path | None = None,
                      prefix: str = "why-cases-") -> Workspace:
    """A new workspace in a temporary folder naming ``mirrors`` (each on ``main``), with
    ``CONTRIB_CACHE`` at ``cache`` (default: a folder inside it)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["CONTRIB_CACHE"] = str(cache or root / "cache")
    (root / "contrib.toml").write_text("".join(
        f'[upstreams.{name}]\nurl = "{path}"\nbranch = "main"\n\n'
        for name, path in mirrors.items()), encoding="utf-8")
    return Workspace.find(root)


def needed(mirrors: Mapping[str, Path], upstreams: Sequence[str]) -> dict[str, Path]:
    """The mirrors of ``upstreams`` and of the upstreams below them: what a workspace
    asking of them must name."""
    names = [n for u in upstreams for n in (u, *STACKED.get(u, ()))]
    return {n: mirrors[n] for n in dict.fromkeys(names)}


@dataclass(frozen=True)
class Answer:
    """What `contrib why` says of one feature: its verdict (or ``absent``), the reason,
    the pin below, and the seconds of the audit it came from (shared by its group)."""

    feature: str
    verdict: str
    reason: str = ""
    pin: str = "-"
    seconds: float = 0.0
    links: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.feature, "verdict": self.verdict, "reason": self.reason,
                "pin": self.pin, "seconds": round(self.seconds, 1), "links": list(self.links)}


def ask(ws: Workspace, upstream: str, rev: str, arch: str, features: Sequence[str],
        *, keep: Callable[[list[Feature]], list[Feature]] | None = None,
        links: bool = False) -> dict[str, Answer]:
    """The verdicts of ``features`` (names as `contrib why` spells them) of ``upstream``
    at ``rev`` on ``arch``, in one audit (the engine's cache answers again); ``keep``
    picks features some other way (their answers are added by name)."""
    wanted = set(features)

    def choose(found: list[Feature]) -> list[Feature]:
        chosen = [f for f in found if f.name in wanted]
        return chosen + [f for f in (keep(found) if keep else []) if f.name not in wanted]

    started = time.monotonic()
    audit = audit_upstream(ws, upstream, parse_arch(arch), at=rev, since=None, fetch=False,
                           features=choose, cuda=ASSUMED)  # not this machine's nvcc
    seconds = time.monotonic() - started
    pin = audit.stack[0]["tag"] if audit.stack else "-"
    answers = {c.feature.name: _answer(c, pin, seconds, links) for c in audit.features}
    for name in features:
        answers.setdefault(name, Answer(name, ABSENT, f"{upstream} at {rev} declares no "
                                        f"feature {name!r}", pin, seconds))
    return answers


def _answer(chain: Chain, pin: str, seconds: float, links: bool) -> Answer:
    return Answer(chain.feature.name, chain.verdict.value, chain.reason, pin, seconds,
                  tuple(link_json(link) for link in chain.links) if links else ())


# -- corpus files ----------------------------------------------------------------------


def read_tables(path: Path, section: str) -> list[dict[str, Any]]:
    """The ``[[section]]`` tables of a TOML file; a file that cannot be read is a
    ValueError naming it."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read: {exc}") from None
    tables = data.get(section, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ValueError(f"{path}: [[{section}]] must be an array of tables")
    return tables


def field_of(path: Path, section: str, n: int, table: Mapping[str, Any], key: str,
             kind: type, choices: Sequence[Any] = ()) -> Any:
    """``table[key]``, of type ``kind`` (and one of ``choices``); else a ValueError
    naming the file, the table's number and the key."""
    where = f"{path}: [[{section}]] number {n}"
    if key not in table:
        raise ValueError(f"{where}: needs {key}")
    value = table[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}: {key} must be a {kind.__name__}, not {value!r}")
    if choices and value not in choices:
        raise ValueError(f"{where}: {key} must be one of {', '.join(map(str, choices))}, "
                         f"not {value!r}")
    return value


def check_arch(path: Path, section: str, n: int, arch: str) -> str:
    try:
        return parse_arch(arch).name
    except UsageError as exc:
        raise ValueError(f"{path}: [[{section}]] number {n}: arch {arch!r}: {exc}") from None


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} {100 * part / whole:.0f}%" if whole else "0/0 -"


def common_options(parser: argparse.ArgumentParser) -> None:
    """The options every corpus script takes: its JSON, the cache, quiet, the mirrors."""
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    parser.add_argument("--cache", type=Path, help="CONTRIB_CACHE (default: a new folder)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    for name, path in MIRRORS.items():
        parser.add_argument(f"--{name}-git", type=Path, default=path, dest=f"{name}_git")


def run_measure(name: str, measure: Callable[[argparse.Namespace], int],
                args: argparse.Namespace) -> int:
    """Run a corpus script's measure; a corpus, mirror or revision that cannot be used is
    one line, exit 2."""
    try:
        return measure(args)
    except (ContribError, OSError, ValueError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
