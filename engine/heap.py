"""Gives the C heap's free pages back to the system (glibc's malloc_trim) after a large transient allocation."""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim by hand
        return None


def give_back() -> None:
    """Return the heap's free pages to the system. Loading a model parses its file and copies its weights: glibc
    keeps the freed parse buffers inside the heap, between live blocks, where the ordinary trim at the heap's top
    never reaches them (Kokoro's two sessions: ~85 MB of VmRSS)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
