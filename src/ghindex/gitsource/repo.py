"""Running git on a local repository: read-only, argument lists, a clean environment.

Every call goes through `Git`: no shell, `core.quotepath=off`, `LC_ALL=C`, no pager,
no system config, and none of the caller's `GIT_*` variables (a stray `GIT_DIR` or
`GIT_INDEX_FILE` would point git somewhere else). The user's global config stays: it is
where `safe.directory` lives, which CI runners need to read a checkout owned by
another user. Everything parsed from git's output is read with `-z` or from object
contents, never from quoted paths.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ghindex.errors import ConfigError, GitSourceError

_CONFIG = (
    "-c",
    "core.quotepath=off",
    "-c",
    "core.pager=cat",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "color.ui=never",
    "-c",
    "log.showSignature=false",
    "-c",
    "log.showRoot=true",
)

_SHA = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_PAGER="cat",
        PAGER="cat",
        LC_ALL="C",
        LANG="C",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_REPLACE_OBJECTS="1",
    )
    return env


class Git:
    """One repository (a work tree's top or a bare repository)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = git_env()

    def argv(self, *args: str) -> list[str]:
        return ["git", *_CONFIG, *args]

    def run(self, *args: str, check: bool = True) -> bytes:
        proc = subprocess.run(
            self.argv(*args),
            cwd=self.path,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        if check and proc.returncode != 0:
            raise self.error(args, proc.stderr)
        return proc.stdout

    def ok(self, *args: str) -> bool:
        proc = subprocess.run(
            self.argv(*args),
            cwd=self.path,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return proc.returncode == 0

    def text(self, *args: str) -> str:
        return self.run(*args).decode("utf-8", "replace").strip()

    @contextmanager
    def stream(self, *args: str, stdin_lines: Iterable[str] | None = None) -> Iterator[Reader]:
        """Run git and read its stdout as it comes; stdin is fed from another thread.

        If the caller stops reading early, git is stopped; if git fails, the error
        carries its stderr.
        """
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                self.argv(*args),
                cwd=self.path,
                env=self.env,
                stdin=subprocess.PIPE if stdin_lines is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
            feeder = None
            if stdin_lines is not None:
                feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin_lines), daemon=True)
                feeder.start()
            assert proc.stdout is not None
            reader = Reader(proc.stdout)
            finished = False
            try:
                yield reader
                finished = reader.at_eof()
            finally:
                if not finished:
                    proc.kill()
                proc.stdout.close()
                code = proc.wait()
                if feeder is not None:
                    feeder.join()
            if finished and code != 0:
                errors.seek(0)
                raise self.error(args, errors.read())

    def error(self, args: Iterable[str], stderr: bytes) -> GitSourceError:
        lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        fatal = next((ln for ln in lines if ln.startswith(("fatal:", "error:"))), None)
        why = fatal or (lines[0] if lines else "no error message")
        command = " ".join(["git", *list(args)[:2]])
        return GitSourceError(f"`{command}` failed in {self.path}: {why}")


def _feed(pipe: IO[bytes] | None, lines: Iterable[str]) -> None:
    assert pipe is not None
    try:
        for line in lines:
            pipe.write(line.encode() + b"\n")
        pipe.close()
    except (BrokenPipeError, ValueError, OSError):
        pass  # git stopped early: the reader side reports it


@dataclass(frozen=True)
class RawChange:
    """One record of `git diff-tree -z --raw`."""

    old_mode: str
    new_mode: str
    new_blob: str
    status: str  # A, D, M, T, or R/C with a similarity score
    path: str  # for a rename or copy, the old path
    new_path: str | None  # for a rename or copy, the new path


def path_text(raw: bytes) -> str:
    """A path as git stores it (bytes) as text: UTF-8, and each byte that is not UTF-8
    written `\\xNN`, so two different names never become one (U+FFFD would merge them)."""
    text = raw.decode("utf-8", "surrogateescape")
    return re.sub(r"[\udc80-\udcff]", lambda m: f"\\x{ord(m.group(0)) - 0xDC00:02x}", text)


def tree_path(raw: bytes) -> str | None:
    """`path_text`, or None for a path that would leave the repository or name nothing
    (an absolute path, an empty, `.` or `..` part: a crafted tree can hold them)."""
    text = path_text(raw)
    if not text or text.startswith("/") or "\0" in text:
        return None
    if any(part in ("", ".", "..") for part in text.split("/")):
        return None
    return text


def read_raw_change(out: Reader, meta: bytes) -> RawChange:
    """The record whose metadata token (`:old_mode new_mode old_blob new_blob status`)
    was just read from `out`: reads its path, and a rename's or copy's second path."""
    old_mode, new_mode, _, new_blob, status = meta[1:].decode().split(" ")
    path = path_text(out.until(b"\0") or b"")
    new_path = None
    if status[0] in "RC":
        new_path = path_text(out.until(b"\0") or b"")
    return RawChange(old_mode, new_mode, new_blob, status, path, new_path)


class Reader:
    """Buffered reads from git's stdout up to a delimiter."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._pos = 0
        self._eof = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = self._stream.read1(1 << 16)  # type: ignore[attr-defined]
        if not chunk:
            self._eof = True
            return False
        if self._pos > (1 << 20) or self._pos == len(self._buf):
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += chunk
        return True

    def until(self, delim: bytes) -> bytes | None:
        """The bytes before the next `delim` (consumed), the rest at the end, None after it."""
        scanned = 0  # bytes after _pos already searched (a long line spans many reads)
        while True:
            end = self._buf.find(delim, self._pos + scanned)
            if end >= 0:
                out = bytes(self._buf[self._pos : end])
                self._pos = end + len(delim)
                return out
            scanned = max(0, len(self._buf) - self._pos - len(delim) + 1)
            if not self._fill():
                if self._pos >= len(self._buf):
                    return None
                out = bytes(self._buf[self._pos :])
                self._pos = len(self._buf)
                return out

    def lines_before(self, stop: re.Pattern[bytes], longest: int = 66) -> bytes | None:
        """The next whole lines up to a line where `stop` matches (not consumed).

        Returns what is buffered (at least one line), or None when the next line
        matches `stop` or the stream has ended. `longest` is the most bytes a match
        can span, so a match cut by a read is never missed.
        """
        while True:
            pos, buf = self._pos, self._buf
            available = len(buf) - pos
            if available < longest and not self._eof:
                self._fill()
                continue
            if available == 0:
                return None
            found = stop.search(buf, pos)
            if found is not None and found.start() == pos:
                return None
            end = found.start() if found is not None else buf.rfind(b"\n", pos) + 1
            if found is None and self._eof:
                end = len(buf)
            if end <= pos:  # a line longer than the buffer
                self._fill()
                continue
            self._pos = end
            return bytes(buf[pos:end])

    def peek(self, n: int) -> bytes:
        while len(self._buf) - self._pos < n and self._fill():
            pass
        return bytes(self._buf[self._pos : self._pos + n])

    def read(self, n: int) -> bytes:
        self.peek(n)
        out = bytes(self._buf[self._pos : self._pos + n])
        self._pos += len(out)
        return out

    def at_eof(self) -> bool:
        return self._pos >= len(self._buf) and not self._fill()


class Objects:
    """A long-running `git cat-file --batch`: object contents by name, one process."""

    def __init__(self, git: Git) -> None:
        self._proc = subprocess.Popen(
            git.argv("cat-file", "--batch"),
            cwd=git.path,
            env=git.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self._proc.stdout is not None
        self._reader = Reader(self._proc.stdout)
        self._git = git

    def get(self, name: str) -> tuple[str, bytes] | None:
        """(type, content) of an object, or None if the repository lacks it."""
        return self.get_many([name])[0]

    def get_many(self, names: list[str]) -> list[tuple[str, bytes] | None]:
        """`get` for many objects, in one round trip per 100 names.

        100 names (at most 6.5 KB of requests) fit in the pipe to git on every
        platform, so writing them all before reading cannot deadlock.
        """
        found: list[tuple[str, bytes] | None] = []
        for start in range(0, len(names), 100):
            chunk = names[start : start + 100]
            self._send(b"".join(name.encode() + b"\n" for name in chunk))
            found += [self._receive() for _ in chunk]
        return found

    def _send(self, requests: bytes) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(requests)
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise GitSourceError(f"`git cat-file` stopped in {self._git.path}") from None

    def _receive(self) -> tuple[str, bytes] | None:
        header = self._reader.until(b"\n")
        if header is None:
            raise GitSourceError(f"`git cat-file` stopped in {self._git.path}")
        parts = header.split(b" ")
        if len(parts) != 3:
            return None  # '<name> missing' or '<name> ambiguous'
        size = int(parts[2])
        content = self._reader.read(size)
        self._reader.read(1)  # the newline after the content
        return parts[1].decode(), content

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc.wait()

    def __enter__(self) -> Objects:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_repository(path: Path) -> Git:
    """The repository at `path`, which must be a work tree's top or a bare repository."""
    if shutil.which("git") is None:
        raise GitSourceError("git is not installed: install git and put it on PATH")
    path = Path(path).expanduser()
    if not path.exists():
        raise ConfigError(f"{path} does not exist: pass the path of a git checkout")
    if not path.is_dir():
        raise ConfigError(f"{path} is not a directory: pass the path of a git checkout")
    path = path.resolve()
    git = Git(path)
    proc = subprocess.run(
        git.argv("rev-parse", "--is-bare-repository", "--absolute-git-dir"),
        cwd=path,
        env=git.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace")
        if "not a git repository" in message:
            raise ConfigError(f"{path} is not a git repository: pass the path of a git checkout")
        raise git.error(["rev-parse"], proc.stderr)
    bare, git_dir = proc.stdout.decode("utf-8", "replace").split("\n")[:2]
    top = Path(git_dir) if bare == "true" else Path(git.text("rev-parse", "--show-toplevel"))
    if top.resolve() != path:
        raise ConfigError(
            f"{path} is not the top of a git repository (it is inside {top}): "
            "pass the path of a checkout"
        )
    return git


def resolve_branch(git: Git, branch: str | None) -> str:
    """The full sha of the commit to index: HEAD, or the tip of `branch`."""
    if branch is None:
        if not git.ok("rev-parse", "--verify", "--quiet", "HEAD^{commit}"):
            raise ConfigError(f"{git.path} has no commits: commit something or check out a branch")
        return git.text("rev-parse", "--verify", "HEAD^{commit}")
    for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}", branch):
        if git.ok("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"):
            return git.text("rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}")
    raise ConfigError(
        f"no branch {branch!r} in {git.path}: fetch it (git fetch origin {branch}) "
        "or pass another branch"
    )


def shallow_commits(git: Git) -> frozenset[str]:
    """The commits whose parents a shallow clone lacks (empty for a full clone)."""
    if git.text("rev-parse", "--is-shallow-repository") != "true":
        return frozenset()
    shallow = Path(git.text("rev-parse", "--git-path", "shallow"))
    shallow = shallow if shallow.is_absolute() else git.path / shallow
    try:
        return frozenset(line.strip() for line in shallow.read_text().split() if line.strip())
    except FileNotFoundError:
        return frozenset()


def has_commit(git: Git, sha: str) -> bool:
    return git.ok("cat-file", "-e", f"{sha}^{{commit}}")


def is_ancestor(git: Git, old: str, new: str) -> bool:
    return git.ok("merge-base", "--is-ancestor", old, new)


def rev_list(git: Git, *revs: str) -> list[str]:
    """Commits reachable from the revs, newest first (`git log`'s order)."""
    out = git.run("rev-list", *revs, "--")
    return out.decode().split()


def is_sha(value: bytes) -> bool:
    return _SHA.fullmatch(value) is not None
