"""Language identification: accuracy on a labelled set of our own, short and unclear text, hostile text."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from engine import langid

SENTENCES = json.loads((Path(__file__).with_name("langid_sentences.json")).read_text("utf-8"))
# Measured on tests/engine/langid_sentences.json (py3langid 0.4.0, MIN_CONFIDENCE 0.5): 20/20 in each of the six
# languages. The floor is that minus a margin of two sentences per language.
FLOOR = 0.90


def test_the_labelled_set_has_five_languages_of_twenty_sentences_at_least():
    assert len(SENTENCES) >= 5 and all(len(s) >= 20 for s in SENTENCES.values())


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_accuracy_per_language_is_above_the_measured_floor(language):
    sentences = SENTENCES[language]
    right = sum(langid.detect(s, "fallback").language == language for s in sentences)
    assert right / len(sentences) >= FLOOR, (language, right)


@pytest.mark.parametrize("text", ["ok", "lol", "gg wp", "👍👍👍", "12345 678", "https", "   ", ""])
def test_short_or_letterless_text_keeps_the_fallback(text):
    found = langid.detect(text, "de")
    assert found == langid.Detection("de", False)


def test_unclear_text_keeps_the_fallback():
    found = langid.detect("first message", "fr")  # long enough, but the detector is unsure (0.15 for en)
    assert found.language == "fr" and not found.detected and found.guess == "en"


def test_a_clear_message_is_detected():
    found = langid.detect("Bonjour tout le monde, je suis ravi de vous retrouver ce soir.", "en")
    assert found.language == "fr" and found.detected and found.confidence > 0.9


def test_hostile_text_is_looked_at_through_a_bounded_sample():
    rng = random.Random(7)
    hostile = "".join(chr(rng.choice([rng.randint(0x4E00, 0x9FFF), rng.randint(0x10000, 0x10FFFF),
                                      rng.randint(0x20, 0x7E)])) for _ in range(50_000))
    sample = langid.sample_of(hostile)
    assert len(sample) <= langid.SAMPLE_CHARS and len(sample.encode("utf-8", "surrogatepass")) <= langid.SAMPLE_BYTES
    found = langid.detect(hostile, "en")  # any answer, but an answer: no exception on lone surrogates or noise
    assert isinstance(found.language, str) and found.language
    assert langid.detect("\ud800" * 30 + "Guten Abend, ich freue mich sehr, euch heute alle wiederzusehen.",
                         "en").language == "de"
