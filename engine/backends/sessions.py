"""A bounded pool of reusable inference sessions: one lent per running generator, at most `size` kept."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine.heap import give_back

if TYPE_CHECKING:
    from engine.base import CancelToken

T = TypeVar("T")


class SessionPool(Generic[T]):
    """Sessions are created on demand up to `size` and reused; a generator holds one for its segment.

    When all `size` are lent (a skipped call still finishing in a retired thread), a caller waits up to
    `wait_s` for one to come back, then creates an extra one; extras are freed when returned, so at rest
    the pool never holds more than `size` sessions, however many threads were retired.
    """

    def __init__(self, create: Callable[[], T], size: int, wait_s: float = 5.0) -> None:
        self._create = create
        self.size = max(1, size)
        self.wait_s = wait_s
        self._cond = threading.Condition()
        self._free: list[T] = []
        self._alive = 0  # free + lent
        self._closed = False

    @property
    def alive(self) -> int:
        """Sessions in existence (free or lent)."""
        with self._cond:
            return self._alive

    @contextmanager
    def lease(self) -> Iterator[T]:
        session = self._acquire()
        try:
            yield session
        finally:
            self._release(session)

    def _acquire(self) -> T:
        deadline = time.monotonic() + self.wait_s
        with self._cond:
            while not self._free and self._alive >= self.size:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if self._free:
                return self._free.pop()
            self._alive += 1  # reserved before the slow creation, outside the lock
        try:
            return self._create()
        except BaseException:
            with self._cond:
                self._alive -= 1
                self._cond.notify()
            raise

    def _release(self, session: T) -> None:
        with self._cond:
            if self._closed or self._alive > self.size:
                self._alive -= 1  # an extra (or the pool is closed): dropped, its memory freed
            else:
                self._free.append(session)
            self._cond.notify()

    def close(self) -> None:
        """Free the idle sessions; lent ones are freed when returned."""
        with self._cond:
            self._closed = True
            self._alive -= len(self._free)
            self._free.clear()
            self._cond.notify_all()


def run_cancellable(session: Any, feeds: dict[str, Any], cancel: CancelToken | None) -> list[Any]:
    """`session.run(None, feeds)` of an onnxruntime session that `cancel` stops mid-run (RunOptions.terminate);
    a cancelled run raises EngineError."""
    import onnxruntime

    from engine.base import EngineError

    run_options = onnxruntime.RunOptions()
    remove = lambda: None  # noqa: E731
    if cancel is not None:

        def _terminate() -> None:
            run_options.terminate = True

        remove = cancel.on_cancel(_terminate)
    try:
        return session.run(None, feeds, run_options)
    except Exception as exc:
        if cancel is not None and cancel.cancelled:
            raise EngineError("Synthesis was cancelled.") from exc
        raise
    finally:
        remove()


_shared_arena = threading.Lock()
_arena_made = False


def _use_shared_arena(onnxruntime: Any, opts: Any) -> None:
    """Let the session allocate from one arena of the process (made on first use) instead of its own: sessions
    that run in turn (Kokoro's features, then its vocoder) reuse the same memory rather than each keeping the
    largest it ever held (Kokoro's engine after warm-up: ~40 MB less)."""
    global _arena_made
    with _shared_arena:
        if not _arena_made:
            onnxruntime.create_and_register_allocator(
                onnxruntime.OrtMemoryInfo("Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                          onnxruntime.OrtMemType.DEFAULT),
                onnxruntime.OrtArenaCfg(0, 0, -1, -1))  # no cap, power-of-two growth, default chunks
            _arena_made = True
    opts.add_session_config_entry("session.use_env_allocators", "1")


def new_session(model: bytes | str, intra_op_threads: int, *, shared_arena: bool = False,
                options: tuple[tuple[str, str], ...] = ()) -> Any:
    """An onnxruntime CPU session of `model` (bytes or a path) running `intra_op_threads` threads, sequential;
    with `shared_arena`, allocating from the process's one arena; `options` are further session config entries
    (key, value), set last (engine/backends/kokoro/tuning.py)."""
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    if shared_arena:
        _use_shared_arena(onnxruntime, opts)
    opts.intra_op_num_threads = intra_op_threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    # Without memory patterns each tensor is allocated from the arena on its own, instead of one block per
    # input shape: the arena then settles at one size (~530 MB a Piper session under sentences of up to 240
    # characters) instead of growing by whatever block a new audio length needs (605 to 765 MB in
    # four runs of the same traffic), at no measured cost in speed.
    opts.enable_mem_pattern = False
    # Idle intra-op threads sleep instead of spinning: the engine shares its cores with its other workers and the
    # bot, and a spinning pool takes CPU they need. Kokoro's first chunk with two threads, alternating, on a busy
    # machine here: p50 1436 ms spinning, 1234 ms not (20 rounds each).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    for key, value in options:
        opts.add_session_config_entry(key, value)
    session = onnxruntime.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
    give_back()  # the model's parse buffers, freed
    return session
