"""``contrib demo [DIR]``: the whole loop, offline, on a generated mini upstream.

The upstream is our own small imitation of the seed story (a JIT gate that
lists CUDA sources, a header whose kernels are guarded ``< 1200``).  The demo
runs ``audit`` (the gate, and its guarded kernels) -> ``enable --force`` (the
story's one-line gate patch) -> ``validate`` (it FAILS, naming the guards) -> the
whole fix (``new``) -> upstream moves -> ``sync`` -> ``validate`` (every required
stage passes; ``incomplete`` where no GPU runs the tests) -> ``open-pr --dry-run``,
narrating each step, in the workspace as a user would type each command.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from contrib.demo import upstream as mini
from contrib.errors import ContribError, UsageError
from contrib.git.repo import Git
from contrib.ui import UI

Command = Callable[[list[str]], int]  # a contrib command line -> its exit code

UPSTREAM = "minifer"
AUTHOR = {"GIT_AUTHOR_NAME": "Upstream Dev", "GIT_AUTHOR_EMAIL": "dev@upstream.invalid",
          "GIT_COMMITTER_NAME": "Upstream Dev", "GIT_COMMITTER_EMAIL": "dev@upstream.invalid"}
PATCHER = {"GIT_AUTHOR_NAME": "SM120 Carrier", "GIT_AUTHOR_EMAIL": "carrier@example.invalid",
           "GIT_COMMITTER_NAME": "SM120 Carrier", "GIT_COMMITTER_EMAIL": "carrier@example.invalid"}


class _Repo:
    """A throwaway non-bare repository with a deterministic clock."""

    def __init__(self, git: Git, who: Mapping[str, str]) -> None:
        self.git = git
        self.who = dict(who)
        self.tick = 0

    def commit(self, message: str, files: Mapping[str, str]) -> str:
        for rel, text in files.items():
            path = self.git.path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        self.tick += 1
        date = f"{1_767_225_600 + self.tick * 3600} +0000"
        env = self.who | {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        self.git.run("add", "-A")
        self.git.run("commit", "-q", "-m", message, env=env)
        return self.git.rev_parse("HEAD")

    def read(self, rel: str) -> str:
        return (self.git.path / rel).read_text(encoding="utf-8")


def demo(directory: Path | None, ui: UI, contrib: Command) -> int:
    """Build the demo world in ``directory`` and tell the story; 0 when it went as told.

    ``contrib`` runs one command line as the ``contrib`` program does (the CLI's own
    entry point, handed in: the demo sits below the command line it drives)."""
    root = _prepare(directory)
    # The demo keeps its upstream cache inside its own folder: nothing outside it is
    # touched.  Its commands run in the workspace, as a user types them there.
    saved, cwd = os.environ.get("CONTRIB_CACHE"), os.getcwd()
    os.environ["CONTRIB_CACHE"] = str(root / "cache")
    try:
        return _story(root, ui, contrib)
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("CONTRIB_CACHE", None)
        else:
            os.environ["CONTRIB_CACHE"] = saved


def _story(root: Path, ui: UI, contrib: Command) -> int:
    ui.info(f"contrib demo in {root}\n")
    upstream = _Repo(Git.init(root / "upstream"), AUTHOR)
    upstream.git.run("symbolic-ref", "HEAD", "refs/heads/main")
    upstream.commit("Initial import of minifer", mini.files("base"))
    upstream.commit("docs: describe the comm module",
                    {"docs/comm.md": "# comm\nAllreduce kernels for SM90/SM100.\n"})
    ws = _workspace(root)
    os.chdir(ws)

    _say(ui, 1, "Which gate turns SM120 away? contrib audit reads the upstream")
    _run(ui, ws, contrib, "audit", expect=(1,))
    ui.info("=> one gate, and its kernels are compiled out for sm_120a: widening the\n"
            "   gate alone will not do. The story's user wrote that one line anyway.\n")

    _say(ui, 2, "contrib enable drafts that one-line patch (--force: past the audit)")
    _run(ui, ws, contrib, "enable", UPSTREAM, f"{mini.GATE_FILE}:gen_trtllm_comm_module",
         "--force", "--name", "sm120-gate-only", expect=(1,))

    _say(ui, 3, "contrib validate: the gate now admits SM120, but the kernels are guarded")
    _run(ui, ws, contrib, "validate", f"{UPSTREAM}/sm120-gate-only", expect=(1,))
    ui.info("=> the one-line patch builds, yet the lamport kernel would be EMPTY on SM120.\n")

    _say(ui, 4, "The whole fix: widen the gate AND drop the `__CUDA_ARCH__ < 1200` guards")
    header = upstream.read(mini.HEADER).replace(mini.OLD_GUARD, mini.NEW_GUARD)
    whole = _patches(root, "whole-fix", [
        ("jit: admit SM120 in the trtllm comm gate", {mini.GATE_FILE: _gate(upstream)}),
        ("comm: build the allreduce kernels for SM12x", {mini.HEADER: header}),
    ])
    _run(ui, ws, contrib, "new", f"{UPSTREAM}/sm120-trtllm-comm", "--base", "main",
         *_flags("--patch", [Path(os.path.relpath(p, ws)) for p in whole]),
         "--title", "Enable the trtllm allreduce kernels on SM120")

    _say(ui, 5, "Upstream moves on: 30 commits; contrib sync carries both (3-way, no fuzz)")
    for number in range(30):
        comm = upstream.read(mini.GATE_FILE)
        if number % 10 == 0:
            comm = comm.replace("\n\ndef gen_comm_alltoall_module",
                                f"\n\nCOMM_REVISION_{number} = {number}\n\n\n"
                                "def gen_comm_alltoall_module", 1)
        upstream.commit(f"upstream change {number} (#{1000 + number})",
                        {mini.GATE_FILE: comm, f"docs/notes/{number}.md": f"note {number}\n"})
    _run(ui, ws, contrib, "status")
    _run(ui, ws, contrib, "sync")

    _say(ui, 6, "contrib validate on the whole fix, at the new tip")
    code = _run(ui, ws, contrib, "validate", f"{UPSTREAM}/sm120-trtllm-comm")

    _say(ui, 7, "contrib open-pr --dry-run: what would be pushed and posted")
    _run(ui, ws, contrib, "open-pr", f"{UPSTREAM}/sm120-trtllm-comm", "--dry-run")
    ui.info("\nDone. Explore it yourself (the demo keeps its upstream cache in its folder):")
    ui.info(f"  cd {shlex.quote(str(ws))}")
    ui.info(f"  CONTRIB_CACHE=../cache {_program()} status --no-fetch")
    return code


def _program() -> str:
    """How this run was started: ``contrib``, or ``python3 -m contrib`` (the README's)."""
    started = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "contrib" if started == "contrib" else "python3 -m contrib"


def _prepare(directory: Path | None) -> Path:
    if directory is None:
        return Path(tempfile.mkdtemp(prefix="contrib-demo-"))
    if directory.exists() and any(directory.iterdir()):
        raise UsageError(f"{directory}: not empty; the demo only writes into a new or empty "
                         "folder (nothing of yours is overwritten)")
    directory.mkdir(parents=True, exist_ok=True)
    return directory.resolve()


def _workspace(root: Path) -> Path:
    ws = root / "workspace"
    ws.mkdir()
    Git.init(root / "fork.git", bare=True)
    (ws / "contrib.toml").write_text(
        "# A demo workspace: the upstream is a local folder, the fork a local bare repo.\n"
        "[github]\napi_url = \"http://127.0.0.1:9\"  # never contacted: the demo is a dry run\n\n"
        f"[upstreams.{UPSTREAM}]\nurl = \"../upstream\"\nbranch = \"main\"\n"
        f"github = \"example/{UPSTREAM}\"\nfork = \"demo-user/{UPSTREAM}\"\n"
        f"push_url = \"{root / 'fork.git'}\"\n\n"
        "[defaults]\narch = \"sm_120a\"  # the GPU every --arch means here: RTX PRO 6000\n",
        encoding="utf-8")
    (ws / ".gitignore").write_text(".contrib/\n", encoding="utf-8")
    Git.init(ws)
    return ws


def _gate(upstream: _Repo) -> str:
    return upstream.read(mini.GATE_FILE).replace(mini.OLD_GATE, mini.NEW_GATE)


def _patches(root: Path, name: str, commits: list[tuple[str, Mapping[str, str]]],
             base: str = "main") -> list[Path]:
    """Commit ``commits`` in a scratch clone at ``base``; format-patch them."""
    work = root / f"work-{name}"
    Git(root / "upstream").run("worktree", "add", "-q", "--detach", str(work), base)
    repo = _Repo(Git(work), PATCHER)
    start = repo.git.rev_parse("HEAD")
    for message, files in commits:
        repo.commit(message, files)
    out = root / "patches" / name
    repo.git.run("format-patch", "-q", "-o", str(out), f"{start}..HEAD")
    Git(root / "upstream").run("worktree", "remove", "--force", str(work))
    return sorted(out.iterdir())


def _flags(flag: str, paths: list[Path]) -> list[str]:
    return [part for path in paths for part in (flag, str(path))]


def _say(ui: UI, number: int, text: str) -> None:
    ui.info(f"\n== {number}. {text}")


def _run(ui: UI, ws: Path, contrib: Command, *args: str, expect: tuple[int, ...] = (0,)) -> int:
    ui.info(f"$ contrib {shlex.join(args)}")  # run in the workspace: no -C to type
    code = contrib(["-C", str(ws), *args])
    if code not in expect:
        raise ContribError(f"demo step `contrib {shlex.join(args)}` exited {code}, expected "
                           f"{' or '.join(map(str, expect))}; the demo folder is kept at "
                           f"{ws.parent} for a look", exit_code=1)
    return code
