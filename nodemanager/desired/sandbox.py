"""Run template renders in a child process under limits: CPU time, memory, output, wall clock.

Jinja's sandbox stops unsafe attribute access, not work: ``{% for i in range(10**10) %}`` spins
and ``'x' * 10**10`` eats memory, and either would stop the only worker that keeps the host
right. So a batch of renders runs in a forked child with ``RLIMIT_CPU`` (per job) and
``RLIMIT_AS`` (the parent's address space plus a budget), and the parent waits at most a wall
clock budget per job. A job over a limit is an error for that job only: the child is killed
and the jobs after it go to a fresh child. Whatever memory a render took goes back with the
child, never to the agent.

This is still computation, not I/O: the child reads nothing and writes only framed results to
a pipe it shares with the parent, and it dies with the parent (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import select
import signal
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nodemanager.procutil import die_with_parent

_HEADER = struct.Struct("!BQ")  # kind (0 ok, 1 error), payload length


@dataclass(frozen=True)
class Limits:
    """Budgets per job. Wall clock is larger than CPU: the machine may be busy elsewhere."""

    cpu_seconds: int = 3
    memory_bytes: int = 512 * 2**20  # on top of the agent's own address space
    output_bytes: int = 16 * 2**20
    wall_seconds: float = 15.0
    # One call's budget for all its jobs: thirty templates at their limits must not hold every
    # other file (and the reconcile around them) for minutes.
    total_seconds: float = 20.0


class JobFailed(Exception):
    """A job raised (its message is kept) or went over a limit."""


class BudgetSpent(JobFailed):
    """Not tried to the end: the call's total budget ran out first. Worth trying again."""


Job = Callable[[], str]


def _address_space() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _child(jobs: Sequence[Job], fd: int, limits: Limits) -> None:
    """Run every job in order, one frame each; exits, never returns."""
    code = 0
    try:
        die_with_parent()
        with contextlib.suppress(ValueError):  # the agent's signal pipe is not ours to write to
            signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        space = _address_space()
        if space is not None:
            cap = space + limits.memory_bytes
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)[1]
        for job in jobs:
            # RLIMIT_CPU counts the whole process: each job gets the budget on top of what the
            # previous ones used. Over it, the kernel sends SIGXCPU, which ends the child.
            # Only the soft limit moves: a hard limit once lowered cannot be raised again.
            budget = math.ceil(_cpu_used()) + limits.cpu_seconds
            resource.setrlimit(resource.RLIMIT_CPU, (budget, hard_cpu))
            try:
                kind, text = 0, job()
                if len(text) > limits.output_bytes:  # characters; bytes checked below
                    raise JobFailed(f"output over the limit of {limits.output_bytes} bytes")
                payload = text.encode("utf-8", "surrogatepass")
                if len(payload) > limits.output_bytes:
                    raise JobFailed(f"output over the limit of {limits.output_bytes} bytes")
            except MemoryError:
                kind, payload = 1, f"over the memory limit of {limits.memory_bytes} bytes".encode()
            except Exception as e:
                kind, payload = 1, str(e).encode("utf-8", "replace")
            _write_all(fd, _HEADER.pack(kind, len(payload)) + payload)
    except BaseException:
        code = 3
    finally:
        os._exit(code)


class _Reader:
    """Frames from the child's pipe, each within a deadline."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, bytearray()

    def _fill(self, n: int, deadline: float) -> bool:
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(self.fd, max(65536, n - len(self.buf)))
            if not chunk:
                return False  # the child died
            self.buf += chunk
        return True

    def frame(self, deadline: float) -> tuple[int, bytes] | None:
        if not self._fill(_HEADER.size, deadline):
            return None
        kind, size = _HEADER.unpack(self.buf[: _HEADER.size])
        if not self._fill(_HEADER.size + size, deadline):
            return None
        payload = bytes(self.buf[_HEADER.size : _HEADER.size + size])
        del self.buf[: _HEADER.size + size]
        return kind, payload


def _reap(pid: int, kill: bool) -> int:
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def _why(status: int, limits: Limits) -> str:
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return f"over the CPU time limit of {limits.cpu_seconds} s"
    if os.WIFSIGNALED(status):
        return f"renderer killed by signal {os.WTERMSIG(status)}"
    return f"renderer exited {os.WEXITSTATUS(status)} (over the memory limit?)"


def run_limited(jobs: Sequence[Job], limits: Limits = Limits()) -> list[str | JobFailed]:
    """Each job's text, or a JobFailed saying why, in order. Never raises for a job's sake."""
    results: list[str | JobFailed] = []
    end = time.monotonic() + limits.total_seconds
    spent = BudgetSpent(f"not rendered: this pass's {limits.total_seconds:g} s budget was spent")
    while len(results) < len(jobs):
        if time.monotonic() >= end:
            results += [spent] * (len(jobs) - len(results))
            break
        rest = jobs[len(results) :]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(rest, w, limits)
        os.close(w)
        reader = _Reader(r)
        try:
            for _ in rest:
                own = time.monotonic() + limits.wall_seconds
                try:
                    frame = reader.frame(min(own, end))
                except TimeoutError:
                    _reap(pid, kill=True)
                    pid = 0
                    late = own > end
                    why = f"took longer than {limits.wall_seconds:g} s"
                    results.append(spent if late else JobFailed(why))
                    break
                if frame is None:
                    status = _reap(pid, kill=False)
                    pid = 0
                    results.append(JobFailed(_why(status, limits)))
                    break
                kind, payload = frame
                text = payload.decode("utf-8", "surrogatepass")
                results.append(text if kind == 0 else JobFailed(text))
        finally:
            os.close(r)
            if pid:
                _reap(pid, kill=True)
    return results
