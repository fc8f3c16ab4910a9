"""Registration: one pass keeps the reference, its embedding and each backend's features by (name, version)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from engine.__main__ import main
from engine.backends.kokoro.voice import KokoroStyle
from engine.base import BackendDefaults, BackendInfo, Progress, TextRejected, Voice
from engine.voices.clip import ClipRejected
from engine.voices.profile import MatchProfile
from engine.voices.registration import Registration, register_clip, synthesize_default
from tests.engine import clips


class FeatureBackend(BackendDefaults):
    """A cloning backend that records what it was given and returns a blob (or None)."""

    def __init__(self, name: str, version: str, blob: bytes | None) -> None:
        self.info = BackendInfo(name=name, version=version, sample_rate=16_000, clones=True)
        self.blob = blob
        self.calls: list[tuple[int, int, str]] = []

    def synthesize(self, text: str, voice: Voice) -> Iterator[np.ndarray]:
        yield np.zeros(160, np.float32)

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None,
                         progress: Progress | None = None) -> bytes | None:
        self.calls.append((len(clip), sample_rate, transcript))
        return self.blob

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def reference(piper_backend) -> bytes:
    audio, sr = synthesize_default(
        piper_backend, "Four hours of steady work faced us. We talked about the river and the long, hot summer."
    )
    faster = np.interp(np.arange(0, len(audio), 1.25), np.arange(len(audio)), audio).astype(np.float32)
    return clips.wav(faster, sr)


def test_registration_stores_everything_once(piper_backend, reference: bytes) -> None:
    clone_a = FeatureBackend("cosyvoice2", "a1", b"features-a")
    clone_b = FeatureBackend("cosyvoice2", "b2", b"features-b")
    nothing = FeatureBackend("remote", "1", None)
    reg = register_clip(reference, "  Four hours\x00 of steady work.  ", [piper_backend, clone_a, clone_b, nothing])
    assert reg.transcript == "Four hours of steady work."
    assert set(reg.features) == {("piper", piper_backend.info.version), ("cosyvoice2", "a1"), ("cosyvoice2", "b2")}
    assert reg.features[("cosyvoice2", "b2")] == b"features-b"
    assert clone_a.calls == [(clone_a.calls[0][0], 16_000, "Four hours of steady work.")]
    assert MatchProfile.from_bytes(reg.features[("piper", piper_backend.info.version)]) == reg.profile
    # the spectral envelope is fitted too: statistics of the default voice and of the clip's speaker
    assert reg.profile.env_src is not None and reg.profile.env_dst is not None and reg.profile.env_strength > 0
    assert reg.profile.env_src != reg.profile.env_dst
    vec = np.frombuffer(reg.embedding, dtype="<f4")
    assert vec.shape == (256,) and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-3
    flac, sr = sf.read(io.BytesIO(reg.flac))
    assert sr == 16_000 and 3.0 < len(flac) / sr <= 30.0
    assert reg.timings["total"] < 60.0
    voice = reg.voice(piper_backend.info)
    assert voice.profile is not None and voice.profile.features == reg.features[("piper", piper_backend.info.version)]
    assert reg.voice(BackendInfo("piper", "other-model", 22_050, False)).profile is None


def test_registration_is_repeatable(piper_backend, reference: bytes) -> None:
    a = register_clip(reference, "", [piper_backend])
    b = register_clip(reference, "", [piper_backend])
    assert a.voice_id == b.voice_id and a.embedding == b.embedding
    assert a.profile is not None and b.profile is not None
    assert abs(a.profile.warp - b.profile.warp) < 0.05
    assert abs(a.profile.target_lf0_mean - b.profile.target_lf0_mean) < 0.2


def test_profile_json_round_trip(piper_backend, reference: bytes) -> None:
    reg = register_clip(reference, "hello", [piper_backend])
    back = Registration.from_json(reg.to_json())
    assert back.features == reg.features and back.profile == reg.profile and back.flac == reg.flac
    with pytest.raises(ClipRejected):
        Registration.from_json("{}")


def test_bad_input_is_rejected_before_any_backend_runs() -> None:
    clone = FeatureBackend("cosyvoice2", "1", b"x")
    with pytest.raises(ClipRejected):
        register_clip(clips.pdf_like(1000), "", [clone])
    with pytest.raises(TextRejected):
        register_clip(clips.wav(clips.speechlike(5.0)), "x" * 5000, [clone])
    assert clone.calls == []


def test_cli_register_then_say(tmp_path: Path, reference: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    clip = tmp_path / "me.wav"
    clip.write_bytes(reference)
    profile = tmp_path / "me.json"
    assert main(["register", str(clip), "--out", str(profile)]) == 0
    stored = Registration.from_json(profile.read_text())
    assert [KokoroStyle.is_style(blob) for blob in stored.features.values()] == [True]  # the default voice's style
    out = tmp_path / "said.wav"
    assert main(["say", "Hello there.", "--profile", str(profile), "--out", str(out)]) == 0
    audio, sr = sf.read(out)
    assert sr == 48_000 and len(audio) > 0.3 * sr
    capsys.readouterr()
    bad = tmp_path / "paper.pdf"
    bad.write_bytes(clips.pdf_like(5000))
    assert main(["say", "Hello.", "--reference", str(bad), "--out", str(tmp_path / "x.wav")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: That file is not audio I can read (WAV, FLAC, Ogg/Opus or MP3)."
