"""A fixed pool of inference threads whose stuck calls can be retired (abandoned) and replaced."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class WorkerPool:
    """`size` long-lived daemon threads taking calls from one queue.

    Unlike ThreadPoolExecutor it never spawns extra threads on a busy moment, so backends can keep
    per-thread state (an onnxruntime session each) and there are exactly `size` of them. A call that
    was abandoned (timed out or skipped but still running: native code cannot be interrupted) can be
    `retire`d: its thread exits once the call returns and a fresh thread takes its place at once.
    Threads are daemons, so a process never hangs at exit on a stuck call.
    """

    def __init__(self, size: int, name: str = "engine") -> None:
        self.size = max(1, size)
        self.name = name
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running: dict[Future[Any], threading.Thread] = {}
        self._retired: set[threading.Thread] = set()
        self._serial = 0
        self._closed = False
        self._threads: list[threading.Thread] = []
        for _ in range(self.size):
            self._spawn()

    def _spawn(self) -> None:
        self._serial += 1
        t = threading.Thread(target=self._work, name=f"{self.name}-{self._serial}", daemon=True)
        self._threads = [*(x for x in self._threads if x.is_alive()), t]
        t.start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            item = self._queue.get()
            if item is None:
                return
            retired = self._call(me, *item)
            del item  # a parked thread keeps no finished call (nor its exception's traceback) alive
            if retired:
                return

    def _call(self, me: threading.Thread, fut: Future[Any], fn: Callable[[], Any]) -> bool:
        """Run one call; True when this thread was retired meanwhile and must leave."""
        if not fut.set_running_or_notify_cancel():
            return False
        with self._lock:
            self._running[fut] = me
        try:
            fut.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            fut.set_exception(exc)
        finally:
            with self._lock:
                self._running.pop(fut, None)
                retired = me in self._retired
                self._retired.discard(me)
        return retired

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        if self._closed:
            raise RuntimeError("the worker pool is shut down")
        fut: Future[Any] = Future()
        self._queue.put((fut, fn))
        return fut

    def retire(self, fut: Future[Any]) -> bool:
        """Give up on a running call: its thread leaves when the call returns; a new one starts now.

        Returns False (nothing done) when the call is not running any more.
        """
        with self._lock:
            thread = self._running.get(fut)
            if thread is None or thread in self._retired:
                return False
            self._retired.add(thread)
            if not self._closed:
                self._spawn()
        return True

    @property
    def retired_running(self) -> int:
        with self._lock:
            return len(self._retired)

    def shutdown(self, wait_s: float = 2.0) -> None:
        """Stop taking calls; idle threads leave (waited for up to `wait_s` in all, so nothing they hold
        outlives the pool), running calls finish in their daemon threads."""
        if self._closed:
            return
        self._closed = True
        while True:  # drop calls nobody started
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in range(self.size):
            self._queue.put(None)
        deadline = time.monotonic() + wait_s
        with self._lock:
            busy = set(self._running.values())
        for t in self._threads:
            if t is not threading.current_thread() and t not in busy:
                t.join(max(0.0, deadline - time.monotonic()))
