"""The one reader of contrib's TOML files: parse, then typed getters that fail with file:line.

contrib.toml (:mod:`contrib.workspace.config`) and patchset.toml
(:mod:`contrib.workspace.schema`), every table of both, are read through
:class:`Table`, so a wrong type, an unknown key or a value out of range always
reads the same way and names the line to fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contrib.errors import ConfigError

SHA_RE = re.compile(r"[0-9a-f]{40}")


def line_of(text: str, table: str, key: str | None = None) -> int:
    """1-based line of ``key`` inside ``[table]`` (or of the header, or of the first
    ``[table.sub]`` header when ``[table]`` itself is not written), 0 if not found."""
    current = ""
    table = table.replace('"', "").replace(" ", "")  # as headers read: [a."b c"] is a.bc
    header = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+")
    for number, line in enumerate(text.splitlines(), 1):
        match = header.match(line)
        if match:
            current = match.group(1).replace('"', "").replace(" ", "")
            if key is None and table and (current == table or current.startswith(table + ".")):
                return number
            continue
        if key is not None and current == table and re.match(
                rf"^\s*\"?{re.escape(key)}\"?\s*=", line):
            return number
    return 0


def parse_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """Read and parse a TOML file; ConfigError with file:line on any problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return text, parse_toml_text(path, text)


def parse_toml_text(path: Path, text: str) -> dict[str, Any]:
    """``text`` (of ``path``) as plain values; ConfigError with file:line:column if it is
    not TOML.  tomllib: reading needs no round-trip document (tomlkit, ten times slower,
    is for writing)."""
    import tomllib

    try:
        return tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per nesting level of arrays and tables
        raise ConfigError(f"{path}: nested too deeply to read (arrays or tables inside each "
                          "other hundreds of levels deep); flatten it") from None
    except tomllib.TOMLDecodeError as exc:
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        at = f":{where[1]}:{where[2]}" if where else ""
        raise ConfigError(f"{path}{at}: invalid TOML: {message}") from None


class Table:
    """One TOML table being read: typed getters that raise ``file:line`` errors."""

    def __init__(self, path: Path, text: str, name: str, data: Any) -> None:
        self.path, self.text, self.name = path, text, name
        if not isinstance(data, Mapping):
            raise ConfigError(f"{self.at()}: {self.label} must be a table, "
                              f"not {kind(data)}")
        self.data: Mapping[str, Any] = data

    @property
    def label(self) -> str:
        return f"[{self.name}]" if self.name else "the top level"

    def line(self, key: str | None = None) -> int:
        table, _, leaf = self.name.rpartition(".")
        full = f"{self.name}.{key}" if self.name and key else (key or self.name)
        return (line_of(self.text, self.name, key) or line_of(self.text, full)
                or line_of(self.text, self.name)
                or line_of(self.text, table, leaf) or line_of(self.text, "", self.name.split(".")[0]))

    def at(self, key: str | None = None) -> str:
        """``path:line`` of ``key`` (just the path when the line is not known)."""
        line = self.line(key)
        return f"{self.path}:{line}" if line else str(self.path)

    def fail(self, key: str, what: str) -> ConfigError:
        name = f"{self.name}.{key}" if self.name else key
        return ConfigError(f"{self.at(key)}: {name} {what}")

    def only(self, allowed: set[str] | frozenset[str]) -> None:
        """Reject keys the schema does not know (a typo must not be ignored)."""
        for key in self.data:
            if key not in allowed:
                where = f" in [{self.name}]" if self.name else ""
                raise ConfigError(f"{self.at(key)}: unknown key {key!r}{where} "
                                  f"(allowed: {', '.join(sorted(allowed))})")

    def string(self, key: str, default: str | None = None, *, pattern: re.Pattern[str] | None = None,
            hint: str = "") -> str | None:
        value = self.data.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, not {kind(value)}")
        if value and pattern is not None and not pattern.fullmatch(value):
            raise self.fail(key, f"must be {hint or pattern.pattern}, got {value!r}")
        return value

    def need_string(self, key: str, **kw: Any) -> str:
        value = self.string(key, **kw)
        if not value:
            raise self.fail(key, "is required (a non-empty string)")
        return value

    def sha(self, key: str) -> str | None:
        """A full 40-hex commit id, or None when absent."""
        return self.string(key, pattern=SHA_RE, hint="a 40-hex commit")

    def integer(self, key: str, default: int | None = None, *, low: int = 0) -> int | None:
        value = self.data.get(key, default)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise self.fail(key, f"must be an integer >= {low}, got {value!r}")
        return value

    def fraction(self, key: str) -> float | None:
        """A share between 0 (exclusive) and 1 (inclusive), e.g. ``0.8``; None when absent."""
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise self.fail(key, f"must be a number above 0 and at most 1 (a share, e.g. 0.8), "
                                 f"got {value!r}")
        return float(value)

    def boolean(self, key: str, default: bool | None = None) -> bool | None:
        value = self.data.get(key, default)
        if value is not None and not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, not {kind(value)}")
        return value

    def strings(self, key: str, *, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "must be a list of strings")
        for item in value:
            if pattern is not None and not pattern.fullmatch(item):
                raise self.fail(key, f"holds {item!r}, which is not {pattern.pattern}")
        return tuple(value)

    def sub(self, key: str) -> Table | None:
        value = self.data.get(key)
        if value is None:
            return None
        return Table(self.path, self.text, f"{self.name}.{key}" if self.name else key, value)

    def subs(self, key: str) -> list[Table]:
        """An array of tables (``[[key]]``); a single table is taken as a list of one."""
        value = self.data.get(key)
        if value is None:
            return []
        if isinstance(value, Mapping):
            value = [value]
        if not isinstance(value, list):
            raise self.fail(key, f"must be [[{key}]] tables, not {kind(value)}")
        name = f"{self.name}.{key}" if self.name else key
        return [Table(self.path, self.text, name, item) for item in value]


def kind(value: object) -> str:
    """How an error names a value's type: 'a string', 'a list', ..."""
    names = {str: "a string", int: "an integer", bool: "a boolean", float: "a float",
             list: "a list", dict: "a table"}
    return next((n for t, n in names.items() if type(value) is t), type(value).__name__)
