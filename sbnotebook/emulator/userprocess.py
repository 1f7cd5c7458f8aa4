"""The shared emulator: one detached emulator process per user and machine, kept on disk.

Every notebook kernel of a user that has no connection configured uses the same emulator, so a
message sent in one notebook is there in the next, and after a kernel restart. It lives in
``$SBNOTEBOOK_HOME/emulator/`` (default ``~/.sbnotebook/emulator/``)::

    key          the shared access key, random, made once, readable only by the user (0600)
    state.json   host, port and pid of the running emulator (no key)
    data/        its durable store (SQLite): messages survive a restart of the emulator itself
    emulator.log its error output
    lock         taken while one kernel checks or starts it, so two kernels starting at once
                 get one emulator

``sbnotebook emulator --status`` / ``--stop`` / ``--reset`` (stop and delete every message) manage
it from a shell. Tests point ``SBNOTEBOOK_HOME`` at a temporary directory.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .security.sas import DEFAULT_KEY_NAME, sign

ENV_HOME = "SBNOTEBOOK_HOME"
START_TIMEOUT = 30.0


def home() -> Path:
    """Where the shared emulator lives: ``$SBNOTEBOOK_HOME/emulator``, default ``~/.sbnotebook/emulator``."""
    base = os.environ.get(ENV_HOME) or str(Path.home() / ".sbnotebook")
    return Path(base).expanduser() / "emulator"


@dataclass(frozen=True)
class Running:
    """A running shared emulator. The key is read from the key file when needed, never kept in a repr."""

    host: str
    port: int
    pid: int
    directory: Path

    def __repr__(self) -> str:
        return f"<shared emulator {self.host}:{self.port} pid {self.pid} in {self.directory}>"

    @property
    def key(self) -> str:
        return _read_key(self.directory)


# ------------------------------------------------------------------ files


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _read_key(directory: Path) -> str:
    return (directory / "key").read_text(encoding="ascii").strip()


def ensure_key(directory: Path) -> Path:
    """The key file, made once with a random key, mode 0600 (created so, never widened)."""
    path = directory / "key"
    if not path.exists():
        key = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(key + "\n")
    os.chmod(path, 0o600)
    return path


def read_state(directory: Path) -> Running | None:
    return _read_state_file(directory / "state.json")


def read_state_file(path: Path) -> Running | None:
    """The emulator a ``--state-file`` names, if the file is there and whole (no key is in it)."""
    return _read_state_file(path)


def _read_state_file(path: Path) -> Running | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        return Running(str(state["host"]), int(state["port"]), int(state["pid"]), path.parent)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_state(path: Path, host: str, port: int, pid: int) -> None:
    """Written by the emulator process once it listens (atomically: readers never see half a file)."""
    tmp = path.with_name(f"{path.name}.{pid}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"host": host, "port": port, "pid": pid}, f)
    os.replace(tmp, path)


def clear_state(path: Path, pid: int) -> None:
    """Remove the state file if it still names ``pid`` (a newer emulator's file stays)."""
    state = _read_state_file(path)
    if state is not None and state.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on ``directory/lock`` across processes (fcntl; msvcrt on Windows)."""
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if sys.platform == "win32":
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    time.sleep(0.1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


# ------------------------------------------------------------------ liveness


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process took the pid; the port check decides
    except OSError:
        return False
    return True


def answers(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def connections(running: Running, timeout: float = 2.0) -> dict[str, int] | None:
    """The AMQP connections it has open and its cap (its administration API's ``/$emulator/status``,
    with a token signed by the key file); None when it does not say."""
    url = f"http://{running.host}:{running.port}/$emulator/status"
    token = sign(f"sb://{running.host}:{running.port}", DEFAULT_KEY_NAME, running.key, time.time() + 60)
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"Authorization": token}), timeout=timeout
        ) as r:
            answer = json.loads(r.read())
        return {"connections": int(answer["connections"]), "max_connections": int(answer["max_connections"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def alive(state: Running | None) -> bool:
    return state is not None and _pid_alive(state.pid) and answers(state.host, state.port)


def status(directory: Path | None = None) -> Running | None:
    """The running shared emulator, or None (no state file, its process gone, or it does not answer)."""
    directory = directory or home()
    state = read_state(directory)
    return state if alive(state) else None


# ------------------------------------------------------------------ start / stop


def ensure(directory: Path | None = None, *, timeout: float = START_TIMEOUT, clock: str = "system") -> Running:
    """The running shared emulator, started (detached, durable) if there is none; ``clock="manual"``
    starts it with ``--clock manual`` (one already running keeps the clock it has)."""
    directory = _private_dir(directory or home())
    state = read_state(directory)
    if alive(state):
        assert state is not None
        return state
    with _locked(directory):
        state = read_state(directory)  # another kernel may have started it while we waited
        if alive(state):
            assert state is not None
            return state
        return _start(directory, timeout, clock)


def _start(directory: Path, timeout: float, clock: str = "system") -> Running:
    key_file = ensure_key(directory)
    data = _private_dir(directory / "data")
    log_path = directory / "emulator.log"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    command = [
        sys.executable,
        "-m",
        "sbnotebook.emulator",
        "--port",
        "0",
        "--data-dir",
        str(data),
        "--key-file",
        str(key_file),
        "--state-file",
        str(directory / "state.json"),
        "--quiet",
        "--clock",
        clock,
    ]
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_fd,
            start_new_session=True,  # not in the kernel's process group: survives a kernel restart
            close_fds=True,
        )
    finally:
        os.close(log_fd)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = read_state(directory)
        if state is not None and state.pid == process.pid and answers(state.host, state.port):
            return state
        if process.poll() is not None:
            break
        time.sleep(0.05)
    if process.poll() is None:
        process.terminate()
    tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
    why = f": {tail[0]}" if tail else ""
    raise RuntimeError(f"The shared emulator did not start (see {log_path}){why}")


def stop(directory: Path | None = None, *, timeout: float = 15.0) -> int | None:
    """Stop the shared emulator (its messages stay in data/); the pid stopped, or None if none ran."""
    directory = directory or home()
    if not directory.exists():
        return None
    with _locked(directory):
        state = read_state(directory)
        if state is None:
            return None
        if _pid_alive(state.pid) and answers(state.host, state.port):
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.pid, signal.SIGTERM)
            _wait_gone(state.pid, timeout)
        clear_state(directory / "state.json", state.pid)
        return state.pid


def _wait_gone(pid: int, timeout: float) -> None:
    """Until the process has exited (its store flushed), reaping it if it is our own child."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError, OSError, AttributeError):  # AttributeError: no WNOHANG
            os.waitpid(pid, os.WNOHANG)
        if not _pid_alive(pid):
            return
        time.sleep(0.05)
    raise RuntimeError(f"The shared emulator (pid {pid}) did not stop within {timeout:.0f} s.")


def reset(directory: Path | None = None) -> None:
    """Stop it and delete its messages and key: the next kernel starts an empty one with a new key."""
    directory = directory or home()
    stop(directory)
    if directory.exists():
        with _locked(directory):
            shutil.rmtree(directory / "data", ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                (directory / "key").unlink()
