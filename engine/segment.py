"""Text cleaning and splitting for streaming: whole sentences (a backend that plans a run's prosody), or short first
segments growing (Piper)."""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

# Sentence ends: Latin terminators need a following space (or the end); CJK ones do not.
_SENTENCE_END = re.compile(r"(?:[.!?…]+[\"'”’)\]]*(?=\s|$)|[。！？]+[」』”’）)]*|\n)")
# Clause ends: , ; : and dashes need a following space; CJK clause marks do not.
_CLAUSE_END = re.compile(r"(?:[,;:]+(?=\s)|\s[—–-]+(?=\s)|—|[、，；：])")
# a period that ends a title, a common abbreviation or a single letter ("Mr.", "etc.", "J.") ends no sentence
_ABBREVIATION = re.compile(r"(?:^|(?<=[\s(\"']))"
                           r"(?:[A-Za-z]|Mr|Mrs|Ms|Dr|Prof|St|Sr|Jr|Mt|vs|etc|e\.g|i\.e|No|approx)\.$")
_SPACES = re.compile(r"[^\S\n]+")
_NEWLINES = re.compile(r"\s*\n\s*")

MAX_COMBINING_RUN = 2  # combining marks kept after one base character (zalgo defence)
_SELECTORS = "\ufe0e\ufe0f\u20e3"  # text/emoji presentation selectors, keycap
_LINE_BREAKS = str.maketrans("\r\v\f", "\n\n\n")
# Segment i may be at most first_chars * GROWTH**i long (capped by max_chars). Gentle growth keeps each
# segment's synthesis short next to the audio before it: with many guilds at once each one's share of
# the engine is small, and a segment three times the one playing arrived late (bench/e2e.py scale).
GROWTH = 1.5
# Limits are in Latin characters' worth of speech: a CJK character (kana, kanji, hanzi, hangul, their punctuation)
# takes as long to say as WIDE Latin ones (Kokoro: Japanese 6.4 characters a second, Mandarin 5.4, English about
# 14-15), so a Japanese first segment is one short sentence, not two, and is heard as soon as an English one.
WIDE = 2.5
_WIDE_CHARS = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def scrub(text: str, *, form: Literal["NFC", "NFKC"] = "NFC", keep: str = "\n\t") -> str:
    """Unicode hygiene, the one definition (the engine's own cleaning, and the bot's before it reads markup).

    `form` normalization (NFKC also makes fullwidth and styled letters like "𝐡𝐞𝐥𝐥𝐨" plain ones a voice can read);
    line and paragraph separators become newlines; control, format, private-use, surrogate and unassigned code
    points are dropped, but those in `keep`; combining marks past MAX_COMBINING_RUN on one character, marks with
    no letter to sit on (at the start, after whitespace), presentation selectors and keycaps (the base character
    says it all) are dropped."""
    kept: list[str] = []
    marks = MAX_COMBINING_RUN  # at the start, a mark has nothing to sit on
    for ch in unicodedata.normalize(form, text):
        category = unicodedata.category(ch)
        if category[0] == "M":
            marks += 1
            if marks > MAX_COMBINING_RUN or ch in _SELECTORS:
                continue
        elif category[0] == "C" and ch not in keep:
            continue
        else:
            marks = MAX_COMBINING_RUN if ch.isspace() else 0
            ch = "\n" if category in ("Zl", "Zp") else ch
        kept.append(ch)
    return "".join(kept)


def clean_text(text: str) -> str:
    """Text as the engine speaks it: CR, VT and FF as newlines, scrubbed (NFC), runs of spaces and of blank lines
    collapsed, stripped."""
    cleaned = _SPACES.sub(" ", scrub(text.translate(_LINE_BREAKS)))
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


def _in_chars(text: str, limit: int) -> int:
    """How many characters of `text` make `limit` Latin characters' worth of speech (its wide ones count WIDE)."""
    window = text[:limit]
    wide = len(_WIDE_CHARS.findall(window))
    return max(1, int(limit * len(window) / (len(window) + (WIDE - 1) * wide))) if wide else limit


def split_segments(text: str, first_chars: int = 60, max_chars: int = 240) -> list[str]:
    """Split cleaned `text` into segments to synthesize one after another.

    The first segment is at most `first_chars` long (a clause or a few words; CJK characters count WIDE) so
    the first sound comes fast; each later one may grow by GROWTH times (so it is synthesized while the previous
    one plays) up to `max_chars`. Cuts prefer sentence ends, then clause ends, then spaces; a single
    token longer than the limit is cut hard. Newlines count as sentence ends and become spaces.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    first_chars = max(1, min(first_chars, max_chars))
    segments: list[str] = []
    rest = text.strip()
    limit = first_chars
    while rest:
        chars = _in_chars(rest, limit)
        if len(rest) <= chars:
            head, rest = rest, ""
        else:
            pos = _cut_position(rest, chars)
            head, rest = rest[:pos], rest[pos:].lstrip()
        head = head.replace("\n", " ").strip()
        if head:
            segments.append(head)
        limit = min(max_chars, int(limit * GROWTH))
    return segments


def split_sentences(text: str, max_chars: int) -> list[str]:
    """Split cleaned `text` at sentence ends only (newlines count as such and become spaces). A sentence longer than
    `max_chars` (CJK characters count WIDE) is cut at its last clause mark within the bound, at a space only when one
    clause alone is over it, and hard only inside one token over it."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    sentences: list[str] = []
    rest = text.strip()
    while rest:
        end = next((m.end() for m in _SENTENCE_END.finditer(rest) if m.end() > 0 and _ends_sentence(rest, m)),
                   len(rest))
        head, rest = rest[:end], rest[end:].lstrip()
        while head.strip():
            chars = _in_chars(head, max_chars)
            if len(head) <= chars:
                piece, head = head, ""
            else:
                pos = _clause_cut(head, chars)
                piece, head = head[:pos], head[pos:].lstrip()
            piece = piece.replace("\n", " ").strip()
            if piece:
                sentences.append(piece)
    return sentences


def _ends_sentence(text: str, m: re.Match[str]) -> bool:
    """Whether a sentence-end match really ends one: not a period after a title or an initial ("Mr.", "J."), nor one
    the text goes on from in lower case or with a digit ("e.g. this", "no. 5")."""
    if m.group().startswith(".") and _ABBREVIATION.search(text, 0, m.start() + 1):
        return False
    after = text[m.end():m.end() + 2].lstrip()
    return not (after[:1].islower() or after[:1].isdigit()) or m.group() == "\n"


def _clause_cut(text: str, limit: int) -> int:
    """Where to cut `text` (longer than `limit`): after its last clause mark within the limit, else at its last space,
    else hard (never between a base character and its combining marks)."""
    window = text[: limit + 1]
    pos = _last_boundary(_CLAUSE_END, window, 1)
    if 0 < pos <= limit:
        return pos
    space = window.rfind(" ", 1, limit + 1)
    if space > 0:
        return space
    pos = limit
    while pos > 1 and unicodedata.category(text[pos])[0] == "M":
        pos -= 1
    return pos
