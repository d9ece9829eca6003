"""Signals arrive through a pipe, and shutdown has a deadline.

A Python signal handler runs in the main thread between bytecodes: if that thread is stuck in
a long C call it never runs, and if the handler takes a lock the interrupted code holds (an
``Event.set`` while the worker waits on it), the process deadlocks. So the handlers here do
nothing; ``signal.set_wakeup_fd`` makes the C-level handler write the signal number to a pipe
at once, and a thread reads it and acts. On SIGTERM or SIGINT it asks the worker to stop and,
if the worker has not finished within the grace period, ends the process with ``os._exit``:
children started with the parent death signal (Ansible, renders) go with it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)
GRACE = 6.0  # seconds; systemd and kubelet wait 10 s or more before SIGKILL


def _ignore(_signum: int, _frame: object) -> None:
    """The C handler already wrote the signal to the pipe: nothing to do here, no lock taken."""


class Signals:
    def __init__(
        self,
        stop: Callable[[], None],
        stopped: threading.Event,
        reload: Callable[[], None],
        grace: float = GRACE,
    ):
        self.stop, self.stopped, self.reload, self.grace = stop, stopped, reload, grace
        self._stopping = False

    def install(self) -> None:
        """Call from the main thread, before the worker starts."""
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, _ignore)
        threading.Thread(target=self._read, args=(r,), name="signals", daemon=True).start()

    def _read(self, fd: int) -> None:
        while True:
            try:
                data = os.read(fd, 64)
            except InterruptedError:
                continue
            if not data:
                return
            for signum in data:
                if signum == signal.SIGHUP:
                    self.reload()
                elif signum in (signal.SIGTERM, signal.SIGINT) and not self._stopping:
                    self._stopping = True
                    log.info("signal %d: stopping", signum)
                    self.stop()
                    threading.Thread(target=self._deadline, name="shutdown", daemon=True).start()

    def _deadline(self) -> None:
        if self.stopped.wait(self.grace):
            return
        log.error("the worker did not stop within %.0f s of the signal; exiting now", self.grace)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(1)
