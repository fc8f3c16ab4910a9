"""Kokoro-82M, the default backend, heard as a listener would: English words recognized, Japanese and Mandarin at a
person's pace, every language it covers routed to its own natural voice, its files checked by their digests."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from bench.listen import Recognizer, hanzi, morae, speech_seconds, to16k, wer
from engine.backends import kokoro_assets
from engine.backends.espeak import VOICE_NAME as ESPEAK
from engine.backends.kokoro import (
    DEFAULT_VOICES,
    FIRST,
    LEAD_S,
    SAMPLE_RATE,
    SOUND_RMS,
    WINDOW,
    KokoroBackend,
    from_first_sound,
    token_runs,
    windows,
)
from engine.backends.kokoro_g2p import g2p_key, phonemize
from engine.backends.kokoro_norms import LEARNED
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
    return np.concatenate(list(backend.synthesize(text, voice)))


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


def test_a_long_segment_is_cut_at_a_break_into_runs_the_model_reads():
    tokens = [1] * 400 + [16] + [1] * 300
    runs = list(token_runs(tokens, breaks={16}, limit=510))
    assert [len(r) for r in runs] == [401, 300] and sum(runs, []) == tokens


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


def test_a_chosen_pack_sounds_unlike_the_default(kokoro):
    text = "The library opens at nine in the morning."
    a = render(kokoro, text, Voice())
    b = render(kokoro, text, Voice(name="am_michael"))

    def centroid(x):
        spec = np.abs(np.fft.rfft(x[: len(x) // 1024 * 1024].reshape(-1, 1024) * np.hanning(1024), axis=1)).mean(0)
        return float((spec * np.arange(len(spec))).sum() / spec.sum())

    assert centroid(a) > centroid(b) * 1.1  # af_heart (a woman) brighter than am_michael (a man)


def test_the_vocoder_windows_cover_a_run_once_and_none_is_short():
    assert windows(100) == [(0, 100)] and windows(WINDOW * 3 // 2) == [(0, WINDOW * 3 // 2)]
    for n in (2 * WINDOW, 5 * WINDOW + 7):
        spans = windows(n)
        assert spans[0][0] == 0 and spans[-1][1] == n and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert all(WINDOW <= b - a <= WINDOW * 3 // 2 for a, b in spans)
    # with learned statistics: a short first window, each next 1.5x longer up to WINDOW
    assert windows(FIRST * 3 // 2, FIRST) == [(0, FIRST * 3 // 2)]
    spans = windows(10 * WINDOW + 3, FIRST)
    sizes = [b - a for a, b in spans]
    assert spans[0] == (0, FIRST) and spans[-1][1] == 10 * WINDOW + 3
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert sizes[1] == FIRST * 3 // 2 and max(sizes[:-1]) == WINDOW and sizes[-1] <= WINDOW * 3 // 2


def test_a_run_starts_just_before_its_first_sound_and_keeps_all_of_it(kokoro):
    text = "Hello there, nice to meet you."
    model, style = kokoro.model, kokoro.model.style("af_heart")
    tokens = model.tokens(phonemize(text, "en"))
    row = style[len(tokens)].reshape(1, 256)
    x, f0 = model.features(tokens, row, 1.0, None)
    untrimmed = model.vocode(x, f0, row, 0, x.shape[2], None, None)[0]
    audio = np.concatenate(list(model.run(tokens, style, 1.0, None)))  # normalized by its own statistics: whole

    def first_sound(a: np.ndarray) -> float:
        frames = a[: len(a) // 240 * 240].reshape(-1, 240)
        return int(np.argmax(np.sqrt(np.mean(frames**2, axis=1)) > SOUND_RMS)) * 240 / SAMPLE_RATE

    assert first_sound(untrimmed) > 0.2  # the model's leading pause, which the run no longer plays
    assert LEAD_S - 0.011 <= first_sound(audio) <= LEAD_S + 0.011
    np.testing.assert_allclose(audio, untrimmed[len(untrimmed) - len(audio):], atol=1e-4)  # the rest, untouched


def test_a_long_sentence_comes_in_windows_that_join_without_a_click(kokoro):
    text = ("When the old lighthouse keeper finally climbed the narrow stairs that evening, he found the great lamp "
            "dark and cold, and a small gray bird asleep by the rail.")
    kokoro.warm_up()  # af_heart's statistics in English learned: windows from FIRST frames
    assert kokoro.model.norms.given(("af_heart", "en")) is not None
    pieces = list(kokoro.synthesize(text, Voice()))
    audio = np.concatenate(pieces)
    assert len(pieces) >= 4 and len(pieces[0]) < FIRST * 300
    jumps = np.abs(np.diff(audio))
    ordinary = np.percentile(jumps, 99.9)
    for seam in np.cumsum([len(p) for p in pieces[:-1]]):  # no sample step at a seam beyond the speech's own
        assert jumps[seam - 240:seam + 240].max() <= 1.5 * ordinary, (seam, jumps[seam - 240:seam + 240].max(), ordinary)
    # the words as clear as the same run vocoded whole (PocketSphinx: within two words of 29)
    model, style = kokoro.model, kokoro.model.style("af_heart")
    tokens = model.tokens(phonemize(text, "en"))
    row = style[len(tokens)].reshape(1, 256)
    x, f0 = model.features(tokens, row, 1.0, None)
    whole = from_first_sound(model.vocode(x, f0, row, 0, x.shape[2], None, None)[0])
    assert abs(len(whole) - len(audio)) <= 480  # all of it (the first sound found within a 10 ms frame or two)
    recognizer = Recognizer()
    heard = [wer(recognizer, [(text, to16k(a, SAMPLE_RATE))]) for a in (audio, whole)]
    assert heard[0] <= heard[1] + 2 / 29, heard


def test_a_voice_is_vocoded_whole_until_its_statistics_are_learned_in_that_language(kokoro):
    text = "Please remember to bring your notes to the meeting today, and your laptop too."
    key = ("am_adam", "en")
    assert kokoro.model.norms.given(key) is None
    first = list(kokoro.synthesize(text, Voice(name="am_adam")))
    assert len(first) == 1  # one run, vocoded whole, normalized by its own statistics
    while kokoro.model.norms.given(key) is None:
        list(kokoro.synthesize(text, Voice(name="am_adam")))
    later = list(kokoro.synthesize(text, Voice(name="am_adam")))
    assert len(later) >= 2 and len(later[0]) < FIRST * 300  # heard after the first window
    assert abs(sum(map(len, later)) - sum(map(len, first))) <= 300  # the same run, all of it
    # learned per language: the same voice reading Spanish starts over; a raised pitch is vocoded whole
    assert kokoro.model.norms.given(("am_adam", "es")) is None
    assert len(list(kokoro.synthesize(text, Voice(name="am_adam", pitch=2)))) == 1
