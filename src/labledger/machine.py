"""What the machine lends a labledger process: the cores it may run on, its C library, and how its
memory is managed (the C allocator's heap, Python's cyclic garbage collector)."""

from __future__ import annotations

import functools
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def cores() -> int:
    """The cores this process may run on: its CPU affinity where the system keeps one (a container
    or ``taskset`` may allow fewer than the machine has), else the machine's count; at least 1.
    The one rule of every choice between one thread and several.

    >>> cores() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


@functools.cache
def libc() -> Any:
    """glibc (a ``ctypes.CDLL``), whose allocator a process tunes (``mallopt``) and asks to hand
    freed pages back (``malloc_trim``, and ``madvise`` for a range of an array's own pages); None
    under another C library or system, whose defaults stay. The one place either is loaded."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        lib = ctypes.CDLL("libc.so.6")
        lib.mallopt.argtypes, lib.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        lib.malloc_trim.argtypes, lib.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        lib.madvise.argtypes, lib.madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    except (OSError, AttributeError):  # musl and other C libraries
        return None
    return lib


def trim_heap() -> None:
    """Hand the C allocator's freed heap pages back to the system (glibc's ``malloc_trim``): what a
    process frees below ``M_MMAP_THRESHOLD`` otherwise stays resident for its next arrays. A few
    milliseconds; nothing under another C library."""
    lib = libc()
    if lib is not None:
        lib.malloc_trim(0)


#: ``MADV_DONTNEED`` (Linux): the pages' contents are dropped, and read as zeros when next touched.
_MADV_DONTNEED = 4


def drop_pages(address: int, size: int) -> None:
    """Hand back the whole pages inside the ``size`` bytes at ``address`` (memory this process owns
    and will not read again before writing it): they stop being resident, and read as zeros if they
    are touched again. Nothing without glibc (the pages then stay)."""
    lib = libc()
    lo, hi = whole_pages(address, size)
    if lib is not None and hi > lo:
        lib.madvise(lo, hi - lo, _MADV_DONTNEED)


def whole_pages(start: int, size: int) -> tuple[int, int]:
    """The whole pages inside the ``size`` bytes from ``start`` (an address, or an offset into a
    page-aligned mapping), as ``(lo, hi)`` with ``lo % PAGESIZE == hi % PAGESIZE == 0``; ``hi <= lo``
    when no whole page lies inside. The pages a range may hand back without touching its neighbours'.

    >>> import mmap; p = mmap.PAGESIZE
    >>> whole_pages(1, 3 * p) == (p, 3 * p), whole_pages(0, p - 1)[1] <= whole_pages(0, p - 1)[0]
    (True, True)
    """
    import mmap

    page = mmap.PAGESIZE
    return -(-start // page) * page, (start + size) // page * page


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a process builds many acyclic objects at once (an
    import's columns, the dicts of every run a query matched): each collection would walk them all
    again, and can free none of them; restored after.

    >>> with paused_gc():
    ...     gc.isenabled()
    False
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
