"""Reference clips: decode untrusted audio bytes in bounded time and memory, check and trim them."""

from __future__ import annotations

import io
import math
import struct
from dataclasses import dataclass

import numpy as np
import soundfile as sf
import soxr

from engine.base import EngineError

CLIP_RATE = 16_000
MAX_FLAC_S = 30.0
MIN_SPEECH_S, MAX_SPEECH_S = 3.0, 30.0  # speech a reference must hold; the one declaration of these bounds
ALLOWED_FORMATS = {"WAV", "WAVEX", "RF64", "FLAC", "OGG", "MP3"}
_FRAME_S = 0.02  # analysis frame for speech activity
_BLOCK_S = 2.0  # decode block
_NOT_AUDIO = "That file is not audio I can read (WAV, FLAC, Ogg/Opus or MP3)."
_DAMAGED = "That audio file is damaged or cut off; export or record it again."


class ClipRejected(EngineError):
    """A reference clip cannot be used; the message tells the user why and what to do."""


@dataclass(frozen=True)
class Clip:
    """A decoded reference: float32 mono speech at 16 kHz with edges trimmed and long pauses shortened."""

    samples: np.ndarray
    sample_rate: int
    duration_s: float  # the file as sent
    speech_s: float  # active speech in it
    peak: float  # of the decoded file, before any processing (1.0 = full scale)
    clipped_fraction: float  # share of speech samples in flat runs at the peak
    source_format: str


def load_clip(
    data: bytes,
    *,
    max_bytes: int,
    min_speech_s: float = MIN_SPEECH_S,
    max_speech_s: float = MAX_SPEECH_S,
    max_duration_s: float | None = None,
) -> Clip:
    """Decode, check and trim a reference clip, or raise ClipRejected saying why."""
    if max_duration_s is None:
        max_duration_s = max(2.0 * max_speech_s, 60.0)
    if len(data) > max_bytes:
        raise ClipRejected(
            f"That file is {_mb(len(data))}; the limit is {_mb(max_bytes)}. Send a shorter clip."
        )
    if not data or _sniff(data) is None:
        raise ClipRejected(_NOT_AUDIO)
    declared = _declared_riff_seconds(data)
    if declared is not None:
        _check_declared(declared, max_duration_s)
    mono, rate, fmt = _decode(data, max_duration_s)
    duration = len(mono) / rate
    peak = float(np.max(np.abs(mono))) if len(mono) else 0.0
    resampled = soxr.resample(mono, rate, CLIP_RATE) if rate != CLIP_RATE else mono
    resampled = np.asarray(resampled, dtype=np.float32)
    active = _activity(resampled)
    speech_s = float(np.count_nonzero(active)) * _FRAME_S
    if not np.any(active):
        raise ClipRejected("The clip is silent or almost silent; check your microphone and record again.")
    clipped = _clipped_fraction(mono, rate, active)
    if clipped > 0.01:
        raise ClipRejected(
            "The clip is distorted (clipped): turn the input volume down or move back from the "
            "microphone, and record again."
        )
    if speech_s < min_speech_s:
        raise ClipRejected(f"The clip has only {speech_s:.1f} s of speech; record at least {min_speech_s:g} s.")
    if speech_s > max_speech_s:
        raise ClipRejected(f"The clip has {speech_s:.1f} s of speech; keep it to at most {max_speech_s:g} s.")
    samples = _trim(resampled, active)
    return Clip(
        samples=samples,
        sample_rate=CLIP_RATE,
        duration_s=duration,
        speech_s=speech_s,
        peak=peak,
        clipped_fraction=clipped,
        source_format=fmt,
    )


def to_flac(clip: Clip) -> bytes:
    """The reference as stored: 16-bit FLAC at 16 kHz, at most 30 s."""
    samples = np.clip(clip.samples[: int(MAX_FLAC_S * clip.sample_rate)], -1.0, 1.0)
    out = io.BytesIO()
    sf.write(out, samples, clip.sample_rate, format="FLAC", subtype="PCM_16")
    return out.getvalue()


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


