"""``[validation]`` and ``[[waivers]]`` of patchset.toml: the schema and its one reader.

Every key is checked for type and range; a bad one is a :class:`ConfigError`
naming ``patchset.toml:LINE`` and the key (exit 2).  :meth:`Settings.digest_view`
is the part of the settings that changes what validation finds, and so goes
into a validation record's digest (:mod:`contrib.record`); ``require`` only
changes which stages open-pr needs, so it is left out of it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contrib.errors import ConfigError
from contrib.validate import Waiver, parse_waivers

_KEYS = {
    "python", "tests", "compile", "sources", "compare", "tests_need_gpu", "test_limit",
    "ptx_sources", "ptx_include_dirs", "ptx_flags", "require", "pytest_args",
}  # fmt: skip


def _unwrap(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


@dataclass
class Settings:
    """``[validation]`` and ``[[waivers]]`` of patchset.toml."""

    sources: list[str] = field(default_factory=list)  # extra CUDA sources to analyse
    compare: list[int] = field(default_factory=list)  # majors to compare when no gate says
    tests: list[str] = field(default_factory=list)
    tests_need_gpu: bool = True
    test_limit: int = 20
    python: str | None = None
    compile: list[str] = field(default_factory=list)  # PTX command run in a worktree
    ptx_sources: list[str] = field(default_factory=list)
    ptx_include_dirs: list[str] = field(default_factory=list)
    ptx_flags: list[str] = field(default_factory=list)
    waivers: list[Waiver] = field(default_factory=list)
    require: tuple[str, ...] | None = None  # None: the stages the registry marks required
    pytest_args: list[str] = field(default_factory=list)  # e.g. ["-k", "bf16"]: which cases run

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], where: str = "patchset.toml",
                  text: str = "") -> Settings:
        """Read ``[validation]`` and ``[[waivers]]``; ConfigError naming the file, line and key.

        ``text`` is patchset.toml's text, for line numbers (optional).
        """
        table = _unwrap(meta.get("validation", {}))
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: [validation] must be a table")
        read = _Reader(table, where, text)
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise ConfigError(f"{read.at(unknown[0])}: [validation] has unknown key(s) "
                              f"{', '.join(unknown)} (allowed: {', '.join(sorted(_KEYS))})")
        return cls(
            read.strings("sources"), read.majors(), read.strings("tests"),
            read.boolean("tests_need_gpu", True), read.positive("test_limit", 20),
            read.path("python"), read.command(), read.strings("ptx_sources"),
            read.strings("ptx_include_dirs"), read.strings("ptx_flags"),
            parse_waivers(_unwrap(meta.get("waivers")), where), read.require(),
            read.strings("pytest_args"),
        )  # fmt: skip

    def required(self) -> tuple[str, ...]:
        """The stages open-pr (and validate's exit code) needs: ``require``, or the default.

        The default (apply, syntax, gates, arch-guards, ptx) is marked in the stage
        registry; a not-applicable stage counts as done, so ``ptx`` is only needed
        where a touched gate compiles CUDA sources.
        """
        from contrib.validate.registry import STAGES

        if self.require is not None:
            return self.require
        return tuple(s.name for s in STAGES if s.required)

    def digest_view(self) -> dict[str, Any]:
        """The settings that change validation results, as plain JSON values."""
        return {
            "sources": self.sources, "compare": self.compare, "tests": self.tests,
            "tests_need_gpu": self.tests_need_gpu, "test_limit": self.test_limit,
            "python": self.python, "compile": self.compile, "ptx_sources": self.ptx_sources,
            "ptx_include_dirs": self.ptx_include_dirs, "ptx_flags": self.ptx_flags,
            **({"pytest_args": self.pytest_args} if self.pytest_args else {}),
            "waivers": [{"file": w.file, "reason": w.reason, "line": w.line, "pattern": w.pattern}
                        for w in self.waivers],
        }  # fmt: skip


class _Reader:
    """Typed getters over one ``[validation]`` table, each failing with file:line and key."""

    def __init__(self, table: Mapping[str, Any], where: str, text: str) -> None:
        self.table, self.where, self.text = table, where, text

    def at(self, key: str) -> str:
        from contrib.workspace.config import line_of

        line = line_of(self.text, "validation", key) if self.text else 0
        return f"{self.where}:{line}" if line else self.where

    def fail(self, key: str, what: str) -> ConfigError:
        return ConfigError(f"{self.at(key)}: validation.{key} {what}")

    def strings(self, key: str, value: Any = None) -> list[str]:
        value = self.table.get(key, []) if value is None else value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "must be a list of strings")
        return list(value)

    def majors(self) -> list[int]:
        value = self.table.get("compare", [])
        if not isinstance(value, list) or not all(
                isinstance(m, int) and not isinstance(m, bool) and 1 <= m <= 99 for m in value):
            raise self.fail("compare", "must be a list of major versions, e.g. [9, 10]")
        return list(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.table.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, "must be true or false")
        return value

    def positive(self, key: str, default: int) -> int:
        value = self.table.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100_000:
            raise self.fail(key, "must be a positive integer")
        return value

    def path(self, key: str) -> str | None:
        value = self.table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise self.fail(key, "must be a path to an interpreter")
        return value

    def command(self) -> list[str]:
        value = self.table.get("compile", [])
        if isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as exc:  # e.g. an unbalanced quote
                raise self.fail("compile", f"cannot be split into words ({exc}); "
                                "balance its quotes or give it as a list") from None
        words = self.strings("compile", value)
        if value and not words[0]:
            raise self.fail("compile", "must start with a program name")
        return words

    def require(self) -> tuple[str, ...] | None:
        from contrib.validate.registry import STAGES

        if "require" not in self.table:
            return None
        names, known = self.strings("require"), [s.name for s in STAGES]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise self.fail("require", f"names unknown stage(s) {', '.join(map(repr, unknown))} "
                            f"(stages: {', '.join(known)})")
        return tuple(dict.fromkeys(names))
