"""The corpus of openings: pinned in a TOML file, or mined again and cached per tip.

The pinned file holds shas, paths, line numbers and the expected class only;
a person can edit it (drop a false opening, fix a function) and the run uses it
as written.  Mining one upstream takes a minute or more, so what was mined is
kept in the cache folder under the tip's sha and the miner's version.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
import tomlkit
from history_mine import MINER_VERSION, Opening, mine

from contrib.git.repo import Git

PINNED = Path(__file__).resolve().parent / "audit_history_corpus.toml"
_HEADER = ("Commits of the upstreams' own main that opened an arch gate to SM12x, mined by\n"
           "benchmarks/history_mine.py (shas, paths and line numbers at the parent; no\n"
           "upstream text).  Regenerate: python benchmarks/audit_history.py --mine --write-corpus")  # fmt: skip


def default_cache() -> Path:
    return Path(platformdirs.user_cache_dir("contrib-audit-history"))


def load(args: argparse.Namespace, gits: Mapping[str, Git]) -> list[Opening]:
    """The openings of the upstreams in ``gits``: pinned, unless ``--mine`` (or no file)."""
    if not args.mine and args.corpus.is_file():
        return [o for o in read(args.corpus) if o.upstream in gits]
    found: list[Opening] = []
    for name, git in gits.items():
        found += mined(name, git, args.cache, not args.quiet)
    found = without_drops(found, drops(args.corpus))
    if args.write_corpus:
        write(args.corpus, found)
        print(f"wrote {len(found)} openings to {args.corpus}", file=sys.stderr)
    return found


def mined(name: str, git: Git, cache: Path, progress: bool) -> list[Opening]:
    """The openings mined from ``name``'s main, from the cache when its tip was mined."""
    tip = git.run("rev-parse", "main")
    path = cache / f"mined-{name}-{tip[:12]}-v{MINER_VERSION}.json"
    try:
        return [Opening.from_dict(d) for d in json.loads(path.read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        pass
    if progress:
        print(f"  mining {name} at {tip[:10]} ...", file=sys.stderr, flush=True)
    found = mine(git, name, "main")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([o.to_dict() for o in found], indent=1), encoding="utf-8")
    return found


def _document(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: {exc}; fix it or mine again (--mine --write-corpus)") from exc


def drops(path: Path) -> list[dict[str, str]]:
    """The openings a person dropped by hand (``[[dropped]]``: commit, file, function,
    why): what the miner reads as an opening but the commit did not open.  They stay
    dropped when the corpus is mined and written again."""
    if not path.is_file():
        return []
    found = []
    for n, item in enumerate(_document(path).get("dropped", []), 1):
        if not all(isinstance(item.get(k), str) for k in ("commit", "file", "function", "why")):
            raise ValueError(f"{path}: [[dropped]] number {n}: needs commit, file, function "
                             "and why (strings)")
        found.append({k: item[k] for k in ("commit", "file", "function", "why")})
    return found


def without_drops(openings: list[Opening], dropped: list[dict[str, str]]) -> list[Opening]:
    """``openings`` less the dropped ones (a dropped commit may be a prefix of the sha)."""
    def is_dropped(o: Opening) -> bool:
        return any(o.commit.startswith(d["commit"]) and o.file == d["file"]
                   and o.function == d["function"] for d in dropped)  # fmt: skip
    return [o for o in openings if not is_dropped(o)]


def read(path: Path) -> list[Opening]:
    """The openings of a pinned corpus file."""
    data = _document(path)
    openings = []
    for n, item in enumerate(data.get("opening", []), 1):
        try:
            openings.append(Opening.from_dict(item))
        except TypeError as exc:
            raise ValueError(f"{path}: [[opening]] number {n}: {exc}") from exc
    return openings


def write(path: Path, openings: list[Opening]) -> None:
    """Pin ``openings`` (oldest first per upstream, as mined), less the file's dropped
    ones, which are written back after them."""
    dropped = drops(path)
    doc = tomlkit.document()
    for line in _HEADER.splitlines():
        doc.add(tomlkit.comment(line))
    table = tomlkit.aot()
    for opening in without_drops(openings, dropped):
        item = tomlkit.table()
        for key, value in opening.to_dict().items():
            item[key] = value
        table.append(item)
    doc["opening"] = table
    if dropped:
        hand = tomlkit.aot()
        for drop in dropped:
            entry = tomlkit.table()
            entry.update(drop)
            hand.append(entry)
        doc["dropped"] = hand
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
