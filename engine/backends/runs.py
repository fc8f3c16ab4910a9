"""A long phoneme sequence cut into runs a model reads at once: at a clause mark where one is, else at a word's end."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def word_runs(phonemes: Sequence[T], limit: int, breaks: frozenset = frozenset(" ")) -> Iterator[Sequence[T]]:
    """`phonemes` in runs of at most `limit`, cut after a word's space (any of `breaks`) where one is near (else
    anywhere)."""
    start = 0
    while len(phonemes) - start > limit:
        end = start + limit
        space = max((i for i in range(start + limit // 2, end) if phonemes[i] in breaks), default=end - 1)
        yield phonemes[start:space + 1]
        start = space + 1
    if start < len(phonemes):
        yield phonemes[start:]


def clause_runs(phonemes: Sequence[T], limit: int, clauses: frozenset, spaces: frozenset) -> Iterator[Sequence[T]]:
    """`phonemes` in runs of at most `limit`, each cut after its last clause mark (any of `clauses`), after its last
    space only when one clause alone is over `limit`, and anywhere only inside one word over it."""
    start = 0
    while len(phonemes) - start > limit:
        end = start + limit
        cut = max((i for i in range(start, end) if phonemes[i] in clauses), default=-1)
        if cut < 0:
            cut = max((i for i in range(start, end) if phonemes[i] in spaces), default=end - 1)
        yield phonemes[start:cut + 1]
        start = cut + 1
    if start < len(phonemes):
        yield phonemes[start:]
