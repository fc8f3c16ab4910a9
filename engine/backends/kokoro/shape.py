"""A registered voice's correction or a changed pitch on Kokoro, window by window: the run's F0 mapped before the
vocoder (the vocoder makes the new pitch itself) and each window's envelope corrected by the F0 it was given."""

from __future__ import annotations

import math

import numpy as np

from engine.backends.kokoro.windows import HOP

VOICED_HZ = 10.0  # the vocoder's sine source is voiced above this F0 (its SineGen's threshold)
FRAME_S = 0.01  # the envelope correction's frames (engine/voices/transform.py's FRAME_PERIOD_MS)
RATE = 24_000


class Shape:
    """What a registered voice's `clear` correction (engine/voices/transform.py: pitch statistics, formant warp,
    envelope statistics) and the user's pitch (semitones) do to a Kokoro run, without a pitch tracker or PSOLA: the
    F0 the vocoder is given is mapped in the log domain, and each window's audio is corrected by its envelope read at
    that F0 (WORLD's cheaptrick), so the frames two windows share get the same correction on both sides of a seam."""

    def __init__(self, match: object | None, semitones: float = 0.0) -> None:
        from engine.voices.transform import Transform

        self.transform = Transform.for_profile(match, float(semitones))  # type: ignore[arg-type]
        t = self.transform
        self.corrects = t.warp != 1.0 or t.env_strength > 0.0

    def f0(self, f0: np.ndarray) -> np.ndarray:
        """The run's F0 (Hz, [1, n]) mapped: voiced frames standardized to the voice's source statistics, rescaled
        to its target's and shifted by the pitch; unvoiced ones kept (they stay unvoiced, voiced ones stay voiced)."""
        t = self.transform
        out = np.array(f0, dtype=np.float32)
        voiced = out > VOICED_HZ
        lf0 = np.log(out[voiced].astype(np.float64))
        if t.map_stats:
            lf0 = (lf0 - t.src_mean) / max(t.src_std, 1e-3) * t.dst_std + t.dst_mean
        lf0 += t.shift_semitones * math.log(2.0) / 12.0
        out[voiced] = np.maximum(np.exp(lf0), VOICED_HZ * 1.5)
        return out

    def correct(self, audio: np.ndarray, f0: np.ndarray, start: int = 0) -> np.ndarray:
        """`audio` (24 kHz, from sample `start` of its run) corrected by its envelope read at `f0` (Hz per decoder
        frame of the whole run: what the vocoder was given), at its own level."""
        if not self.corrects or len(audio) < RATE // 20:
            return audio
        import pyworld

        from engine.voices import spectral
        from engine.voices.transform import Analysis, correction_db, match_level

        x = np.asarray(audio, dtype=np.float64)
        times = np.arange(int(len(x) / RATE / FRAME_S) + 1) * FRAME_S
        frames = np.asarray(f0, dtype=np.float64).reshape(-1)
        at = np.minimum(((start + times * RATE) / HOP).astype(np.int64), len(frames) - 1)  # each one's decoder frame
        centres = ((np.arange(len(frames)) + 0.5) * HOP - start) / RATE
        track = np.where(frames[at] > VOICED_HZ, np.interp(times, centres, frames), 0.0)
        sp = pyworld.cheaptrick(x, track, times, RATE)
        analysis = Analysis(x=x, f0=track, sp=sp, sr=RATE, rms=float(np.sqrt(np.mean(x * x))))
        gain = correction_db(analysis, self.transform)
        if gain is None:
            return audio
        y = spectral.apply_gain(x, RATE, gain, FRAME_S)
        return match_level(y, analysis.rms)


class ShapeStream:
    """One run's stitched audio corrected as its windows come (Shape.correct), as the whole run would be: each piece
    is corrected with CONTEXT samples of the audio before it, and its last HOLD samples wait for the next piece, so
    every sample is corrected with audio on both sides; two corrections of the same samples are cross-faded."""

    CONTEXT = 2400  # samples (0.1 s) before a piece that its correction reads (the envelope's analysis windows)
    HOLD = 1200  # samples (50 ms) at a piece's end held back until the next piece gives them context
    FADE = 240  # samples (10 ms) over which a piece's correction takes over from the one before

    def __init__(self, shape: Shape, f0: np.ndarray) -> None:
        self.shape = shape
        self.f0 = np.asarray(f0).reshape(-1)  # the run's F0 per decoder frame, as the vocoder was given it
        self._raw = np.zeros(0, np.float32)  # uncorrected audio from run sample self._at
        self._at = 0
        self._emitted = 0  # the run's samples given out so far
        self._ahead = np.zeros(0, np.float32)  # the last correction of the FADE samples after those

    def add(self, piece: np.ndarray, last: bool) -> np.ndarray:
        """The corrected audio from where the last call ended: up to HOLD before the piece's end (its end if `last`)."""
        raw = np.concatenate([self._raw, piece])
        corrected = self.shape.correct(raw, self.f0, self._at)
        end = self._at + len(raw) - (0 if last else min(self.HOLD, len(raw)))
        out = np.array(corrected[self._emitted - self._at:end - self._at], dtype=np.float32)
        n = min(len(self._ahead), len(out))
        if n:
            fade = np.linspace(0.0, 1.0, n, dtype=np.float32)
            out[:n] = self._ahead[:n] * (1 - fade) + out[:n] * fade
        self._ahead = np.asarray(corrected[end - self._at:end - self._at + self.FADE], dtype=np.float32)
        self._emitted = end
        keep = max(0, len(raw) - self.HOLD - self.CONTEXT)
        self._raw, self._at = raw[keep:], self._at + keep
        return out
