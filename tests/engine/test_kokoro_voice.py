"""A registered voice on Kokoro (engine/backends/kokoro_voice.py): a clip fitted to a style of the stock packs, its
progress reported, the fitted voice understood in English and spoken in Japanese, its profile checked when read."""

from __future__ import annotations

import numpy as np
import pytest
import soxr

from bench.listen import Recognizer, morae, speech_seconds, to16k, wer
from engine.backends.kokoro.backend import SAMPLE_RATE
from engine.backends.kokoro.voice import KokoroStyle, StyleError, StyleFit, Voiceprint
from engine.base import Voice, VoiceProfile
from engine.catalog import VoiceCatalog
from engine.factory import build_backend
from engine.settings import EngineSettings
from engine.voices import embedding
from engine.voices.profile import MatchProfile
from engine.voices.registration import register_clip
from tests.engine.test_kokoro import kokoro, render  # noqa: F401 (kokoro: the module's backend, a fixture)

pytestmark = pytest.mark.timeout(600)
# what the "speaker" says in the clip: not the text the fit's candidates say (kokoro_voice.FIT_TEXT)
CLIP_TEXT = ("Every morning the old fisherman walked down to the harbour, checked his nets, and talked with the gulls "
             "about the weather.")
SPOKEN = "The library opens at nine in the morning and closes at six in the evening."
ENGLISH = (SPOKEN, "Please bring your own water bottle to the trip on Saturday.", "My brother bought a small red "
                                                                                  "car last week.")


def test_a_style_profile_round_trips_and_a_damaged_one_is_refused():
    match = MatchProfile(target_lf0_mean=4.9, target_lf0_std=0.2, source_lf0_mean=4.7, source_lf0_std=0.15, warp=1.04)
    style = KokoroStyle({"am_michael": 1.0, "am_adam": 0.4}, match=match)
    blob = style.to_bytes()
    assert KokoroStyle.is_style(blob) and KokoroStyle.from_bytes(blob) == style
    uncorrected = b'{"kind": "kokoro-style", "format": 1, "weights": {"am_adam": 1}}'  # a fit that stopped early
    assert KokoroStyle.from_bytes(uncorrected) == KokoroStyle({"am_adam": 1.0})
    assert not KokoroStyle.is_style(b'{"format": 3, "warp": 1.0}')
    for bad in (b"", b"{", b'{"kind": "kokoro-style", "format": 1, "weights": {}}',
                b'{"kind": "kokoro-style", "format": 1, "weights": {"am_adam": -1}}',
                b'{"kind": "kokoro-style", "format": 1, "weights": {"am_adam": 1, "am_puck": "loud"}}',
                b'{"kind": "kokoro-style", "format": 7, "weights": {"am_adam": 1}}',
                b'{"kind": "kokoro-style", "format": 1, "weights": {"am_adam": 1}, "match": {"warp": 1}}'):
        with pytest.raises(StyleError, match="register the voice again"):
            KokoroStyle.from_bytes(bad)


def test_rows_blend_the_packs_by_their_weights():
    packs = {"a": np.full((2, 256), 1.0, np.float32), "b": np.full((2, 256), 4.0, np.float32)}
    rows = KokoroStyle({"a": 2.0, "b": 1.0}).rows(packs.__getitem__)
    assert rows.dtype == np.float32 and np.allclose(rows, 2.0)


