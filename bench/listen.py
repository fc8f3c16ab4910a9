"""What a listener checks, for benches and tests: the words heard (PocketSphinx en-US) and a language's pace
(Japanese morae, Mandarin syllables per second of speech)."""

from __future__ import annotations

import re

import numpy as np
import soxr

RATE = 16_000
SMALL_KANA = set("ァィゥェォャュョヮ")  # they join the mora before them (キャ is one mora); ッ, ン and ー are their own


class Recognizer:
    """PocketSphinx with the en-US acoustic model, dictionary and language model its wheel bundles."""

    def __init__(self) -> None:
        from pocketsphinx import Decoder

        self.decoder = Decoder(samprate=RATE, loglevel="FATAL")

    def words(self, audio16k: np.ndarray) -> list[str]:
        pcm = (np.clip(audio16k, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        self.decoder.start_utt()
        self.decoder.process_raw(pcm, full_utt=True)
        self.decoder.end_utt()
        hyp = self.decoder.hyp()
        return words(hyp.hypstr if hyp is not None else "")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def edits(ref: list[str], hyp: list[str]) -> int:
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def wer(recognizer: Recognizer, pairs: list[tuple[str, np.ndarray]]) -> float:
    """Word errors per reference word over (text, 16 kHz audio) pairs."""
    errors = total = 0
    for text, audio in pairs:
        ref = words(text)
        errors += edits(ref, recognizer.words(audio))
        total += len(ref)
    return errors / max(total, 1)


def to16k(audio: np.ndarray, rate: int) -> np.ndarray:
    return soxr.resample(np.asarray(audio, dtype=np.float32), rate, RATE) if rate != RATE else audio


def speech_seconds(audio: np.ndarray, rate: int, floor_db: float = -35.0, pause_s: float = 0.25) -> float:
    """Seconds from the first to the last sound, less pauses longer than `pause_s` (10 ms frames under `floor_db`
    below the loudest frame): the time a listener hears speaking."""
    hop = rate // 100
    frames = np.asarray(audio[: len(audio) // hop * hop], dtype=np.float64).reshape(-1, hop)
    level = 10 * np.log10(np.mean(frames ** 2, axis=1) + 1e-12)
    loud = level > level.max() + floor_db
    if not loud.any():
        return 0.0
    first, last = int(np.argmax(loud)), len(loud) - int(np.argmax(loud[::-1]))
    quiet, run = 0, 0
    for is_loud in loud[first:last]:
        run = 0 if is_loud else run + 1
        quiet += 1 if run > pause_s * 100 else 0
    return (last - first - quiet) / 100


def morae(text: str) -> int:
    """Morae of Japanese text as OpenJTalk reads it (kanji included): kana, less the small ones that join."""
    import pyopenjtalk

    kana = pyopenjtalk.g2p(text, kana=True)
    return sum(1 for ch in kana if "ァ" <= ch <= "ヺ" or ch == "ー") - sum(ch in SMALL_KANA for ch in kana)


def hanzi(text: str) -> int:
    """Syllables of Mandarin text: its hanzi (one syllable each)."""
    return sum("\u4e00" <= ch <= "\u9fff" for ch in text)
