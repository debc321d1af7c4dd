"""Cancellation of a waiting acquire of the synchronous client from another
thread (lockd.aio cancels with asyncio's own task.cancel()).

Thread-safe: cancel() may be called from any thread, any number of times,
before or during the calls it is passed to.
"""

import threading
from typing import Callable, List

from lockd.errors import Cancelled


class Cancellation:
    """Pass one as ``cancel=`` to acquire() and its kin; ``cancel()`` from any
    thread then ends the call promptly: a call waiting in lockd (or in a
    backoff pause, or for the session stream) raises lockd.Cancelled after
    the undo of what it may have added, so nothing of it stays held (unless
    that undo goes unanswered: then the error's
    ``unconfirmed_acquire_request_id`` is set, as for any acquire). A call
    given an already cancelled Cancellation raises Cancelled without
    sending anything. If the grant arrives before the cancel takes effect the
    call returns its lease as usual: release it. One Cancellation may serve
    several calls; it stays cancelled."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._cancelled = False
        self._callbacks: List[Callable[[], None]] = []
        self._event = threading.Event()

    def cancel(self) -> None:
        """Cancels every call this was passed to (now and later)."""
        with self._mu:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        self._event.set()
        for callback in callbacks:
            callback()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raises Cancelled if cancelled."""
        if self._event.is_set():
            raise Cancelled("lockd acquire cancelled")

    def sleep(self, seconds: float) -> None:
        """time.sleep(seconds), ended by cancel(): raises Cancelled."""
        if self._event.wait(seconds):
            self.check()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Runs ``callback`` (on the cancelling thread) at cancel(), or now
        if already cancelled. Returns a function that unregisters it."""
        with self._mu:
            if not self._cancelled:
                self._callbacks.append(callback)

                def remove() -> None:
                    with self._mu:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)
                return remove
        callback()
        return lambda: None