def _sniff(data: bytes) -> str | None:
    """The container the first bytes announce, or None: nothing else is handed to the decoder."""
    head = data[:12]
    if head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE":
        return "WAV"
    if head[:4] == b"fLaC":
        return "FLAC"
    if head[:4] == b"OggS":
        return "OGG"
    if head[:3] == b"ID3" or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "MP3"
    return None


def _declared_riff_seconds(data: bytes) -> float | None:
    """Duration a WAV/RF64 header promises, read before decoding; None when not stated."""
    if data[:4] not in (b"RIFF", b"RF64"):
        return None
    pos, rf64_data, byte_rate, data_size = 12, None, None, None
    end = min(len(data), 1 << 20)  # headers live at the start; never scan the whole file
    while pos + 8 <= end:
        cid = data[pos : pos + 4]
        (size,) = struct.unpack_from("<I", data, pos + 4)
        body = pos + 8
        if cid == b"ds64" and body + 16 <= len(data):
            (rf64_data,) = struct.unpack_from("<Q", data, body + 8)
        elif cid == b"fmt " and body + 16 <= len(data):
            _, _, _, byte_rate = struct.unpack_from("<HHII", data, body)
        elif cid == b"data":
            data_size = rf64_data if size == 0xFFFFFFFF and rf64_data is not None else size
            break
        pos = body + size + (size & 1)
    if data_size is None or not byte_rate:
        return None
    if data_size in (0, 0xFFFFFFFF, 0xFFFFFFFF - 8):  # written by a streaming encoder: size unknown
        return None
    declared = data_size / byte_rate
    actual = max(0, len(data) - (pos + 8)) / byte_rate
    # A header may promise more than the file holds (streaming writers such as espeak-ng put a
    # placeholder size there; a hostile file may claim gigabytes). Only the bytes present can be
    # decoded, and they are already under the size cap, so judge by those.
    return min(declared, actual)


def _check_declared(seconds: float, max_duration_s: float) -> None:
    if seconds > max_duration_s:
        raise ClipRejected(
            f"That recording is {_hms(seconds)} long; send a clip of at most {max_duration_s:g} s."
        )


