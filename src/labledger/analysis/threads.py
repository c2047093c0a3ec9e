"""Where labledger runs work in threads: the one place (the metrics are pure functions of arrays,
:mod:`labledger.metrics`), and numpy's BLAS threads while it does.

- :func:`in_threads`: works in a pool, each free thread given the costliest ready one (a task's
  metrics, after the column sorts they read: :func:`labledger.analysis.evaluation.evaluate`);
- :func:`chunk_map`: the chunks of a bootstrap's resamples in threads (the ``run`` of
  :func:`labledger.metrics.resample.resample_values`; each chunk has its own generator, so the
  draws are the same as one after another);
- :func:`one_blas_thread`: OpenBLAS runs each product on up to every core; where labledger already
  runs two jobs side by side (``calibrate report``, ``compare``) that is 4 threads on 2 cores, whose
  idle ones spin (``sched_yield``) while the others work. OpenBLAS's thread-local thread count
  (``openblas_set_num_threads_local``, 0.3.27+) puts this thread's products on one thread. It also
  makes them the same on every machine: a threaded dot product of long vectors (and the Cholesky
  built on them) splits its sum among the threads, so its last bits followed the core count. A
  pool started inside with :func:`pool_initializer` gives its workers the same.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any

from labledger.machine import cores

#: The most threads labledger runs a task's metrics or a bootstrap's chunks in (numpy releases the
#: GIL in the heavy loops).
THREADS = max(1, min(8, cores()))


def in_threads(
    works: Sequence[Callable[[], Any]], costs: Sequence[float], after: Sequence[Sequence[int]], threads: int
) -> list[Future[Any]]:
    """Each of ``works`` run in a pool of ``threads`` threads, each free thread given the ready work
    (those in its ``after``, the works it reads, done) with the costliest chain (its cost, with
    that of the costliest work after it): a work waits in the queue, never in a thread. Each
    work's future, in the works' order.

    >>> [f.result() for f in in_threads([lambda: 1, lambda: 2, lambda: 3], [1, 5, 1], [(), (), (1,)], 2)]
    [1, 2, 3]
    """
    chain = [
        c + max((costs[k] for k, before in enumerate(after) if i in before), default=0) for i, c in enumerate(costs)
    ]
    left = sorted(range(len(works)), key=lambda i: -chain[i])
    started: dict[int, Future[Any]] = {}
    with ThreadPoolExecutor(threads, initializer=pool_initializer()) as pool:
        while left:
            running = [f for f in started.values() if not f.done()]
            ready = [i for i in left if all(j in started and started[j].done() for j in after[i])]
            for i in ready[: threads - len(running)]:
                left.remove(i)
                started[i] = pool.submit(works[i])
                running.append(started[i])
            if left:  # (a work done since `running` was taken: at once)
                wait(running, return_when=FIRST_COMPLETED)
    return [started[i] for i in range(len(works))]


def chunk_map(work: Callable[..., Any], *args: Sequence[Any]) -> Iterable[Any]:
    """``map(work, *args)`` in up to :data:`THREADS` threads where there are several items (a
    bootstrap's chunks of resamples), in order; one item: here.

    >>> list(chunk_map(pow, [2, 3], [2, 2]))
    [4, 9]
    """
    if len(args[0]) < 2 or THREADS < 2:
        return list(map(work, *args))
    with ThreadPoolExecutor(min(THREADS, len(args[0])), initializer=pool_initializer()) as pool:
        return list(pool.map(work, *args))


_BY_PATH: dict[str, Callable[[int], int] | None] = {}
_STATE = threading.local()


def _local_threads() -> list[Callable[[int], int]]:
    """``openblas_set_num_threads_local`` of each OpenBLAS loaded (numpy's, and scipy's copy when
    scipy is imported): none where there is none (not Linux, another BLAS, OpenBLAS < 0.3.27)."""
    if not sys.platform.startswith("linux"):
        return []
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return []
    for path in sorted(paths - set(_BY_PATH)):
        found: Callable[[int], int] | None = None
        try:
            fn = ctypes.CDLL(path).openblas_set_num_threads_local
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            found = fn
        except (OSError, AttributeError):
            pass
        _BY_PATH[path] = found
    return [f for path in sorted(paths) if (f := _BY_PATH[path]) is not None]


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's matrix products on one BLAS thread in the calling thread while inside (other threads
    keep theirs; pools started inside with :func:`pool_initializer` give their workers the same);
    nothing where numpy's BLAS is not an OpenBLAS with thread-local counts.

    >>> import numpy as np
    >>> with one_blas_thread():
    ...     float((np.ones((3, 3)) @ np.ones(3)).sum())
    9.0
    """
    fns = _local_threads()
    if not fns or getattr(_STATE, "one", False):
        yield
        return
    before = [fn(1) for fn in fns]
    _STATE.one = True
    try:
        yield
    finally:
        for fn, value in zip(fns, before):
            fn(value)
        _STATE.one = False


def pool_initializer() -> Callable[[], None] | None:
    """The ``initializer`` of a :class:`~concurrent.futures.ThreadPoolExecutor` started in this
    thread: inside :func:`one_blas_thread`, one that puts each worker on one BLAS thread too (the
    setting ends with the worker); else None (the workers keep OpenBLAS's own count)."""
    return _one_thread_worker if getattr(_STATE, "one", False) else None


def _one_thread_worker() -> None:
    for fn in _local_threads():
        fn(1)
    _STATE.one = True


__all__ = ["THREADS", "chunk_map", "in_threads", "one_blas_thread", "pool_initializer"]
