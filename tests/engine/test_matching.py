"""Voice matching: pitch moves as asked, profiles round-trip, and matched Piper sounds closer to a reference."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest
import soxr

from engine import embedding
from engine.base import Voice, VoiceProfile
from engine.clip import CLIP_RATE, load_clip
from engine.matching import (
    F0_CEIL,
    F0_FLOOR,
    MatchProfile,
    ProfileError,
    apply_voice,
    calibrate,
    estimate_profile,
    profile_for,
    warp_envelope,
)
from engine.pitch import track_f0
from engine.registration import synthesize_default
from tests.engine import clips

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import pyworld

TEXT = "The birch canoe slid on the smooth planks, and the boy glued the sheet to the dark blue background."
OTHER_TEXT = "Four hours of steady work faced us, then we rested by the river and talked about the long summer."


@pytest.fixture(scope="module")
def joe(piper_backend) -> tuple[np.ndarray, int]:
    return synthesize_default(piper_backend, TEXT)


def frame_shift(before: np.ndarray, after: np.ndarray, sr: int) -> float:
    """Median F0 change in semitones over the frames voiced in both."""
    a, _ = pyworld.harvest(before.astype(np.float64), sr, f0_floor=55, f0_ceil=600, frame_period=10)
    b, _ = pyworld.harvest(after.astype(np.float64), sr, f0_floor=55, f0_ceil=600, frame_period=10)
    n = min(len(a), len(b))
    both = (a[:n] > 0) & (b[:n] > 0)
    return float(np.median(12 * np.log2(b[:n][both] / a[:n][both])))


def tracked_lf0(x: np.ndarray, sr: int) -> np.ndarray:
    """Log F0 of the voiced frames, tracked over the full speech range (not a profile's narrow one)."""
    f0, _ = track_f0(x, sr, F0_FLOOR, F0_CEIL)
    return np.log(f0[f0 > 0])


def semitones(a: float, b: float) -> float:
    return 12 * math.log2(a / b)


@pytest.mark.parametrize("shift", [4.0, -4.0])
def test_pitch_shift_moves_f0_in_the_requested_direction(joe, shift: float) -> None:
    audio, sr = joe
    out = apply_voice(audio, sr, Voice(pitch=shift))
    assert out.dtype == np.float32 and out.shape == audio.shape
    moved = frame_shift(audio, out, sr)
    assert moved * shift > 0 and abs(moved - shift) < 1.5, moved


def test_plain_voice_is_left_alone(joe) -> None:
    audio, sr = joe
    assert np.array_equal(apply_voice(audio, sr, Voice()), audio)


def test_profile_sets_the_target_pitch(joe) -> None:
    # The source statistics come from the tracker production fits profiles with (calibrate); harvest's
    # geometric mean jumps with the default voice's doubled-F0 frames, which made this check fail 1 run in 25.
    audio, sr = joe
    src = tracked_lf0(audio, sr)
    assert semitones(math.exp(np.median(src)), 220.0) < -9  # the default voice starts about an octave below
    profile = MatchProfile(
        target_lf0_mean=math.log(220.0), target_lf0_std=0.1, source_lf0_mean=float(np.mean(src)),
        source_lf0_std=float(np.std(src)),
    )
    voice = Voice(profile=VoiceProfile("v1", "piper", "1", profile.to_bytes()))
    out = apply_voice(audio, sr, voice)
    assert abs(semitones(math.exp(np.median(tracked_lf0(out, sr))), 220.0)) < 1.5


def test_matching_cost_is_a_fraction_of_real_time(joe) -> None:
    audio, sr = joe
    voice = Voice(pitch=2.0)
    apply_voice(audio, sr, voice)
    start = time.perf_counter()
    apply_voice(audio, sr, voice)
    rtf = (time.perf_counter() - start) / (len(audio) / sr)
    assert rtf < 0.5, rtf  # the bench holds the real goal (<= 0.15 extra); this only catches regressions


def test_profile_round_trip_and_damage() -> None:
    p = MatchProfile(math.log(180), 0.2, math.log(110), 0.18, warp=1.12, f0_scale=0.9)
    assert MatchProfile.from_bytes(p.to_bytes()) == p
    for bad in (b"", b"not json", b"{}", b'{"format": 99}', b'{"format": 1, "warp": "x"}'):
        with pytest.raises(ProfileError):
            MatchProfile.from_bytes(bad)
    wild = MatchProfile(99.0, 5.0, -3.0, 0.0, warp=40.0, f0_scale=-1).to_bytes()
    tame = MatchProfile.from_bytes(wild)
    assert 0.75 <= tame.warp <= 1.35 and 50 <= tame.target_f0_hz <= 500 and tame.f0_scale == 0.0


def test_parsed_profiles_are_cached() -> None:
    blob = MatchProfile(math.log(180), 0.2, math.log(110), 0.18).to_bytes()
    voice = Voice(profile=VoiceProfile("cache-test", "piper", "1", blob))
    assert profile_for(voice) is profile_for(voice)
    assert profile_for(Voice()) is None
    assert profile_for(Voice(profile=VoiceProfile("x", "cosyvoice2", "1", b"\x00"))) is None


def test_envelope_warp_moves_a_formant_up() -> None:
    bins = np.arange(513)
    env = np.exp(-0.5 * ((bins - 100) / 10.0) ** 2)[None, :].repeat(3, axis=0)
    assert int(np.argmax(warp_envelope(env, 1.2)[0])) == 120
    assert int(np.argmax(warp_envelope(env, 0.9)[0])) == 90


@pytest.mark.slow
def test_matched_voice_is_closer_to_the_reference_than_the_default(piper_backend) -> None:
    # The reference "speaker": the default voice on another text, played 1.3x fast (a resampling, not
    # WORLD), which raises its pitch and formants together the way a smaller speaker's are.
    ref_audio, sr = synthesize_default(piper_backend, OTHER_TEXT + " " + TEXT)
    speaker = soxr.resample(ref_audio, sr * 1.3, CLIP_RATE).astype(np.float32)
    clip = load_clip(clips.wav(speaker), max_bytes=10_000_000)
    target = embedding.embed(clip.samples)
    calibration = calibrate(lambda text: synthesize_default(piper_backend, text))
    profile = estimate_profile(clip.samples, clip.sample_rate, calibration=calibration, reference_embedding=target)
    assert profile.warp > 1.0
    eval_text = "Please call Stella and ask her to bring these things with her from the store."
    default, _ = synthesize_default(piper_backend, eval_text)
    voice = Voice(profile=VoiceProfile("ref", "piper", piper_backend.info.version, profile.to_bytes()))
    matched = np.concatenate(list(piper_backend.synthesize(eval_text, voice)))
    sim_default = embedding.similarity(embedding.embed(soxr.resample(default, sr, CLIP_RATE)), target)
    sim_matched = embedding.similarity(embedding.embed(soxr.resample(matched, sr, CLIP_RATE)), target)
    assert sim_matched > sim_default + 0.03, (sim_default, sim_matched)