def test_a_packs_own_voice_is_fitted_to_that_pack_with_progress(kokoro):
    """am_michael's own speech as the clip: the fit weighs am_michael most, reports its progress up to 1, and the
    voice it made is closer to the clip's speaker than the default voice, understood, and speaks Japanese."""
    clip = render(kokoro, CLIP_TEXT, Voice(name="am_michael"))
    seen: list[float] = []
    blob = kokoro.extract_features(clip, SAMPLE_RATE, CLIP_TEXT, progress=seen.append)
    style = KokoroStyle.from_bytes(blob)
    assert max(style.weights, key=style.weights.get) == "am_michael", style
    assert style.match is not None  # the correction toward the clip was fitted
    assert seen and seen == sorted(seen) and seen[-1] == 1.0 and len(seen) >= 6

    voice = Voice(name="v1", profile=VoiceProfile("v1", "kokoro", kokoro.info.version, blob))
    spoken = to16k(render(kokoro, SPOKEN, voice), SAMPLE_RATE)
    speaker = embedding.embed(soxr.resample(clip, SAMPLE_RATE, 16_000).astype(np.float32))
    default = embedding.embed(to16k(render(kokoro, SPOKEN, Voice()), SAMPLE_RATE))
    assert embedding.similarity(embedding.embed(spoken), speaker) > embedding.similarity(default, speaker) + 0.1
    recognizer = Recognizer()
    fitted = [(t, to16k(render(kokoro, t, voice), SAMPLE_RATE)) for t in ENGLISH]
    stock = [(t, to16k(render(kokoro, t, Voice(name="am_michael")), SAMPLE_RATE)) for t in ENGLISH]
    assert wer(recognizer, fitted) <= wer(recognizer, stock) + 0.1  # as clear as the pack it started from
    assert "ja" in kokoro.voice_languages(voice)
    japanese = "次の会議は午後三時から始まります。"
    heard = render(kokoro, japanese, Voice(name="v1", language="ja", profile=voice.profile))
    assert 5.0 <= morae(japanese) / speech_seconds(heard, SAMPLE_RATE) <= 10.0


def test_a_clip_at_a_womans_pitch_is_not_given_a_mans_style(kokoro):
    """The F0 guard: every candidate is rendered and any whose pitch is far from the clip's is refused."""
    clip = to16k(render(kokoro, CLIP_TEXT, Voice(name="af_bella")), SAMPLE_RATE)
    prints = kokoro.voiceprints()
    fit = StyleFit(Voiceprint.of(clip), prints, kokoro.model.style,
                   lambda _text, rows: kokoro.render("We met at the station.", rows), stages="blend")
    chosen = fit.run()
    assert all(name[1] == "f" for name in chosen.weights), chosen
    assert len(fit.report.tried) >= 3 and fit.report.score > 0.6


def test_registration_stores_the_style_and_an_earlier_piper_profile_still_speaks(kokoro):
    import io

    import soundfile as sf

    out = io.BytesIO()
    sf.write(out, render(kokoro, CLIP_TEXT, Voice(name="bm_george")), SAMPLE_RATE, format="WAV", subtype="PCM_16")
    kokoro.fit_stages = "nearest"  # the style itself is the previous test's; here only what is stored
    try:
        reg = register_clip(out.getvalue(), CLIP_TEXT, [kokoro])
    finally:
        kokoro.fit_stages = "clear"
    blob = reg.features[("kokoro", kokoro.info.version)]
    assert KokoroStyle.from_bytes(blob).weights == {"bm_george": 1.0} and reg.profile is None
    make = lambda name: build_backend(EngineSettings(backend=name, workers=1))  # noqa: E731 (as build_engine does)
    piper = make("piper")
    try:
        earlier = piper.extract_features(soxr.resample(render(kokoro, CLIP_TEXT, Voice(name="bm_george")),
                                                       SAMPLE_RATE, 16_000), 16_000, CLIP_TEXT)
    finally:
        piper.close()
    voice = Voice(name="v2", profile=VoiceProfile("v2", "kokoro", "an earlier version", earlier))
    catalog = VoiceCatalog(kokoro, make=make)  # the engine's catalog hands it to the backend it was registered under
    try:
        reader, spoken = catalog.backend_for(voice)
        assert reader.info.name == "piper" and spoken.profile == voice.profile and catalog.speaks(voice) == ("en",)
        assert catalog.backend_for(Voice(name="v3", profile=VoiceProfile("v3", "kokoro", "now", blob)))[0] is kokoro
        rate = reader.info.sample_rate
        # Piper samples its noise: over these three sentences 0.13-0.33 in four runs (raw Piper 0.09-0.21); silence
        # or another voice's garble would be near 1
        assert wer(Recognizer(), [(t, to16k(np.concatenate(list(reader.synthesize(t, spoken))), rate))
                                  for t in ENGLISH]) <= 0.4
    finally:
        catalog.close()
