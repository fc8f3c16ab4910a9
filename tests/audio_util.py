"""Audio comparisons for tests: energy envelopes, alignment, spectral distance, utterance splitting."""

from __future__ import annotations

import io
import wave

import numpy as np

RATE = 48_000


def mono(pcm: bytes, channels: int = 2) -> np.ndarray:
    a = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
    return a.reshape(-1, channels).mean(axis=1) if channels > 1 else a


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) if len(x) else 0.0


def envelope(x: np.ndarray, hop: int = 480) -> np.ndarray:
    """10 ms RMS envelope in dB."""
    n = len(x) // hop
    frames = x[: n * hop].reshape(n, hop)
    return 20 * np.log10(np.sqrt((frames ** 2).mean(axis=1)) + 1e-5)


def log_spectrogram(x: np.ndarray, n_fft: int = 1024, hop: int = 480) -> np.ndarray:
    n = max(0, (len(x) - n_fft) // hop + 1)
    if n == 0:
        return np.zeros((0, n_fft // 2 + 1))
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n)[:, None]
    frames = x[idx] * np.hanning(n_fft)[None, :]
    return np.log(np.abs(np.fft.rfft(frames, axis=1)) + 1e-4)


def band_profile(x: np.ndarray) -> np.ndarray:
    """Mean log spectrum over voiced frames, in 40 bands: a coarse picture of the voice and the words."""
    spec = log_spectrogram(x)
    env = envelope(x)[: len(spec)]
    voiced = spec[env > env.max() - 35] if len(spec) else spec
    bands = np.array_split(voiced.mean(axis=0), 40)
    prof = np.array([b.mean() for b in bands])
    return prof - prof.mean()


def envelope_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Best normalized correlation of the two envelopes over shifts of up to 0.5 s, after length matching."""
    ea, eb = envelope(a), envelope(b)
    n = min(len(ea), len(eb))
    if n < 10:
        return 0.0
    best = -1.0
    for shift in range(-50, 51):
        x = ea[max(0, shift): n + min(0, shift)]
        y = eb[max(0, -shift): n - max(0, shift)] if shift >= 0 else eb[: n + shift]
        m = min(len(x), len(y))
        if m < 10:
            continue
        c = np.corrcoef(x[:m], y[:m])[0, 1]
        best = max(best, float(c))
    return best


def stretched_envelope_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Correlation of the two envelopes after stretching b's to a's length: robust to a different tempo
    (Piper samples its durations, so two renderings of one text differ by a few percent)."""
    ea, eb = envelope(a), envelope(b)
    if len(ea) < 10 or len(eb) < 10:
        return 0.0
    eb = np.interp(np.linspace(0, len(eb) - 1, len(ea)), np.arange(len(eb)), eb)
    return float(np.corrcoef(ea, eb)[0, 1])


def speech_frames(x: np.ndarray) -> np.ndarray:
    """What was said more than how loud: the voiced stretch of `x` (from the first to the last 10 ms frame within
    40 dB of its loudest) as 24 log-spectral bands up to 8.4 kHz a frame, each band's mean removed."""
    spec = log_spectrogram(x)[:, :180]
    env = envelope(x)[: len(spec)]
    on = np.nonzero(env > env.max() - 40)[0] if len(env) else env
    if len(on) == 0:
        return np.zeros((0, 24))
    spec = spec[on[0]: on[-1] + 1]
    bands = np.stack([b.mean(axis=1) for b in np.array_split(spec, 24, axis=1)], axis=1)
    return bands - bands.mean(axis=0)


def stretched_frames_correlation(fa: np.ndarray, fb: np.ndarray) -> float:
    """Correlation of two speech_frames after stretching fb's time axis to fa's length (another speed, Piper's
    sampling noise). Two renderings of one of bench/load's phrases: 0.69-0.96; two of its phrases: at most 0.53."""
    if len(fa) < 10 or len(fb) < 10:
        return 0.0
    at = np.linspace(0, len(fb) - 1, len(fa))
    fbs = np.stack([np.interp(at, np.arange(len(fb)), fb[:, k]) for k in range(fb.shape[1])], axis=1)
    return float(np.corrcoef(fa.ravel(), fbs.ravel())[0, 1])


def dominant_frequency(x: np.ndarray, rate: int = RATE) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spec) * rate / len(x))


def utterances(packets, gap_frames: int = 1) -> list[list]:
    """Split captured packets into utterances at runs of end-of-stream silence frames."""
    out: list[list] = []
    cur: list = []
    for p in packets:
        if p.silence:
            if cur:
                out.append(cur)
                cur = []
            continue
        cur.append(p)
    if cur:
        out.append(cur)
    return out


def assert_same_speech(heard: np.ndarray, reference: np.ndarray, other: np.ndarray | None = None) -> float:
    """`heard` is `reference` (a rendering of the same text by a steady engine, tests/e2e/conftest.py): as long
    within 5 % (Opus framing) and with the same loudness envelope; `other` (another text, or the original of a
    substituted one) correlates far less. Measured heard through the sandbox: Piper 0.97, eSpeak NG 0.89-0.94
    (its digital silence comes back from Opus as faint noise); another text 0.4-0.6. Returns the correlation."""
    assert abs(len(heard) - len(reference)) / len(reference) < 0.05, (len(heard), len(reference))
    corr = stretched_envelope_correlation(heard, reference)
    corr_other = stretched_envelope_correlation(heard, other) if other is not None else -1.0
    assert corr > 0.85 and corr > corr_other + 0.1, (corr, corr_other)
    return corr


def wav_bytes(signal: np.ndarray, rate: int = RATE) -> bytes:
    """A mono 16-bit WAV of `signal` (floats in -1..1), as a member's voice is given to the sandbox."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()


def aligned_correlation(heard: bytes, sent: bytes) -> float:
    """How alike two 48 kHz stereo s16le recordings are (left channels), `heard` shifted by the codec's delay."""
    h = np.frombuffer(heard, dtype="<i2").reshape(-1, 2)[:, 0].astype(np.float64)
    s = np.frombuffer(sent, dtype="<i2").reshape(-1, 2)[:, 0].astype(np.float64)
    lag = int(np.argmax(np.correlate(h[:20000], s[:16000], mode="valid")))   # Opus's look-ahead, a few ms
    n = min(len(s), len(h) - lag) - 4800
    return float(np.corrcoef(h[lag:lag + n], s[:n])[0, 1])
