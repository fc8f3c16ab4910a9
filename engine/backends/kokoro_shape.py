"""A registered voice's correction or a changed pitch on Kokoro, window by window: the run's F0 mapped before the
vocoder (the vocoder makes the new pitch itself) and each window's envelope corrected by the F0 it was given."""

from __future__ import annotations

import math

import numpy as np

from engine.backends.kokoro_windows import HOP

VOICED_HZ = 10.0  # the vocoder's sine source is voiced above this F0 (its SineGen's threshold)
FRAME_S = 0.01  # the envelope correction's frames (engine/voices/matching.py's FRAME_PERIOD_MS)
RATE = 24_000


class Shape:
    """What a registered voice's `clear` correction (engine/voices/matching.py: pitch statistics, formant warp,
    envelope statistics) and the user's pitch (semitones) do to a Kokoro run, without a pitch tracker or PSOLA: the
    F0 the vocoder is given is mapped in the log domain, and each window's audio is corrected by its envelope read at
    that F0 (WORLD's cheaptrick), so the frames two windows share get the same correction on both sides of a seam."""

    def __init__(self, match: object | None, semitones: float = 0.0) -> None:
        from engine.voices.matching import Transform

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

    def correct(self, audio: np.ndarray, f0: np.ndarray) -> np.ndarray:
        """A window's audio (24 kHz, from a decoder frame) corrected by its envelope read at `f0` (Hz per decoder
        frame of the window: what the vocoder was given), at the window's own level."""
        if not self.corrects or len(audio) < RATE // 20:
            return audio
        import pyworld

        from engine.voices import matching, spectral

        x = np.asarray(audio, dtype=np.float64)
        times = np.arange(int(len(x) / RATE / FRAME_S) + 1) * FRAME_S
        frames = np.asarray(f0, dtype=np.float64).reshape(-1)
        at = np.minimum((times * RATE / HOP).astype(np.int64), len(frames) - 1)  # the decoder frame each is in
        centres = (np.arange(len(frames)) + 0.5) * HOP / RATE
        track = np.where(frames[at] > VOICED_HZ, np.interp(times, centres, frames), 0.0)
        sp = pyworld.cheaptrick(x, track, times, RATE)
        analysis = matching.Analysis(x=x, f0=track, sp=sp, sr=RATE, rms=float(np.sqrt(np.mean(x * x))))
        gain = matching.correction_db(analysis, self.transform)
        if gain is None:
            return audio
        y = spectral.apply_gain(x, RATE, gain, FRAME_S)
        return matching.match_level(y, analysis.rms)
