"""Virtual time shared by many threads, for runs of thousands of nodes in seconds of wall time.

The fake's plain virtual clock adds up every sleep, which is right for one thread and wrong for a
hundred: a gate's workers each waiting 20 s for their own Run Command would move it 2,000 s. Here
time is one line for all threads. A sleep waits for its wake-up time, and the clock jumps to the
earliest wake-up only once every unit of work of the run waits: sleeps, or waits on another thread's
result. Nothing waits in real time, and simulated time is what the run would take in Azure.

A unit of work is the thread that created the timeline (the driver), each task handed to a thread
pool (from its submit to its end, so one submitted but not yet started counts) and each SDK poller
thread (from the poller's creation). Waits on a Future, on an LROPoller and on azgpu's `completed`
(deploy/session.take) do not count while they wait; the unit that ends hands its count to the ones
waiting for it, so the clock cannot slip between one thread finishing and the next going on.
FakeAzure(timeline=True) installs the hooks (install()) while it runs.

A thread the timeline does not know (started by hand, not through a pool or a poller) may sleep; while
it runs after that, the clock waits for it. A run that stops making progress for `stall_after` real
seconds while something sleeps (a wait the timeline cannot see) moves on regardless; `stalls` counts
those, so a benchmark can say its time is exact.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any
from unittest import mock


class Timeline:
    def __init__(self, start: float, *, stall_after: float = 3.0):
        self._now = start
        self._lock = threading.Lock()
        self._busy = 1  # the driver
        self._sleepers: list = []  # heap of (wake, seq, gate, units)
        self._seq = itertools.count()
        self._local = threading.local()
        self._local.units = 1
        self._waiters: dict[int, list[list]] = {}  # id(awaited) -> waiters [units, woken]
        self._queue_waiters: list[tuple[Any, list]] = []
        self._finished: weakref.WeakSet = weakref.WeakSet()  # units that ended (futures, pollers)
        self._activity = 0
        self.stalls = 0
        self.stall_after = stall_after
        self._patches: list = []
        self._watchdog: threading.Thread | None = None
        self._stopped = threading.Event()

    # -- the clock ---------------------------------------------------------------------------
    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        units = getattr(self._local, "units", 0)
        gate = threading.Lock()
        gate.acquire()
        with self._lock:
            self._activity += 1
            heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), gate, units))
            self._busy -= units
            self._advance()
        gate.acquire()  # released by whoever moves the clock to this wake-up
        if not units:
            self._local.units = 1  # counted from its wake-up (see _advance)

    def _advance(self) -> None:
        """Under the lock: while nothing runs, jump to the earliest wake-up and wake who is due."""
        while self._busy <= 0 and self._sleepers:
            self._now = max(self._now, self._sleepers[0][0])
            while self._sleepers and self._sleepers[0][0] <= self._now:
                _, _, gate, units = heapq.heappop(self._sleepers)
                # A thread the timeline does not know runs as one unit until it sleeps again.
                self._busy += units or 1
                gate.release()

    # -- units of work -----------------------------------------------------------------------
    def _begin(self) -> None:
        with self._lock:
            self._activity += 1
            self._busy += 1

    def _end(self, awaited: Any = None) -> None:
        """A unit ends: who waited for it goes on (counted before this one stops counting)."""
        with self._lock:
            self._activity += 1
            if awaited is not None:
                self._release(awaited)
            self._wake_queues()
            self._busy -= 1
            self._advance()

    def _release(self, awaited: Any) -> None:
        """(Under the lock.) `awaited` finished: each thread waiting for it counts again."""
        self._finished.add(awaited)
        for waiter in self._waiters.pop(id(awaited), ()):
            if not waiter[1]:
                waiter[1] = True
                self._busy += waiter[0]

    def _enqueue(self, slots: list[int], workers: int) -> None:
        """A task handed to a pool counts from its submit when a worker is free for it; otherwise it
        waits in the queue, uncounted, until a task of the pool ends and hands it that unit."""
        with self._lock:
            self._activity += 1
            if slots[0] < workers:
                slots[0] += 1
                self._busy += 1
            else:
                slots[1] += 1

    def _dequeue(self, slots: list[int], future: Any) -> None:
        """A pool's task ended (or was cancelled): its unit goes to the next queued task, if any."""
        with self._lock:
            self._activity += 1
            if future is not None:
                self._release(future)
            self._wake_queues()
            if slots[1] > 0:
                slots[1] -= 1
                return
            slots[0] -= 1
            self._busy -= 1
            self._advance()

    def _wake_queues(self) -> None:
        for q, waiter in self._queue_waiters:
            if not waiter[1] and not q.empty():
                waiter[1] = True
                self._busy += waiter[0]

    @contextmanager
    def waiting_on(self, done):
        """The calling thread waits for a queue that ending units fill (azgpu's `completed`)."""
        units = getattr(self._local, "units", 0)
        waiter = [units, False]
        entry = (done, waiter)
        with self._lock:
            if not units or not done.empty():
                waiter[1] = True
            else:
                self._queue_waiters.append(entry)
                self._busy -= units
                self._advance()
        try:
            yield
        finally:
            with self._lock:
                if entry in self._queue_waiters:
                    self._queue_waiters.remove(entry)
                if not waiter[1]:
                    waiter[1] = True
                    self._busy += units

    @contextmanager
    def waiting(self, awaited: Iterable[Any], done: Callable[[Any], bool]):
        """The calling thread waits for any of `awaited` (futures, pollers): it does not count meanwhile."""
        units = getattr(self._local, "units", 0)
        items = list(awaited)
        waiter = [units, False]
        with self._lock:
            if not units or any(done(a) or a in self._finished for a in items):
                waiter[1] = True
            else:
                for a in items:
                    self._waiters.setdefault(id(a), []).append(waiter)
                self._busy -= units
                self._advance()
        try:
            yield
        finally:
            with self._lock:
                for a in items:
                    listed = self._waiters.get(id(a))
                    if listed and waiter in listed:
                        listed.remove(waiter)
                        if not listed:
                            del self._waiters[id(a)]
                if not waiter[1]:
                    waiter[1] = True
                    self._busy += units

    @contextmanager
    def _as_unit(self):
        previous = getattr(self._local, "units", 0)
        self._local.units = 1
        try:
            yield
        finally:
            self._local.units = previous

    # -- hooks into concurrent.futures, azure-core's poller and azgpu's waits -----------------
    def install(self) -> None:
        from azure.core.polling import LROPoller

        timeline = self
        submit = concurrent.futures.ThreadPoolExecutor.submit
        result, invoke = concurrent.futures.Future.result, concurrent.futures.Future._invoke_callbacks
        init, start, wait = LROPoller.__init__, LROPoller._start, LROPoller.wait

        def counted_submit(pool, fn, /, *args, **kwargs):
            def run(*a, **kw):
                with timeline._as_unit():
                    return fn(*a, **kw)

            slots = pool.__dict__.setdefault("_azgpu_timeline", [0, 0])  # [counted, queued]
            timeline._enqueue(slots, pool._max_workers)
            try:
                future = submit(pool, run, *args, **kwargs)
            except BaseException:
                timeline._dequeue(slots, None)
                raise
            task = future._azgpu_timeline = [slots, False]  # its unit ends after its done callbacks ran
            if future.done():  # it ran and ended before it was marked: its callbacks may not have seen it
                end_task(future, task)
            return future

        def end_task(future, task):
            with timeline._lock:
                if task[1]:
                    return
                task[1] = True
            timeline._dequeue(task[0], future)

        def callbacks_then_end(future):
            # A task's unit ends once the callbacks its end runs are done (azgpu's `completed` queues the
            # future in one): whoever they woke counts before it stops counting.
            invoke(future)
            task = future.__dict__.get("_azgpu_timeline")
            if task is not None:
                end_task(future, task)

        def counted_result(future, timeout=None):
            with timeline.waiting([future], lambda f: f.done()):
                return result(future, timeout)

        def counted_init(poller, *args, **kwargs):
            timeline._begin()
            try:
                init(poller, *args, **kwargs)
            except BaseException:
                timeline._end()
                raise
            if poller._thread is None:  # finished at once: no thread polls
                timeline._end(poller)

        def counted_start(poller):
            try:
                with timeline._as_unit():
                    start(poller)
            finally:
                timeline._end(poller)

        def counted_wait(poller, timeout=None):
            with timeline.waiting([poller], lambda p: p._thread is None or not p._thread.is_alive()):
                return wait(poller, timeout)

        def counted_take(done, tick):
            with timeline.waiting_on(done):
                while True:
                    try:
                        return done.get(timeout=tick)
                    except queue.Empty:
                        continue

        self._patches = [
            mock.patch.object(concurrent.futures.ThreadPoolExecutor, "submit", counted_submit),
            mock.patch.object(concurrent.futures.Future, "result", counted_result),
            mock.patch.object(concurrent.futures.Future, "_invoke_callbacks", callbacks_then_end),
            mock.patch.object(LROPoller, "__init__", counted_init),
            mock.patch.object(LROPoller, "_start", counted_start),
            mock.patch.object(LROPoller, "wait", counted_wait),
            # azgpu's own wait on its workers (deploy/session.completed) looks `take` up in its module.
            mock.patch("azgpu.deploy.session.take", counted_take),
        ]
        for patch in self._patches:
            patch.start()
        self._stopped.clear()
        self._watchdog = threading.Thread(target=self._watch, name="azgpu-timeline-watchdog", daemon=True)
        self._watchdog.start()

    def uninstall(self) -> None:
        self._stopped.set()
        for patch in reversed(self._patches):
            patch.stop()
        self._patches = []

    def _watch(self) -> None:
        """Move on when the run makes no progress while something sleeps (a wait the timeline cannot see)."""
        last, since = -1, time.monotonic()
        while not self._stopped.wait(0.5):
            with self._lock:
                if self._activity != last or not self._sleepers:
                    last, since = self._activity, time.monotonic()
                    continue
                if time.monotonic() - since < self.stall_after:
                    continue
                self.stalls += 1
                busy, self._busy = self._busy, 0
                self._advance()
                self._busy += busy
                last, since = self._activity, time.monotonic()

    def touch(self) -> None:
        """Work the timeline cannot see (the fake answering a request) counts as progress."""
        self._activity += 1