def _hms(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "impossibly"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min {int(seconds % 60)} s"
    return f"{minutes // 60} h {minutes % 60} min"


def _decode(data: bytes, max_duration_s: float) -> tuple[np.ndarray, int, str]:
    """Decode to float32 mono at the file's rate, never more than max_duration_s (+1 block)."""
    parts: list[np.ndarray] = []
    total = 0
    try:
        with sf.SoundFile(io.BytesIO(data)) as f:
            fmt, rate, channels, frames = f.format, f.samplerate, f.channels, f.frames
            if fmt not in ALLOWED_FORMATS:
                raise ClipRejected(_NOT_AUDIO)
            if not 4_000 <= rate <= 192_000 or not 1 <= channels <= 8:
                raise ClipRejected(_NOT_AUDIO)
            if 0 < frames < (1 << 62):
                _check_declared(frames / rate, max_duration_s)
            cap = int(max_duration_s * rate)
            block = int(_BLOCK_S * rate)
            while True:
                chunk = f.read(block, dtype="float32", always_2d=True)
                if not len(chunk):
                    break
                parts.append(chunk.mean(axis=1) if channels > 1 else chunk[:, 0])
                total += len(chunk)
                if total > cap:
                    raise ClipRejected(
                        f"That recording is longer than {max_duration_s:g} s; send a shorter clip."
                    )
    except ClipRejected:
        raise
    except (sf.LibsndfileError, RuntimeError, ValueError, TypeError, EOFError, OSError) as exc:
        damaged = total > 0 or _looks_truncated(data)
        raise ClipRejected(_DAMAGED if damaged else _NOT_AUDIO) from exc
    mono = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    if not len(mono):
        raise ClipRejected(_DAMAGED)
    if fmt == "OGG" and _looks_truncated(data):
        raise ClipRejected(_DAMAGED)
    if 0 < frames < (1 << 62) and total < 0.9 * frames and frames - total > 0.5 * rate:
        raise ClipRejected(_DAMAGED)
    mono = np.nan_to_num(mono, nan=0.0, posinf=1.0, neginf=-1.0)
    return mono.astype(np.float32, copy=False), rate, fmt


def _looks_truncated(data: bytes) -> bool:
    """An Ogg stream whose last page is incomplete or lacks the end-of-stream flag."""
    if data[:4] != b"OggS":
        return False
    last = data.rfind(b"OggS")
    if last < 0 or last + 27 > len(data):
        return True
    header_type = data[last + 5]
    segments = data[last + 26]
    table_end = last + 27 + segments
    if table_end > len(data):
        return True
    body = sum(data[last + 27 : table_end])
    return not header_type & 0x04 or table_end + body > len(data)


def _frame_db(samples: np.ndarray) -> np.ndarray:
    n = int(_FRAME_S * CLIP_RATE)
    frames = len(samples) // n
    if frames == 0:
        return np.full(1, -120.0)
    x = samples[: frames * n].reshape(frames, n).astype(np.float64)
    rms = np.sqrt(np.mean(x * x, axis=1))
    return 20.0 * np.log10(np.maximum(rms, 1e-6))


def _activity(samples: np.ndarray) -> np.ndarray:
    """Speech-active 20 ms frames: loud relative to the clip's loud frames and above a floor."""
    db = _frame_db(samples)
    loud = float(np.percentile(db, 95))
    if loud < -55.0:
        return np.zeros(len(db), dtype=bool)
    active = db > max(-60.0, loud - 35.0)
    # close gaps shorter than 100 ms and drop blips shorter than 60 ms
    active = _close(active, 5)
    return _open(active, 3)


def _runs(mask: np.ndarray) -> list[tuple[int, int, bool]]:
    out, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            out.append((start, i, bool(mask[start])))
            start = i
    return out


def _close(mask: np.ndarray, gap: int) -> np.ndarray:
    mask = mask.copy()
    runs = _runs(mask)
    for k, (a, b, on) in enumerate(runs):
        if not on and 0 < k < len(runs) - 1 and b - a < gap:
            mask[a:b] = True
    return mask


def _open(mask: np.ndarray, blip: int) -> np.ndarray:
    mask = mask.copy()
    for a, b, on in _runs(mask):
        if on and b - a < blip:
            mask[a:b] = False
    return mask


def _trim(samples: np.ndarray, active: np.ndarray, keep_pause_s: float = 0.25) -> np.ndarray:
    """Cut leading/trailing silence and shorten pauses to keep_pause_s, with 50 ms margins."""
    n = int(_FRAME_S * CLIP_RATE)
    margin = int(0.05 * CLIP_RATE)
    keep = int(keep_pause_s * CLIP_RATE)
    pieces = []
    runs = [(a * n, b * n) for a, b, on in _runs(active) if on]
    for k, (a, b) in enumerate(runs):
        start = max(0, a - margin) if k == 0 else a
        end = min(len(samples), b + margin) if k == len(runs) - 1 else b
        pieces.append(samples[start:end])
        if k < len(runs) - 1:
            gap_end = runs[k + 1][0]
            pieces.append(samples[b : min(gap_end, b + keep)])
    return np.ascontiguousarray(np.concatenate(pieces), dtype=np.float32)


def _clipped_fraction(mono: np.ndarray, rate: int, active: np.ndarray) -> float:
    """Share of speech samples sitting in flat runs (>= 3 samples) at the peak level."""
    peak = float(np.max(np.abs(mono))) if len(mono) else 0.0
    if peak < 0.25:
        return 0.0
    near = np.abs(mono) >= 0.995 * peak
    run3 = near[:-2] & near[1:-1] & near[2:]
    flat = np.zeros_like(near)
    flat[:-2] |= run3
    flat[1:-1] |= run3
    flat[2:] |= run3
    speech_samples = max(1.0, np.count_nonzero(active) * _FRAME_S * rate)
    return float(np.count_nonzero(flat)) / speech_samples
