"""Which language a message is in: py3langid (its model ships inside the package), on a bounded sample of the
text, keeping the fallback language when the text is too short or the detector unsure."""

from __future__ import annotations

import threading
import unicodedata
from dataclasses import dataclass
from typing import Any

from engine.languages import base

SAMPLE_CHARS = 2000  # at most this much of a message is looked at...
SAMPLE_BYTES = 4000  # ...and at most this many UTF-8 bytes of it: detection time is bounded on any text
MIN_WEIGHT = 12  # fewer letters (an ideograph, kana or hangul counts 3): too short to tell
MIN_CONFIDENCE = 0.50  # below this probability the detector is unsure: the fallback is kept
UNDETERMINED = {"zxx", "und"}  # "no linguistic content"

_lock = threading.Lock()
_identifier: Any = None


def load() -> Any:
    """The identifier, read once per process (about a second: call it at start, off the event loop)."""
    global _identifier
    with _lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier


@dataclass(frozen=True)
class Detection:
    """The language chosen for a text, and whether the detector chose it (else it is the fallback)."""

    language: str
    detected: bool
    confidence: float = 0.0
    guess: str = ""  # what the detector said, even when it was not taken


def _weight(sample: str) -> int:
    """Letters, counting an ideograph, kana or hangul syllable as 3 (one carries a word's worth)."""
    total = 0
    for ch in sample:
        if ch.isalpha():
            wide = unicodedata.east_asian_width(ch) in ("W", "F")
            total += 3 if wide else 1
    return total


def sample_of(text: str) -> str:
    """The part of `text` that is looked at: its first SAMPLE_CHARS characters within SAMPLE_BYTES bytes."""
    raw = text[:SAMPLE_CHARS].encode("utf-8", "ignore")  # lone surrogates dropped
    return raw[:SAMPLE_BYTES].decode("utf-8", "ignore")  # a character cut at the end dropped


def detect(text: str, fallback: str) -> Detection:
    """The language of `text`; `fallback` when it is too short, unclear, or of no language."""
    sample = sample_of(text if isinstance(text, str) else str(text))
    if _weight(sample) < MIN_WEIGHT:
        return Detection(fallback, False)
    guess, confidence = load().classify(sample)
    code = base(guess)
    if not code or guess in UNDETERMINED or confidence < MIN_CONFIDENCE:
        return Detection(fallback, False, confidence, guess)
    return Detection(code, True, confidence, guess)
