"""The ways through a C++ host function that raise, and on which GPUs each is taken.

A host function dispatching on the runtime capability refuses an architecture in
three shapes (sgl-kernel's GEMM and MoE entries have all three):

* a check: ``TORCH_CHECK(sm_version == 100, "cutlass_mla_decode is only supported
  on compute capability 10.0")``;
* an ``if``/``else if`` chain whose last ``else`` raises: ``if (sm_version == 100 ||
  sm_version == 103) {...} else if (sm_version == 120) {...} else {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "Unsupported SM version") }``;
* branches that return, then a raise past them: ``if (sm_version == 90) {...; return
  out;}`` ... ``TORCH_CHECK_NOT_IMPLEMENTED(false, "No implemented ... for current
  compute capability")``.

:func:`raises` reads a body (comments, strings and directive lines blanked: every
``#if`` branch is read, as the host pass may compile any of them) statement by
statement and keeps, for each raise, the conditions that lead to it; the calls it
makes are handed back with theirs, so the caller follows them into other functions.
:func:`reached` evaluates such a way on one capability (major, minor): True where it
is surely taken, False where surely not, None where values other than the capability
decide (a dtype, a shape).  Nothing here knows an upstream's names.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from contrib.analysis.cexpr import ExprError, Macro, evaluate
from contrib.analysis.cscan import Scan, match_close, scan, strip_comments
from contrib.analysis.hostarch import split_arguments

_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')
_DIRECTIVE_LINE = re.compile(r"^[ \t]*#.*(?:\\\n.*)*$", re.MULTILINE)
_RAISING = re.compile(r"(?:\w+::)*(?:TORCH_CHECK|TLLM_CHECK|FLASHINFER_CHECK|TVM_FFI_ICHECK|"
                      r"ICHECK|CHECK)(\w*)\s*\(")
_CMP = {"_EQ": "==", "_NE": "!=", "_GE": ">=", "_GT": ">", "_LE": "<=", "_LT": "<"}
_WORD = re.compile(r"[A-Za-z_]\w*")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;{}()]*>\s*)?\(")
_OPAQUE = ("for", "while", "switch", "do", "try")
_NOT_CALLS = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype",
                        "static_cast", "reinterpret_cast", "const_cast", "dynamic_cast"})
_ATOM = re.compile(r"(?:[A-Za-z_]\w*(?:\s*::\s*\w+)*(?:\s*(?:\.|->)\s*\w+)*"
                   r"(?:\s*\((?:[^()]|\([^()]*\))*\))?)|\d+\w*")
SM_CALL = "__sm_called__"  # ``getSMVersion()`` read in a condition itself
_SM_READ = re.compile(r"(?:[\w:]+::)?(?:getSMVersion|get_sm_version|getSmVersion|GetSMVersion)"
                      r"\s*\(\s*\)")
_MAYBE = "__maybe__"
_DECLARED = re.compile(r"bool\s+(\w+)\s*=\s*(?:false|0)")
_SETS = re.compile(r"(\w+)\s*=\s*(?:true|1)")  # a way some branch before may leave on values other than the GPU's


@dataclass(frozen=True)
class Condition:
    """A C expression that holds on a way; ``assumed``: a check the way passed (an
    argument check names no capability: a right call passes it, and it is not read)."""

    expr: str
    assumed: bool = False


Live = tuple[Condition, ...]


@dataclass(frozen=True)
class Way:
    """A raise or a call of a body (``line``: in its file; ``text``: the statement, on one
    line; ``called``: the names it calls, for a call) and the conditions, each a C
    expression, that hold on the way there (one of ``!(x) || __maybe__`` says a branch
    where ``x`` holds may have left before)."""

    line: int
    text: str
    conditions: Live
    called: tuple[str, ...] = ()


def prepared(text: str) -> tuple[str, str]:
    """A file's text as :func:`raises` reads it (comments, strings and directive lines
    blanked) and as it is shown (comments blanked), of the same length.  Every ``#if``
    branch is read, but one of a group with alternatives that only raises (``#else
    TORCH_CHECK_NOT_IMPLEMENTED(false, "No compiled ... kernel") #endif``) is blanked:
    it is what a build without the kernels does, not a refusal of a GPU."""
    shown = strip_comments(text)
    blank = _STRING.sub(lambda m: m[0][0] + " " * (len(m[0]) - 2) + m[0][-1], shown)
    lines = blank.split("\n")
    for first, last in _stub_branches(scan("", text)):
        for index in range(first, last):
            lines[index] = " " * len(lines[index])
    blank = _DIRECTIVE_LINE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), "\n".join(lines))
    return blank, shown


_STUB = re.compile(r"(?:(?:\w+::)*(?:TORCH_CHECK|TLLM_CHECK|FLASHINFER_CHECK)\w*\s*\(\s*false\b"
                   r"[^;]*;|\bthrow\b[^;]*;|\breturn\b[^;]*;|\s+)")


def _stub_branches(found: Scan) -> list[tuple[int, int]]:
    """The branches (0-based line ranges) of groups with alternatives whose code only
    raises or returns."""
    stubs: list[tuple[int, int]] = []
    heads: dict[int, list[int]] = {}
    for branch in found.branches.values():
        heads.setdefault(branch.head, []).append(branch.line)
    ends = sorted(d.line for d in found.directives.values() if d.kind == "endif")
    for lines in heads.values():
        if len(lines) < 2:
            continue
        lines.sort()
        bounds = [*lines, _end_of(found, lines[-1], ends)]
        for start, stop in itertools.pairwise(bounds):
            first = found.directives[start].last_line
            body = "\n".join(found.code[first:stop - 1])
            if body.strip() and not _STUB.sub("", body).strip() and "(" in body:
                stubs.append((first, stop - 1))
    return stubs


def _end_of(found: Scan, last: int, ends: list[int]) -> int:
    """The ``#endif`` line closing the group whose last branch opens at ``last``."""
    depth = 0
    for line in sorted(found.directives):
        kind = found.directives[line].kind
        if line <= last:
            continue
        if kind in ("if", "ifdef", "ifndef"):
            depth += 1
        elif kind == "endif":
            if depth == 0:
                return line
            depth -= 1
    return ends[-1] + 1 if ends else len(found.code) + 1


def definitions(code: str) -> dict[str, list[tuple[int, int]]]:
    """The function bodies of a prepared file by name: (offset of ``{``, of ``}``)."""
    found: dict[str, list[tuple[int, int]]] = {}
    depth_at = _depths(code)
    for match in _CALL.finditer(code):
        name = match[1]
        if name in _NOT_CALLS or depth_at[match.start()] > 2:
            continue
        before = code[max(0, match.start() - 2):match.start()].rstrip()
        if before.endswith((".", ">", "=", ",", "(")):
            continue
        close = match_close(code, match.end() - 1, "(", ")")
        after = re.match(r"[^;{}()]*(?:\([^;{}]*\)[^;{}()]*)?", code[close + 1:])
        brace = close + 1 + (after.end() if after else 0)
        if brace < len(code) and code[brace] == "{":
            found.setdefault(name, []).append((brace, match_close(code, brace, "{", "}")))
    return found


def _depths(code: str) -> list[int]:
    """The brace depth at each offset (namespaces count: a body in one is at depth 1)."""
    depths, depth = [], 0
    for ch in code:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        depths.append(depth)
    return depths


def raises(code: str, shown: str, body: tuple[int, int]) -> list[Way]:
    """The raises and calls of the body between offsets ``body`` of a prepared file,
    each with the conditions on the way there."""
    found: list[Way] = []
    _Reader(code, shown, found).block(body[0] + 1, body[1], ())
    return found


class _Reader:
    def __init__(self, code: str, shown: str, found: list[Way]) -> None:
        self.code, self.shown, self.found = code, shown, found
        # a flag the dispatch sets (``bool can_implement = false;`` then ``can_implement =
        # true;`` in each branch): its length of way when declared, and the ways setting it
        self.flags: dict[str, tuple[int, list[str]]] = {}

    def block(self, start: int, end: int, live: Live | None) -> Live | None:
        pos = start
        while live is not None:
            pos = self._skip(pos, end)
            if pos >= end:
                break
            pos, live = self.statement(pos, end, live)
        return live

    def _skip(self, pos: int, end: int) -> int:
        while pos < end and (self.code[pos].isspace() or self.code[pos] == ";"):
            pos += 1
        return pos

    def statement(self, pos: int, end: int, live: Live) -> tuple[int, Live | None]:
        code = self.code
        if code[pos] == "{":
            close = match_close(code, pos, "{", "}")
            return close + 1, self.block(pos + 1, close, live)
        word = _WORD.match(code, pos)
        keyword = word[0] if word else ""
        if keyword == "if":
            return self._if(word.end() if word else pos, end, live)
        if keyword == "else":  # an else without its if (a directive split them): read on
            return word.end() if word else pos + 1, live
        if keyword in _OPAQUE:
            stop = self._opaque_end(pos, end, keyword)
            text = code[pos:stop]
            leaves = re.search(r"\b(?:return|throw)\b", text) or _RAISING.search(text)
            return stop, (live + (Condition(f"!(1) || {_MAYBE}"),) if leaves else live)
        stop = self._statement_end(pos, end)
        return stop + 1, self._simple(pos, stop, live, keyword)

    def _if(self, pos: int, end: int, live: Live) -> tuple[int, Live | None]:
        code = self.code
        constexpr = re.match(r"\s*constexpr\b", code[pos:])
        pos += constexpr.end() if constexpr else 0
        opened = code.find("(", pos, end)
        if opened < 0:
            return end, live
        close = match_close(code, opened, "(", ")")
        cond = self._flagged(_condition(code[opened + 1:close]))
        pos = self._skip(close + 1, end)
        after, then = self.statement(pos, end, live + (Condition(cond),))
        otherwise: Live | None = live + (Condition(f"!({cond})"),)
        rest = self._skip(after, end)
        if re.match(r"else\b", code[rest:rest + 5]) and otherwise is not None:
            after, otherwise = self.statement(self._skip(rest + 4, end), end, otherwise)
        if then is None and otherwise is None:
            return after, None
        if then is None or otherwise is None:
            return after, then if otherwise is None else otherwise
        more = [Condition(f"!({cond}) || {_MAYBE}")] if len(then) > len(live) + 1 else []
        more += [Condition(f"({cond}) || {_MAYBE}")] if len(otherwise) > len(live) + 1 else []
        return after, live + tuple(more)

    def _simple(self, pos: int, stop: int, live: Live, keyword: str
                ) -> Live | None:
        text = self.code[pos:stop]
        shown = " ".join(self.shown[pos:stop + 1].split())
        line = self.code.count("\n", 0, pos) + 1
        if keyword == "return":
            self._calls(text, line, shown, live)
            return None
        if keyword == "throw":
            self.found.append(Way(line, shown, live))
            return None
        check = _RAISING.match(text)
        if check is None:
            self._flag(text, live)
            self._calls(text, line, shown, live)
            return live
        args = split_arguments(text[check.end():])
        op = _CMP.get(check[1].removesuffix("_MSG").removesuffix("_WITH_INFO"))
        if op and len(args) >= 2:
            holds = f"({_condition(args[0])}) {op} ({_condition(args[1])})"
        elif args:
            holds = _condition(args[0])
        else:
            return live
        holds = self._flagged(holds)
        if holds.strip() in ("false", "0"):
            self.found.append(Way(line, shown, live))
            return None
        self.found.append(Way(line, shown, live + (Condition(f"!({holds})"),)))
        return live + (Condition(holds, assumed=True),)

    def _flag(self, text: str, live: Live) -> None:
        declared = _DECLARED.fullmatch(text.strip())
        if declared:
            self.flags[declared[1]] = (len(live), [])
            return
        setting = _SETS.fullmatch(text.strip())
        if setting and setting[1] in self.flags:
            start, ways = self.flags[setting[1]]
            way = " && ".join(f"({c.expr})" for c in live[start:] if not c.assumed)
            ways.append(way or "1")

    def _flagged(self, expression: str) -> str:
        """``expression`` with each flag replaced by the ways that set it (``0``: none)."""
        for name, (_, ways) in self.flags.items():
            if re.search(rf"\b{name}\b", expression):
                either = " || ".join(f"({w})" for w in ways) or "0"
                expression = re.sub(rf"\b{name}\b", f"({either})", expression)
        return expression

    def _calls(self, text: str, line: int, shown: str, live: Live) -> None:
        names = tuple(dict.fromkeys(m[1] for m in _CALL.finditer(text) if m[1] not in _NOT_CALLS))
        if names:
            self.found.append(Way(line, shown, live, names))

    def _statement_end(self, pos: int, end: int) -> int:
        depth = 0
        for index in range(pos, end):
            ch = self.code[index]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == ";" and depth <= 0:
                return index
        return end

    def _opaque_end(self, pos: int, end: int, keyword: str) -> int:
        at = self._skip(pos + len(keyword), end)
        if self.code[at:at + 1] == "(":
            at = self._skip(match_close(self.code, at, "(", ")") + 1, end)
        if self.code[at:at + 1] == "{":
            at = match_close(self.code, at, "{", "}") + 1
        else:
            at = self._statement_end(at, end) + 1
        follow = self._skip(at, end)
        tail = re.match(r"(?:while\s*\(|catch\s*\()", self.code[follow:follow + 7])
        if tail:  # do {...} while (...); try {...} catch (...) {...}
            return self._opaque_end(follow, end, tail[0].split("(")[0].strip())
        return at


def _condition(text: str) -> str:
    return " ".join(_SM_READ.sub(SM_CALL, text).split())


def reached(conditions: Live, names: Mapping[str, str], major: int, minor: int,
            known: Mapping[str, int]) -> bool | None:
    """Whether a way with ``conditions`` is taken on capability ``major``.``minor``:
    ``names`` hold the capability (``major``, ``minor`` or ``sm``: major*10+minor),
    ``known`` the integer constants.  A test of anything else (a dtype, a shape) is
    unknown: a condition is decided only where it comes out the same whichever way
    each such test goes; a passed check naming no capability is not read."""
    unsure = False
    capability = set(names) | {SM_CALL}
    for condition in conditions:
        if condition.assumed and not capability & set(_WORD.findall(condition.expr)):
            continue
        value = _holds(condition.expr, names, major, minor, known)
        if value is False:
            return False
        unsure = unsure or value is None
    return None if unsure else True


def _holds(expression: str, names: Mapping[str, str], major: int, minor: int,
           known: Mapping[str, int]) -> bool | None:
    values = {"major": major, "minor": minor, "sm": major * 10 + minor}
    macros = {name: Macro(name, str(value)) for name, value in known.items()}
    macros |= {name: Macro(name, str(values[kind])) for name, kind in names.items()}
    macros[SM_CALL] = Macro(SM_CALL, str(values["sm"]))
    tests: dict[str, str] = {}
    plain = _abstract(expression, set(names) | {SM_CALL}, known, tests)
    if plain is None or len(tests) > 8:
        return None
    seen: set[bool] = set()
    for choice in itertools.product("01", repeat=len(tests)):
        chosen = {v: Macro(v, c) for v, c in zip(tests.values(), choice, strict=True)}
        try:
            seen.add(evaluate(plain, macros | chosen).true)
        except ExprError:
            return None
        if len(seen) > 1:
            return None
    return seen.pop() if seen else None


def _abstract(expression: str, capability: set[str], constants: Mapping[str, int],
              tests: dict[str, str]) -> str | None:
    """``expression`` with each test naming no capability replaced by a name standing
    for its truth (``tests``: test -> name): ``sm_version == 100 && out_dtype ==
    torch::kHalf`` -> ``sm_version == 100 && __t0``; None when a test mixes both."""
    text = expression.strip()
    while text.startswith("(") and match_close(text, 0, "(", ")") == len(text) - 1:
        text = text[1:-1].strip()
    for operator in ("||", "&&"):
        parts = _split(text, operator)
        if len(parts) > 1:
            done = [_abstract(part, capability, constants, tests) for part in parts]
            return None if None in done else f" {operator} ".join(f"({d})" for d in done)
    if text.startswith("!") and not text.startswith("!="):
        inner = _abstract(text[1:], capability, constants, tests)
        return None if inner is None else f"!({inner})"
    words = set(_WORD.findall(text))
    if not words & capability:
        if text.isdigit() or text in ("true", "false"):
            return {"true": "1", "false": "0"}.get(text, text)
        return tests.setdefault(text, f"__t{len(tests)}")
    rest = _ATOM.sub(lambda m: "" if m[0] in capability or m[0] in constants
                     or m[0][0].isdigit() else m[0], text)
    return None if rest.strip(" <>=!+-*/%()") else text


def _split(text: str, operator: str) -> list[str]:
    """``text`` split at ``operator`` outside parentheses."""
    parts, depth, last, index = [], 0, 0, 0
    while index < len(text):
        ch = text[index]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and text.startswith(operator, index):
            parts.append(text[last:index])
            last = index + len(operator)
            index += len(operator)
            continue
        index += 1
    parts.append(text[last:])
    return parts
