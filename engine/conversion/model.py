"""An operator's ONNX voice converter: its config, the linear spectrogram it reads, speaker embeddings, conversion."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from engine.audio import resample
from engine.backends.sessions import SessionPool, new_session, run_cancellable
from engine.base import BackendUnavailable, CancelToken, EngineError

# The ONNX boundary (docs/conversion.md): names of each graph's inputs and outputs.
ENCODER_INPUTS = ("spec",)  # float32 [1, filter_length // 2 + 1, frames] -> "se" [1, gin_channels, 1]
CONVERTER_INPUTS = ("spec", "spec_lengths", "src_se", "tgt_se", "tau")  # -> "audio" [1, 1, samples]


@dataclass(frozen=True)
class ConverterConfig:
    """The converter's `.onnx.json`: its audio rate, STFT, speaker-embedding size, tau and speaker encoder."""

    speaker_encoder: str  # file name of the speaker-embedding graph, beside the converter
    sampling_rate: int = 22_050
    filter_length: int = 1024
    hop_length: int = 256
    win_length: int = 1024
    gin_channels: int = 256
    tau: float = 0.3  # the posterior's sampling temperature (OpenVoice's convert default)

    @classmethod
    def read(cls, path: Path) -> ConverterConfig:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            casts = {"str": str, "int": int, "float": float}
            config = cls(**{f.name: casts[str(f.type)](raw[f.name]) for f in fields(cls) if f.name in raw})
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise BackendUnavailable(f"Voice converter config {path} is missing or invalid: {exc}") from exc
        if min(config.sampling_rate, config.filter_length, config.hop_length, config.gin_channels) <= 0 or \
                not 0 < config.win_length <= config.filter_length:
            raise BackendUnavailable(f"Voice converter config {path} has impossible values: {config}")
        return config

    @property
    def bins(self) -> int:
        return self.filter_length // 2 + 1


def linear_spectrogram(x: np.ndarray, config: ConverterConfig) -> np.ndarray:
    """Magnitude STFT [1, bins, frames] as OpenVoice computes it: reflect-padded by (n_fft - hop) / 2 each side,
    uncentred frames, a periodic Hann window centred in n_fft, sqrt(re² + im² + 1e-6)."""
    n_fft, hop, win = config.filter_length, config.hop_length, config.win_length
    pad = (n_fft - hop) // 2
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if len(x) <= pad or len(x) + 2 * pad < n_fft:
        return np.zeros((1, config.bins, 0), dtype=np.float32)
    x = np.pad(x, (pad, pad), mode="reflect")
    window = np.zeros(n_fft)
    left = (n_fft - win) // 2
    window[left:left + win] = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(win) / win)
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop]
    spectrum = np.fft.rfft(frames * window, axis=-1)
    magnitude = np.sqrt(spectrum.real ** 2 + spectrum.imag ** 2 + 1e-6)
    return np.ascontiguousarray(magnitude.T[None], dtype=np.float32)


def _check_inputs(session: object, wanted: tuple[str, ...], path: Path) -> None:
    names = tuple(i.name for i in session.get_inputs())  # type: ignore[attr-defined]
    if sorted(names) != sorted(wanted):
        raise BackendUnavailable(
            f"{path} is not a voice converter graph this engine reads: its inputs are {', '.join(names)}; "
            f"expected {', '.join(wanted)} (docs/conversion.md)."
        )


class Converter:
    """The two graphs of an exported converter: the speaker encoder (one session, used at load and at
    registration) and the converter (a pool of `workers` sessions, one lent per conversion)."""

    def __init__(self, path: str, intra_op_threads: int, workers: int) -> None:
        self.path = Path(path).expanduser().resolve()
        if not self.path.is_file():
            raise BackendUnavailable(f"engine.conversion.model: no voice converter at {self.path}.")
        self.config = ConverterConfig.read(Path(f"{self.path}.json"))
        encoder_path = self.path.parent / self.config.speaker_encoder
        if not encoder_path.is_file():
            raise BackendUnavailable(f"The voice converter's speaker encoder {encoder_path} (its .onnx.json names it) "
                                     "is missing.")
        digest = hashlib.sha256()
        try:
            for part in (self.path, encoder_path):
                with part.open("rb") as f:
                    digest.update(hashlib.file_digest(f, "sha256").digest())
            # sessions read the files themselves: the converter's weights (~130 MB for OpenVoice v2) are not
            # also kept in this process's memory
            self._encoder = new_session(str(encoder_path), intra_op_threads)
            self._sessions: SessionPool[object] = SessionPool(lambda: new_session(str(self.path), intra_op_threads),
                                                              workers)
            with self._sessions.lease() as session:
                _check_inputs(session, CONVERTER_INPUTS, self.path)
        except BackendUnavailable:
            raise
        except Exception as exc:  # onnxruntime's own errors: a damaged or foreign file
            raise BackendUnavailable(f"The voice converter {self.path} does not load: {exc}") from exc
        _check_inputs(self._encoder, ENCODER_INPUTS, encoder_path)
        self._encoder_lock = threading.Lock()
        self.sha256 = digest.hexdigest()

    @property
    def version(self) -> str:
        """Part of the backend version: stored speaker embeddings are derived again when the model changes."""
        return f"converter {self.path.name} {self.sha256[:16]}"

    def spectrogram(self, audio: np.ndarray, rate: int) -> np.ndarray:
        return linear_spectrogram(resample(audio, rate, self.config.sampling_rate), self.config)

    def embed(self, audio: np.ndarray, rate: int) -> np.ndarray:
        """The speaker embedding of `audio` (float32 mono at `rate`), a vector of gin_channels."""
        spec = self.spectrogram(audio, rate)
        if spec.shape[-1] == 0:
            raise EngineError("The clip is too short to take its speaker's voice from.")
        with self._encoder_lock:
            se = self._encoder.run(None, {"spec": spec})[0]
        return self.speaker(np.asarray(se, dtype="<f4").tobytes())

    def speaker(self, blob: bytes) -> np.ndarray:
        """A stored speaker embedding (gin_channels little-endian float32) read back."""
        se = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        if len(se) != self.config.gin_channels or not np.all(np.isfinite(se)):
            raise EngineError("This voice's converter features are damaged; register the voice again.")
        return se

    def convert(self, audio: np.ndarray, rate: int, source: np.ndarray, target: np.ndarray,
                cancel: CancelToken | None = None) -> np.ndarray:
        """`audio` (float32 mono at `rate`) spoken by `source` converted to `target`'s voice, at `rate`."""
        spec = self.spectrogram(audio, rate)
        frames = spec.shape[-1]
        if frames == 0:
            return np.asarray(audio, dtype=np.float32)  # a few milliseconds: nothing to convert
        feeds = {
            "spec": spec,
            "spec_lengths": np.array([frames], dtype=np.int64),
            "src_se": source.reshape(1, -1, 1).astype(np.float32),
            "tgt_se": target.reshape(1, -1, 1).astype(np.float32),
            "tau": np.array([self.config.tau], dtype=np.float32),
        }
        with self._sessions.lease() as session:
            out = run_cancellable(session, feeds, cancel)[0]
        return resample(np.asarray(out, dtype=np.float32).reshape(-1), self.config.sampling_rate, rate)

    def close(self) -> None:
        self._sessions.close()
