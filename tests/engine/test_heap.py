"""engine/heap.py: freed blocks between live ones go back to the system."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import pytest

from bench._harness import rss_mb
from engine.heap import _malloc_trim, give_back

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")


def test_the_heap_freed_below_a_live_block_is_given_back():
    assert _malloc_trim() is not None  # glibc, as on every machine the bot runs on here
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(4096) for _ in range(20_000)]  # ~80 MB of heap (below the mmap threshold)
    for b in blocks:
        ctypes.memset(b, 1, 4096)  # touched: resident
    pin = libc.malloc(64)  # a live block above them: the heap's top cannot shrink past it
    for b in blocks:
        libc.free(b)
    before = rss_mb()
    give_back()
    after = rss_mb()
    libc.free(pin)
    assert before - after > 40, (before, after)
