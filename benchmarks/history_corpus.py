"""The corpus of openings: pinned in a TOML file, or mined again and cached per tip.

The pinned file holds shas, paths, line numbers and the expected class only;
a person can edit it (drop a false opening, fix a function, relabel an opening
whose upstream's later history shows it needed more than its diff did) and the
run uses it as written.  Mining one upstream takes a minute or more, so what was mined is
kept in the cache folder under the tip's sha and the miner's version.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import platformdirs
import tomlkit
from history_mine import MINER_VERSION, Opening, mine

from contrib.git.repo import Git

PINNED = Path(__file__).resolve().parent / "audit_history_corpus.toml"
_HEADER = ("Commits of the upstreams' own main that opened an arch gate to SM12x, mined by\n"
           "benchmarks/history_mine.py (shas, paths and line numbers at the parent; no\n"
           "upstream text).  Regenerate: python benchmarks/audit_history.py --mine --write-corpus")


def default_cache() -> Path:
    return Path(platformdirs.user_cache_dir("contrib-audit-history"))


def load(args: argparse.Namespace, gits: Mapping[str, Git]) -> list[Opening]:
    """The openings of the upstreams in ``gits``: pinned, unless ``--mine`` (or no file)."""
    if not args.mine and args.corpus.is_file():
        pinned = without_drops([o for o in read(args.corpus) if o.upstream in gits],
                               drops(args.corpus))
        return relabelled(pinned, relabels(args.corpus))
    found: list[Opening] = []
    for name, git in gits.items():
        found += mined(name, git, args.cache, not args.quiet)
    found = without_drops(found, drops(args.corpus))
    if args.write_corpus:
        write(args.corpus, found)
        print(f"wrote {len(found)} openings to {args.corpus}", file=sys.stderr)
    return relabelled(found, relabels(args.corpus))


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


_HAND = {"dropped": ("commit", "file", "function", "why"),
         "relabelled": ("commit", "file", "function", "expected", "why")}
CLASSES = ("gate-only", "needs-kernel-work")


def _hand(path: Path, section: str) -> list[dict[str, str]]:
    """The entries of a section a person writes by hand (``[[dropped]]``,
    ``[[relabelled]]``), each with every key of :data:`_HAND` as a string."""
    if not path.is_file():
        return []
    keys = _HAND[section]
    found = []
    for n, item in enumerate(_document(path).get(section, []), 1):
        if not all(isinstance(item.get(k), str) for k in keys):
            raise ValueError(f"{path}: [[{section}]] number {n}: needs {', '.join(keys[:-1])} "
                             f"and {keys[-1]} (strings)")
        if section == "relabelled" and item["expected"] not in CLASSES:
            raise ValueError(f"{path}: [[relabelled]] number {n}: expected must be one of "
                             f"{', '.join(CLASSES)}, not {item['expected']!r}")
        found.append({k: item[k] for k in keys})
    return found


def drops(path: Path) -> list[dict[str, str]]:
    """The openings a person dropped by hand (``[[dropped]]``: commit, file, function,
    why): what the miner reads as an opening but the commit did not open.  They stay
    dropped when the corpus is mined and written again."""
    return _hand(path, "dropped")


def relabels(path: Path) -> list[dict[str, str]]:
    """The openings a person relabelled by hand (``[[relabelled]]``: commit, file,
    function, expected, why): where the upstream's own later history shows what the
    opening had to do was not what its diff did (sglang took the gate back two days
    later; the kernels came in a follow-up).  The miner's class is kept beside it."""
    return _hand(path, "relabelled")


def _matches(o: Opening, entry: dict[str, str]) -> bool:
    """Whether a hand entry names ``o`` (its commit may be a prefix of the sha)."""
    return (o.commit.startswith(entry["commit"]) and o.file == entry["file"]
            and o.function == entry["function"])


def without_drops(openings: list[Opening], dropped: list[dict[str, str]]) -> list[Opening]:
    """``openings`` less the dropped ones."""
    return [o for o in openings if not any(_matches(o, d) for d in dropped)]


def relabelled(openings: list[Opening], entries: list[dict[str, str]]) -> list[Opening]:
    """``openings`` with the hand's classes, the miner's kept in ``mined_as``."""
    out = []
    for opening in openings:
        entry = next((e for e in entries if _matches(opening, e)), None)
        if entry is not None and entry["expected"] != opening.expected:
            opening = replace(opening, expected=entry["expected"], mined_as=opening.expected)
        out.append(opening)
    return out


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
    ones; the hand's sections are written back after them."""
    dropped, relabelled_ = drops(path), relabels(path)
    doc = tomlkit.document()
    for line in _HEADER.splitlines():
        doc.add(tomlkit.comment(line))
    table = tomlkit.aot()
    for opening in without_drops(openings, dropped):
        item = tomlkit.table()
        for key, value in opening.to_dict().items():
            if key != "mined_as":  # the hand's, not the miner's
                item[key] = value
        table.append(item)
    doc["opening"] = table
    for section, entries in (("dropped", dropped), ("relabelled", relabelled_)):
        if entries:
            hand = tomlkit.aot()
            for found in entries:
                entry = tomlkit.table()
                entry.update(found)
                hand.append(entry)
            doc[section] = hand
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
