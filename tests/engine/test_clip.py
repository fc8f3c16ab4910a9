"""Reference clips: each format decodes; every rejection reason, with a real file of that kind, in bounded time."""

from __future__ import annotations

import io
import time
import tracemalloc

import numpy as np
import pytest
import soundfile as sf

from engine.base import EngineError
from engine.voices.clip import ClipRejected, load_clip, to_flac
from tests.engine import clips

MB = 1_000_000
CAP = 10 * MB


def reject(data: bytes, *, max_bytes: int = CAP, budget_s: float = 3.0, **kw) -> str:
    start = time.perf_counter()
    with pytest.raises(ClipRejected) as info:
        load_clip(data, max_bytes=max_bytes, **kw)
    assert time.perf_counter() - start < budget_s
    assert isinstance(info.value, EngineError)
    message = str(info.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def test_wav_decodes_trims_and_reports() -> None:
    x = np.concatenate([np.zeros(16_000, np.float32), clips.speechlike(6.0), np.zeros(24_000, np.float32)])
    clip = load_clip(clips.wav(x), max_bytes=CAP)
    assert clip.sample_rate == 16_000 and clip.samples.dtype == np.float32 and clip.samples.ndim == 1
    assert clip.duration_s == pytest.approx(8.5, abs=0.01)
    assert 5.0 < clip.speech_s <= 6.2
    assert len(clip.samples) / 16_000 < 7.0  # the second of leading and 1.5 s of trailing silence are gone
    assert 0.25 < clip.peak < 0.35 and clip.clipped_fraction < 0.001


@pytest.mark.parametrize(
    ("fmt", "subtype", "sr"),
    [("FLAC", "PCM_16", 44_100), ("OGG", "OPUS", 48_000), ("OGG", "VORBIS", 22_050), ("MP3", "MPEG_LAYER_III", 44_100)],
)
def test_compressed_formats_decode(fmt: str, subtype: str, sr: int) -> None:
    if subtype not in sf.available_subtypes(fmt):
        pytest.skip(f"libsndfile here cannot write {fmt}/{subtype}")
    stereo = np.stack([clips.speechlike(5.0, sr), clips.speechlike(5.0, sr, seed=1)], axis=1)
    clip = load_clip(clips.encode(stereo, sr, fmt, subtype), max_bytes=CAP)
    assert clip.source_format == fmt
    assert clip.sample_rate == 16_000
    assert 4.0 < clip.speech_s < 5.5


def test_pdf_is_not_audio() -> None:
    assert reject(clips.pdf_like(50 * MB), max_bytes=60 * MB) == (
        "That file is not audio I can read (WAV, FLAC, Ogg/Opus or MP3)."
    )


def test_oversize_bytes_rejected_before_anything_else() -> None:
    message = reject(clips.pdf_like(50 * MB))
    assert "50.0 MB" in message and "10.0 MB" in message


def test_zip_bomb_is_not_audio() -> None:
    bomb = clips.zip_bomb(200)
    assert len(bomb) < 1 * MB
    assert "not audio" in reject(bomb)


def test_random_bytes_and_empty_are_not_audio() -> None:
    assert "not audio" in reject(np.random.default_rng(0).bytes(100_000))
    assert "not audio" in reject(b"")
    assert "not audio" in reject(b"RIFF\x00\x00\x00\x00WAVE" + bytes(100))


@pytest.mark.parametrize("claimed", [0xFFFFFF00, 10 * 10**9], ids=["4GB-riff", "10GB-rf64"])
def test_wav_header_claiming_gigabytes(claimed: int) -> None:
    data = clips.wav_header_claiming(claimed)
    tracemalloc.start()
    try:
        message = reject(data, budget_s=1.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Judged by the 2 s the file really holds, not by the header's promise: a clear reason, bounded.
    assert "only 2.0 s of speech" in message
    assert peak < 20 * MB


def test_streamed_wav_with_placeholder_size_is_accepted() -> None:
    """espeak-ng and other streaming writers put a huge placeholder in the header's sizes."""
    import struct

    patched = bytearray(clips.wav(clips.speechlike(5.0)))
    data_at = patched.find(b"data")
    struct.pack_into("<I", patched, 4, 0x7FFFF024)
    struct.pack_into("<I", patched, data_at + 4, 0x7FFFF000)
    clip = load_clip(bytes(patched), max_bytes=CAP)
    assert clip.speech_s > 3.0


def test_two_hour_recording_rejected_from_its_header() -> None:
    data = clips.long_flac(hours=2.0)
    assert len(data) < CAP  # small enough to pass the size cap: a decompression bomb in all but name
    tracemalloc.start()
    try:
        message = reject(data, budget_s=2.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "2 h 0 min" in message
    assert peak < 50 * MB


def test_long_recording_without_length_in_header_stops_at_the_cap() -> None:
    # a streamed WAV (data size 0xFFFFFFFF) says nothing about its length: decoding stops at the cap
    pcm = (clips.speechlike(90.0, 8_000) * 32767).astype("<i2").tobytes()
    import struct

    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, 8_000, 16_000, 2, 16)
    data = b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + b"WAVE" + fmt + b"data" + struct.pack("<I", 0xFFFFFFFF) + pcm
    message = reject(data)
    assert "longer than 60 s" in message or "90 s" in message or "1 min 30 s" in message


def test_truncated_ogg_is_damaged() -> None:
    data = clips.encode(clips.speechlike(8.0, 48_000), 48_000, "OGG", "OPUS")
    for cut in (len(data) // 2, len(data) - 7):
        assert reject(data[:cut]) == "That audio file is damaged or cut off; export or record it again."


def test_corrupt_ogg_is_rejected() -> None:
    data = bytearray(clips.encode(clips.speechlike(8.0, 48_000), 48_000, "OGG", "OPUS"))
    rng = np.random.default_rng(1)
    for i in rng.integers(200, len(data), 400):
        data[i] ^= 0xFF
    message = reject(bytes(data))
    assert "damaged" in message or "not audio" in message or "speech" in message


def test_silence_is_rejected() -> None:
    assert "silent" in reject(clips.wav(np.zeros(16_000 * 8, np.float32)))
    hiss = (np.random.default_rng(0).standard_normal(16_000 * 8) * 3e-4).astype(np.float32)
    assert "silent" in reject(clips.wav(hiss))


def test_clipped_audio_is_rejected() -> None:
    assert "clipped" in reject(clips.clipped_square())
    loud = np.clip(clips.speechlike(6.0) * 6.0, -1.0, 1.0)
    assert "clipped" in reject(clips.wav(loud))


def test_too_little_speech() -> None:
    x = np.concatenate([np.zeros(8_000, np.float32), clips.speechlike(1.5), np.zeros(8_000, np.float32)])
    assert reject(clips.wav(x)) == "The clip has only 1.5 s of speech; record at least 3 s."


def test_too_much_speech() -> None:
    message = reject(clips.wav(clips.speechlike(40.0)))
    assert message == "The clip has 40.0 s of speech; keep it to at most 30 s."


def test_flac_reference_is_at_most_30_s_and_round_trips() -> None:
    clip = load_clip(clips.wav(clips.speechlike(29.0)), max_bytes=CAP)
    blob = to_flac(clip)
    back, sr = sf.read(io.BytesIO(blob), dtype="float32")
    assert sr == 16_000 and len(back) <= 30 * 16_000
    assert np.max(np.abs(back - clip.samples[: len(back)])) < 1e-3
    assert load_clip(blob, max_bytes=CAP).speech_s == pytest.approx(clip.speech_s, abs=0.2)
