"""A FIFO standing in for /dev/watchdog (this kernel has no softdog): what a writer sends it,
byte by byte with the time it arrived, and each time the writer closed it.

It is opened for reading at once, so a writer's non-blocking open succeeds, and read on a
thread until ``stop``. With no writer a FIFO reads as end-of-file at once, every time: the
thread tells "no writer yet" from "the writer closed" by whether data came since the last close.
"""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path


class FifoWatchdog:
    def __init__(self, path: Path, *, made: bool = False) -> None:
        """``made``: the FIFO exists already (else it is made here)."""
        self.path = path
        if not made:
            os.mkfifo(path)
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.received: list[tuple[float, bytes]] = []  # (monotonic time, one byte)
        self.closes: list[float] = []  # when a writer that had written closed the FIFO
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="fifo-watchdog", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        open_writer = False
        while not self._stop.is_set():
            select.select([self._fd], [], [], 0.1)
            try:
                chunk = os.read(self._fd, 64)
            except BlockingIOError:  # a writer that has not written yet
                continue
            now = time.monotonic()
            with self._cond:
                if chunk:
                    open_writer = True
                    self.received.extend((now, chunk[i : i + 1]) for i in range(len(chunk)))
                elif open_writer:
                    open_writer = False
                    self.closes.append(now)
                self._cond.notify_all()
            if not chunk:
                self._stop.wait(0.01)  # no writer: end-of-file at once, every time

    def data(self) -> bytes:
        with self._cond:
            return b"".join(b for _, b in self.received)

    def keepalives(self, since: float = 0.0) -> list[float]:
        """When each keepalive (NUL) arrived, from ``since`` on."""
        with self._cond:
            return [t for t, b in self.received if b == b"\0" and t >= since]

    def wait_closed(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Whether the writer closed the FIFO ``count`` times within ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.closes) >= count, timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        os.close(self._fd)
