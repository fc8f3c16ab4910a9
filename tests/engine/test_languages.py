"""Voices and languages in the engine: real eSpeak NG streamed through the StreamingEngine, a Piper voice dropped
into the voices folder speaking its .onnx.json's language, and routing a message's language to a voice."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.backends.espeak.backend import VOICE_NAME as ESPEAK
from engine.backends.espeak.backend import EspeakBackend, parse_voices
from engine.backends.espeak.settings import EspeakSettings
from engine.backends.piper.settings import PiperSettings
from engine.base import FRAME_BYTES, BackendDefaults, BackendInfo, CancelToken, EngineError, Voice
from engine.catalog import VoiceCatalog
from engine.factory import build_engine
from engine.settings import EngineSettings
from tests.piper_voices import drop_piper_voice

pytestmark = pytest.mark.timeout(180)
FRENCH = "Bonjour tout le monde, je suis ravi de vous retrouver ce soir pour parler un peu de tout et de rien."


def _children_named(command: str) -> list[int]:
    """Our child processes running `command` (from /proc)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and cmdline.endswith(command):
            found.append(int(pid))
    return found


@pytest.fixture(scope="module")
def espeak() -> EspeakBackend:
    return EspeakBackend()


def test_the_voice_list_maps_each_language_to_an_espeak_voice(espeak):
    assert espeak.voices["fr"] == "fr-fr" and espeak.voices["zh"] == "cmn" and espeak.voices["no"] == "nb"
    assert espeak.names["fr"] == "French" and espeak.names["en"] == "English"
    assert espeak.names["yue"] == "Chinese (Cantonese)"
    listing = ("Pty Language Age/Gender VoiceName File Other Languages\n"
               " 5  fr-fr  --/M  French_(France)  roa/fr  (fr 5)\n"
               " 7  fr-fr  --/M  french-mbrola-1  mb/mb-fr1  (fr 7)\n"
               " 5  fr-be  --/M  French_(Belgium)  roa/fr-BE  (fr 8)\n")
    assert parse_voices(listing) == ({"fr": "fr-fr"}, {"fr": "French"})


def test_espeak_streams_its_output_in_pieces_as_it_is_written(espeak):
    pieces = list(espeak.synthesize(FRENCH, Voice(name=ESPEAK, language="fr")))
    assert len(pieces) > 5 and all(p.dtype == np.float32 and len(p) for p in pieces)
    audio = np.concatenate(pieces)
    assert 3.0 < len(audio) / espeak.info.sample_rate < 15.0 and 0.05 < float(np.abs(audio).max()) <= 1.0


def test_speed_and_pitch_reach_espeak(espeak):
    slow = np.concatenate(list(espeak.synthesize(FRENCH, Voice(name=ESPEAK, language="fr", speed=0.6))))
    fast = np.concatenate(list(espeak.synthesize(FRENCH, Voice(name=ESPEAK, language="fr", speed=1.6))))
    assert len(slow) > 1.8 * len(fast)
    assert espeak.command(Voice(language="de", pitch=5))[-2:] == ["-p", "70"]


def test_cancelling_kills_the_espeak_process(espeak):
    token = CancelToken()
    gen = espeak.synthesize(FRENCH * 20, Voice(name=ESPEAK, language="fr"), cancel=token)
    next(gen)
    assert len(_children_named("espeak-ng")) == 1
    token.cancel()
    rest = list(gen)  # ends: nothing more once cancelled
    assert len(rest) <= 1 and _children_named("espeak-ng") == []


def test_a_language_espeak_does_not_know_is_a_clear_error(espeak):
    with pytest.raises(EngineError, match="eSpeak NG does not speak 'tlh'"):
        list(espeak.synthesize("Qapla", Voice(name=ESPEAK, language="tlh")))


@pytest.fixture(scope="module")
def engine_with_voices(tmp_path_factory):
    folder = tmp_path_factory.mktemp("voices")
    drop_piper_voice(folder)  # de_DE-joe-medium
    (folder / "broken.onnx").write_bytes(b"not a model")  # no .onnx.json: skipped with a warning
    settings = EngineSettings(backend="piper", workers=1, max_concurrency=1,
                              tables=(PiperSettings(voices_dir=str(folder)),))
    engine = build_engine(settings)
    yield engine
    asyncio.run(engine.close())


def test_a_dropped_piper_voice_speaks_the_language_its_json_names(engine_with_voices):
    # the broken .onnx beside it was skipped: the engine was built all the same
    assert engine_with_voices.route(Voice(), "de") == Voice(name="de_DE-joe-medium", language="de")
    assert engine_with_voices.info.languages[0] == "en"
    langs = engine_with_voices.languages()
    assert {"en", "de", "fr", "zh", "ja"} <= set(langs) and langs["de"] == "German"


