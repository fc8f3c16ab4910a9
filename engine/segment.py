"""Text cleaning and splitting into sentence/clause segments for streaming; the first segment is short."""

from __future__ import annotations

import re
import unicodedata

# Sentence ends: Latin terminators need a following space (or the end); CJK ones do not.
_SENTENCE_END = re.compile(r"(?:[.!?…]+[\"'”’)\]]*(?=\s|$)|[。！？]+[」』”’）)]*|\n)")
# Clause ends: , ; : and dashes need a following space; CJK clause marks do not.
_CLAUSE_END = re.compile(r"(?:[,;:]+(?=\s)|\s[—–-]+(?=\s)|—|[、，；：])")
_SPACES = re.compile(r"[^\S\n]+")
_NEWLINES = re.compile(r"\s*\n\s*")

MAX_COMBINING_RUN = 2  # combining marks kept after one base character (zalgo defence)
# Segment i may be at most first_chars * GROWTH**i long (capped by max_chars). Gentle growth keeps each
# segment's synthesis short next to the audio before it: with many guilds at once each one's share of
# the engine is small, and a segment three times the one playing arrived late (bench/e2e.py scale).
GROWTH = 1.5


def clean_text(text: str) -> str:
    """Strip control/format/unassigned code points, cap combining-mark runs, collapse whitespace."""
    text = unicodedata.normalize("NFC", text)
    out: list[str] = []
    run = 0
    for ch in text:
        if ch in "\n\r\t\v\f":
            out.append("\n" if ch in "\n\r\v\f" else " ")
            run = 0
            continue
        cat = unicodedata.category(ch)
        if cat[0] == "C":  # Cc, Cf, Cs, Co, Cn
            continue
        if cat[0] == "M":
            run += 1
            if run > MAX_COMBINING_RUN or not out:
                continue
        else:
            run = 0
        out.append(ch)
    cleaned = _SPACES.sub(" ", "".join(out))
    cleaned = _NEWLINES.sub("\n", cleaned)
    return cleaned.strip()


def _last_boundary(pattern: re.Pattern[str], window: str, min_pos: int) -> int:
    """End position of the last match of `pattern` in `window` at or after `min_pos`, else -1."""
    best = -1
    for m in pattern.finditer(window):
        if m.end() >= min_pos and m.end() > 0:
            best = m.end()
    return best


def _cut_position(text: str, limit: int) -> int:
    """Where to cut `text` (longer than `limit`) so that the head is at most `limit` characters."""
    window = text[: limit + 1]  # a boundary right after the limit still lets the head fit
    for pattern, min_frac in ((_SENTENCE_END, 0.3), (_CLAUSE_END, 0.3)):
        pos = _last_boundary(pattern, window, int(limit * min_frac))
        if 0 < pos <= limit:
            return pos
    space = window.rfind(" ", 0, limit + 1)
    if space >= limit // 2:
        return space
    for pattern in (_SENTENCE_END, _CLAUSE_END):
        pos = _last_boundary(pattern, window, 1)
        if 0 < pos <= limit:
            return pos
    if space > 0:
        return space
    # One long token: hard cut, but never between a base character and its combining marks.
    pos = limit
    while pos > 1 and unicodedata.category(text[pos])[0] == "M":
        pos -= 1
    return pos


def split_segments(text: str, first_chars: int = 60, max_chars: int = 240) -> list[str]:
    """Split cleaned `text` into segments to synthesize one after another.

    The first segment is at most `first_chars` long (a clause or a few words) so the first sound
    comes fast; each later one may grow by GROWTH times (so it is synthesized while the previous one
    plays) up to `max_chars`. Cuts prefer sentence ends, then clause ends, then spaces; a single
    token longer than the limit is cut hard. Newlines count as sentence ends and become spaces.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    first_chars = max(1, min(first_chars, max_chars))
    segments: list[str] = []
    rest = text.strip()
    limit = first_chars
    while rest:
        if len(rest) <= limit:
            head, rest = rest, ""
        else:
            pos = _cut_position(rest, limit)
            head, rest = rest[:pos], rest[pos:].lstrip()
        head = head.replace("\n", " ").strip()
        if head:
            segments.append(head)
        limit = min(max_chars, int(limit * GROWTH))
    return segments
