"""One persistent ``git cat-file --batch`` per repository: blobs read without a spawn each.

Reading a blob with ``cat-file -e`` then ``cat-file blob`` costs two processes;
the carry, its scope checks and validate's tree views read hundreds of small
files in one operation.  A :class:`BlobReader` starts one batch process on the
first read and answers every later read over its pipes, as git's own tools and
b4 do.  It lives as long as its :class:`~contrib.git.repo.Git`; :meth:`close`
ends it early (and a finished interpreter ends it anyway).
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from contrib.errors import GitError
from contrib.git.process import NO_GIT, announce, clean_env

_CHUNK = 64  # requests written before their answers are read (well under a pipe's buffer)


class BlobReader:
    """Blob contents of ``rev:path`` names in one repository, over one batch process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._proc: subprocess.Popen[bytes] | None = None
        # The sync's landed look reads beside the carry, on a thread: one request at a time.
        self._lock = threading.Lock()

    def read(self, rev: str, path: str) -> bytes | None:
        """The blob at ``rev:path``; None when there is none (absent, a tree, a bad name)."""
        return self.read_many(rev, [path]).get(path)

    def read_many(self, rev: str, paths: Sequence[str]) -> dict[str, bytes | None]:
        """The blobs of many ``paths`` at ``rev``: one request, answered in order."""
        wanted = list(dict.fromkeys(paths))
        names = [p for p in wanted if "\n" not in p and "\r" not in p]
        found: dict[str, bytes | None] = dict.fromkeys(wanted)
        for path, got in zip(names, self.objects([f"{rev}:{p}" for p in names]), strict=True):
            found[path] = got[2] if got is not None and got[1] == "blob" else None
        return found

    def objects(self, names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
        """(sha, type, content) of each object name (``REV``, ``REV:PATH``,
        ``REV^{tree}``), None for one that names nothing; one request, in order."""
        found: list[tuple[str, str, bytes] | None] = []
        if not names:
            return found
        with self._lock:
            return self._ask(names)

    def _ask(self, names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
        found: list[tuple[str, str, bytes] | None] = []
        stdin, stdout = self._pipes()
        try:
            # A few requests at a time: all at once, git blocks writing answers nobody
            # reads yet, stops reading, and our write of the rest blocks too (a deadlock
            # once the names pass the pipe's buffer: ~1000 paths at a full sha).
            for start in range(0, len(names), _CHUNK):
                chunk = names[start:start + _CHUNK]
                request = "".join(f"{name}\n" for name in chunk)
                stdin.write(request.encode("utf-8", "surrogateescape"))
                stdin.flush()
                found += [_answer(stdout) for _ in chunk]
        except (OSError, ValueError) as exc:  # the process died under us: start afresh next time
            self.close()
            raise GitError(f"`git cat-file --batch` in {self.path} stopped: {exc}") from None
        return found

    def close(self) -> None:
        """End the batch process (a later read starts a new one)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a dead git's pipe: nothing left to say
                    stream.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        if self._proc is None or self._proc.poll() is not None:
            args = ["cat-file", "--batch"]
            announce(args, self.path)
            try:
                self._proc = subprocess.Popen(["git", *args], cwd=self.path, env=clean_env(),
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL)
            except FileNotFoundError:
                raise GitError(NO_GIT) from None
        assert self._proc.stdin is not None and self._proc.stdout is not None
        return self._proc.stdin, self._proc.stdout

    def __del__(self) -> None:
        self.close()


def _answer(stdout: IO[bytes]) -> tuple[str, str, bytes] | None:
    """One answer of ``--batch``: ``<sha> <type> <size>`` and the content, or ``... missing``."""
    header = stdout.readline()
    if not header:
        raise ValueError("no answer")
    parts = header.split()
    if len(parts) != 3:  # "<name> missing" or "<name> ambiguous"
        return None
    data = stdout.read(int(parts[2]))
    stdout.read(1)  # the newline after the content
    return parts[0].decode("ascii"), parts[1].decode("ascii"), data