def test_routing_keeps_the_chosen_voice_then_an_installed_one_then_espeak(engine_with_voices):
    e = engine_with_voices
    mine = Voice(speed=1.2, pitch=2.0)
    assert e.route(mine, "en") == replace(mine, language="en")
    assert e.route(mine, "de") == Voice(name="de_DE-joe-medium", speed=1.2, pitch=2.0, language="de")
    assert e.route(mine, "fr") == Voice(name=ESPEAK, speed=1.2, pitch=2.0, language="fr")
    german = Voice(name="de_DE-joe-medium")
    assert e.route(german, "de") == replace(german, language="de")
    assert e.route(german, "en") == Voice(language="en")  # the configured backend's own voice
    assert e.route(mine, "tlh") == replace(mine, language="tlh")  # nobody speaks it: the chosen voice
    assert e.route(mine, "") == mine


async def test_espeak_and_the_dropped_voice_stream_through_the_engine(engine_with_voices):
    e = engine_with_voices
    for voice, text in ((Voice(name=ESPEAK, language="fr"), FRENCH),
                        (Voice(name="de_DE-joe-medium", language="de"), "Guten Abend, wie geht es euch heute?")):
        chunks = [c async for c in e.stream(text, voice, key="t")]
        assert chunks[-1].final and all(len(c.pcm) % FRAME_BYTES == 0 for c in chunks)
        pcm = np.frombuffer(b"".join(c.pcm for c in chunks), dtype="<i2").astype(np.float32) / 32768
        rms_dbfs = 20 * np.log10(np.sqrt(np.mean(pcm ** 2)))
        assert abs(rms_dbfs - EngineSettings().loudness_target_dbfs) < 3.0, (voice.name, rms_dbfs)  # the same loudness
        assert len(pcm) / 2 / 48_000 > 1.5


def test_without_espeak_routing_keeps_the_chosen_voice():
    engine = build_engine(EngineSettings(backend="piper", workers=1, tables=(EspeakSettings(enabled=False),)))
    try:
        assert "fr" not in engine.languages()  # no eSpeak NG
        assert engine.route(Voice(), "fr") == Voice(language="fr")
    finally:
        asyncio.run(engine.close())


def test_a_missing_espeak_command_turns_the_backend_off_with_a_warning(caplog):
    espeak = EspeakSettings(command="no-such-espeak")
    engine = build_engine(EngineSettings(backend="piper", workers=1, tables=(espeak,)))
    try:
        assert "fr" not in engine.languages()  # no eSpeak NG
        assert "no-such-espeak is not installed" in caplog.text
    finally:
        asyncio.run(engine.close())


def test_a_cosyvoice2_voice_speaks_the_models_languages_and_others_go_to_espeak(espeak, tmp_path, monkeypatch):
    from tests.engine.test_cosyvoice import registered

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cosy, cloned = registered()  # the CosyVoice2 backend over its test double, and a voice cloned from a clip
    catalog = VoiceCatalog(cosy, {ESPEAK: espeak})
    assert cosy.info.languages == ("zh", "en", "ja", "ko", "yue") and catalog.default_language == "zh"
    for language in ("zh", "en", "ja", "ko", "yue"):
        assert catalog.route(cloned, language) == replace(cloned, language=language)  # the clone speaks it
    assert catalog.route(cloned, "fr") == Voice(name=ESPEAK, language="fr")
    cosy.close()


class _Speaks(BackendDefaults):
    """A backend that only says which languages it speaks (and names some of them)."""

    def __init__(self, *languages: str, names: tuple[tuple[str, str], ...] = ()) -> None:
        self.info = BackendInfo("fake", "1", 16_000, clones=False, voices=("default",), languages=languages,
                                language_names=names)
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_extra_voices_are_alike_in_the_catalog_whichever_backend_they_are():
    primary, german = _Speaks("en"), _Speaks("de")
    many = _Speaks("de", "fr", names=(("de", "German"), ("fr", "French")))
    catalog = VoiceCatalog(primary, {"german": german, "many": many})
    assert catalog.languages() == {"de": "German", "en": "en", "fr": "French"}  # a name from any backend, else the code
    assert catalog.route(Voice(pitch=1.0), "de") == Voice(name="german", pitch=1.0, language="de")  # the first extra
    assert catalog.route(Voice(), "fr") == Voice(name="many", language="fr")
    chosen = Voice(name="many", speed=1.5, speaker_id=3, language="fr")
    assert catalog.backend_for(chosen) == (many, Voice(speed=1.5, language="fr"))  # its own default voice
    catalog.close()
    assert german.closed and many.closed and not primary.closed


def test_the_extras_come_in_the_registrys_order_each_name_taken_once(monkeypatch):
    primary, german, french, clash = _Speaks("en"), _Speaks("de"), _Speaks("fr"), _Speaks("it")
    seen: list[set[str]] = []

    def package(voices: dict[str, _Speaks]) -> SimpleNamespace:
        return SimpleNamespace(package="fake", extra_voices=lambda settings, taken: seen.append(taken) or voices)

    monkeypatch.setattr("engine.catalog.PACKAGES", {"a": package({"german": german}),
                                                   "b": package({"french": french, "german": clash})})
    catalog = VoiceCatalog.build(primary, EngineSettings())
    assert list(catalog.extras) == ["german", "french"] and clash.closed  # a name taken: skipped
    assert seen == [{"default"}, {"default", "german"}]  # each package is told the names taken before it
