"""Real audio files of every kind a reference clip can be, made in the test: good, odd and hostile."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np
import soundfile as sf


def speechlike(seconds: float, sr: int = 16_000, f0: float = 130.0, seed: int = 0, amp: float = 0.3) -> np.ndarray:
    """A voiced, syllable-paced harmonic signal with short pauses: loud where speech would be."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    pitch = f0 * (1 + 0.08 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(pitch) / sr
    x = sum(np.sin(k * phase) / k for k in range(1, 12))
    syll = 0.5 * (1 - np.cos(2 * np.pi * 4.0 * t))  # 4 syllables a second
    x = x * syll + 0.01 * rng.standard_normal(len(t))
    x = x / np.max(np.abs(x)) * amp
    return x.astype(np.float32)


def encode(x: np.ndarray, sr: int, fmt: str, subtype: str | None = None) -> bytes:
    out = io.BytesIO()
    sf.write(out, x, sr, format=fmt, subtype=subtype)
    return out.getvalue()


def wav(x: np.ndarray, sr: int = 16_000) -> bytes:
    return encode(x, sr, "WAV", "PCM_16")


def pdf_like(size: int) -> bytes:
    head = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog >> endobj\n"
    return head + bytes(size - len(head))


def zip_bomb(uncompressed_mb: int = 200) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("voice.wav", "w") as w:
        block = bytes(1 << 20)
        for _ in range(uncompressed_mb):
            w.write(block)
    return out.getvalue()


def wav_header_claiming(data_bytes: int, sr: int = 16_000, real_seconds: float = 2.0) -> bytes:
    """A 16-bit mono WAV whose header promises data_bytes (RF64 when over 4 GB) but holds real_seconds."""
    pcm = (speechlike(real_seconds, sr) * 32767).astype("<i2").tobytes()
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, sr, sr * 2, 2, 16)
    if data_bytes < 0xFFFFFFF0:
        return (b"RIFF" + struct.pack("<I", data_bytes + 36) + b"WAVE" + fmt + b"data" + struct.pack("<I", data_bytes)
                + pcm)
    ds64 = b"ds64" + struct.pack("<IQQQI", 28, data_bytes + 72, data_bytes, data_bytes // 2, 0)
    return (b"RF64" + struct.pack("<I", 0xFFFFFFFF) + b"WAVE" + ds64 + fmt + b"data" + struct.pack("<I", 0xFFFFFFFF)
            + pcm)


def long_flac(hours: float = 2.0, sr: int = 8_000) -> bytes:
    """A real `hours`-long FLAC (quiet with a tone now and then), encoded a minute at a time."""
    out = io.BytesIO()
    minute = np.zeros(sr * 60, dtype=np.float32)
    minute[: sr * 2] = speechlike(2.0, sr)
    with sf.SoundFile(out, "w", sr, 1, format="FLAC", subtype="PCM_16") as f:
        for _ in range(int(hours * 60)):
            f.write(minute)
    return out.getvalue()


def clipped_square(seconds: float = 6.0, sr: int = 16_000) -> bytes:
    t = np.arange(int(seconds * sr)) / sr
    x = np.sign(np.sin(2 * np.pi * 150 * t)) * 1.0
    x = np.clip(x * 1.5, -1.0, 1.0)
    return wav(x.astype(np.float32), sr)
