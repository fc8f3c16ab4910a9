"""The Kokoro-82M backend (the default): natural voices in English, Japanese, Mandarin, Spanish, French, Italian,
Portuguese and Hindi from one int8 ONNX model and its 54 voice packs, on the CPU."""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from engine.base import BackendInfo, BackendUnavailable, CancelToken, EngineError, Progress, StockVoice, Voice
from engine.backends import kokoro_assets
from engine.backends import kokoro_graph as graph
from engine.backends import kokoro_voice
from engine.backends.kokoro_g2p import g2p_key, phonemize
from engine.backends.kokoro_norms import NormPools
from engine.backends.kokoro_voice import KokoroStyle, StyleFit, Voiceprint
from engine.backends.piper import WARM_UP_TEXT, intra_op_threads, word_runs
from engine.backends.sessions import new_session, run_cancellable
from engine.languages import base
from engine.settings import EngineSettings, KokoroSettings

if TYPE_CHECKING:
    from engine.voices.matching import MatchProfile

log = logging.getLogger(__name__)


SAMPLE_RATE = 24_000
MAX_TOKENS = 510  # the model reads 512 tokens, a pad at each end; a voice pack has a style row per count
MIN_SPEED, MAX_SPEED = 0.5, 2.0
# The vocoder's windows (KokoroModel.run, windows()), in decoder frames of 12.5 ms. Its instance norms normalize each
# channel over what they see, so a window normalized by its own statistics sounds unlike the same audio vocoded whole:
# a 0.6 s first window raised PocketSphinx's word errors from 0.069 to 0.123 on five long sentences; 3 s windows cost
# 9 errors on four 6 s sentences (17 vs 8); 4 s windows (runs of up to 6 s whole) 1 in 11 sentences (20 vs 19). So a
# run is vocoded in such windows until the voice's statistics in its language are learned (kokoro_norms.py); then in
# windows from FIRST frames, each 1.5x the one before up to WINDOW, so the first is heard after 0.8 s of the run is
# vocoded rather than all of it (the first chunk of six sentences: p50 202 ms, was ~580). Such a window normalizes by
# its own statistics weighted n / (n + PRIOR) (n its frames) and the learned ones by the rest. Measured on 14
# sentences against the same runs vocoded whole, for af_heart and am_michael (the voice learned from the warm-up):
#   own-weight prior     PocketSphinx WER         speaker similarity to the voice (resemblyzer; another voice ~0.66)
#   whole (before)       0.049, 0.076             0.930, 0.934
#   learned only         0.056, 0.076             0.880, 0.877
#   PRIOR 100            0.069, 0.090             0.922, 0.925
#   PRIOR 200            0.069, 0.069             0.915, 0.923
#   PRIOR 400            0.049, 0.069             0.905, 0.916
# (the learned statistics alone keep the words but move the voice: its 4-12 kHz band by 1.3-3 dB on average against
# the whole run's, by which sentences were learned.) Windows also bound the vocoder's memory (the engine after
# warm-up: 758 MB vocoding 150 characters whole, 557 MB in 4 s windows with the shared arena).
WINDOW = 320  # frames (4 s) per window, at most 1.5x (so none is short)
FIRST = 64  # frames (0.8 s, the leading pause included) of the first window when the statistics are learned
PRIOR = 200  # frames: the learned statistics' weight against a window's own
# frames a window renders beyond each end (the convolutions' reach): with learned statistics 8 joined as well as 16
# (worst seam 1.10 vs 1.09 of the whole run's flux) at 1.10x the whole runs' vocoding time instead of 1.23x
SIDE = 8
CROSSFADE = 2400  # samples (0.1 s) over which two windows are cross-faded (20 ms left a jump: 1.25x the whole run's)
RAMP = 12_000  # samples (0.5 s) over which a window's level eases from the one before's back to its own
# Each run starts with ~0.35 s of silence (the model's duration for its leading pad token): it is cut to LEAD_S before
# the first 10 ms over SOUND_RMS, so the first word is heard that much sooner and the pause between segments is ~0.45 s
# rather than ~0.8 s. Cut from the audio, not from the vocoder's input: vocoding the run without those frames saved
# 10% of its time but raised PocketSphinx's word errors on 60 sentences from 0.073 to 0.084-0.105 (the vocoder's
# normalization and its convolutions' reach see them).
LEAD_S, SOUND_RMS = 0.05, 1e-3
# the voice pack's first letter: the language it was made for, and its accent in words
PACK_LANGUAGES = {"a": "en", "b": "en", "e": "es", "f": "fr", "h": "hi", "i": "it", "j": "ja", "p": "pt", "z": "zh"}
ACCENTS = {"a": "American English", "b": "British English", "e": "Spanish", "f": "French", "h": "Hindi",
           "i": "Italian", "j": "Japanese", "p": "Brazilian Portuguese", "z": "Mandarin Chinese"}
GENDERS = {"f": "woman", "m": "man"}  # the pack's second letter
# the voice each language is spoken in when none is chosen (the packs rated best in Kokoro's own voice list)
DEFAULT_VOICES = {"en": "af_heart", "ja": "jf_alpha", "zh": "zf_xiaoxiao", "es": "ef_dora", "fr": "ff_siwis",
                  "it": "if_sara", "pt": "pf_dora", "hi": "hf_alpha"}
def pack_language(name: str) -> str:
    return PACK_LANGUAGES.get(name[:1], "")


def stock_voice(name: str) -> StockVoice:
    """How users see the pack `name` ("af_heart": Heart, American English, a woman)."""
    label = name.split("_", 1)[-1].replace("_", " ").title()
    return StockVoice(name=name, label=label, language=pack_language(name), accent=ACCENTS.get(name[:1], "?"),
                      gender=GENDERS.get(name[1:2], "voice"))


def token_runs(tokens: list[int], breaks: set[int], limit: int = MAX_TOKENS) -> Iterator[list[int]]:
    """`tokens` in runs of at most `limit`, each cut after the last break token (punctuation, space) near its end."""
    return word_runs(tokens, limit, frozenset(breaks))


class KokoroModel:
    """The model's sessions (its text-to-features part, its vocoder, the vocoder's phase; engine/backends/
    kokoro_graph.py), each one shared by every worker (onnxruntime runs a session from several threads at once),
    its phoneme vocabulary, the voice packs, each read on first use, and the vocoder's statistics learned per voice
    and language (kokoro_norms.py)."""

    def __init__(self, settings: KokoroSettings, threads: int) -> None:
        self.files = kokoro_assets.graph_paths(settings.assets_dir)
        self.packs = kokoro_assets.voice_packs(settings.assets_dir)
        self.threads = threads
        self.vocab: dict[str, int] = kokoro_assets.vocabulary()
        self.breaks = {self.vocab[c] for c in " ,.;:!?—…" if c in self.vocab}
        self._sessions: dict[str, object] = {}
        self._styles: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.norms = NormPools()

    def session(self, name: str) -> object:
        with self._lock:
            if name not in self._sessions:
                self._sessions[name] = new_session(str(self.files[name]), self.threads, shared_arena=True)
            return self._sessions[name]

    @property
    def sessions_alive(self) -> int:
        with self._lock:
            return len(self._sessions)

    def style(self, name: str) -> np.ndarray:
        """A voice pack's style rows [510, 256]."""
        with self._lock:
            rows = self._styles.get(name)
            if rows is None:
                rows = self._styles[name] = np.fromfile(self.packs[name], dtype=np.float32).reshape(-1, 256)
            return rows

    def tokens(self, phonemes: str) -> list[int]:
        return [self.vocab[c] for c in phonemes if c in self.vocab]

    def features(self, tokens: list[int], style: np.ndarray, speed: float,
                 cancel: CancelToken | None) -> tuple[np.ndarray, np.ndarray]:
        """The vocoder's input for one run of at most MAX_TOKENS tokens: decoder features [1, 512, n] and F0 [1, n]."""
        feeds = {"tokens": np.array([[0, *tokens, 0]], dtype=np.int64), "style": style,
                 "speed": np.array([speed], dtype=np.float32)}
        x, f0 = run_cancellable(self.session(graph.FEATURES), feeds, cancel)
        return x, f0

    def start_phases(self, f0: np.ndarray) -> np.ndarray:
        """The sine source's phase (turns, [1, n, 9]) accumulated up to each frame, as one whole run has it."""
        increments = run_cancellable(self.session(graph.PHASE), {graph.F0: f0}, None)[0]
        return np.cumsum(increments.astype(np.float64), axis=1) % 1.0

    def vocode(self, x: np.ndarray, f0: np.ndarray, style: np.ndarray, lo: int, hi: int, phases: np.ndarray | None,
               cancel: CancelToken | None, norms: np.ndarray | None = None,
               own: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Audio of frames [lo, hi) (float32 mono, 24 kHz), the sine source starting where a whole run has it, its
        instance norms normalizing by `own` times their statistics over the window plus 1 - `own` times `norms`
        (NormPool.given; by their own alone without); and the statistics they computed (kokoro_graph.NORMS_OUT)."""
        session = self.session(graph.VOCODER)
        start = phases[:, lo - 1:lo, :].astype(np.float32) if lo > 0 else np.zeros((1, 1, graph.HARMONICS), np.float32)
        shape = self._norms_shape(session)
        feeds = {graph.X: np.ascontiguousarray(x[:, :, lo:hi]), graph.F0: np.ascontiguousarray(f0[:, lo:hi]),
                 "style": style, graph.PHASE0: start,
                 graph.NORMS: np.zeros(shape, np.float32) if norms is None else norms,
                 graph.OWN: np.full(shape, 1.0 if norms is None else own, np.float32)}
        audio, computed = run_cancellable(session, feeds, cancel)
        return np.asarray(audio, dtype=np.float32).reshape(-1), computed

    @functools.cache  # noqa: B019 - one per model, which lives as long as the engine
    def _norms_shape(self, session) -> tuple[int, ...]:
        """NORMS's shape [1, S, 1], read from the vocoder session once."""
        return tuple(next(i.shape for i in session.get_inputs() if i.name == graph.NORMS))

    def run(self, tokens: list[int], style: np.ndarray, speed: float, cancel: CancelToken | None,
            key: tuple[str, str] | None = None) -> Iterator[np.ndarray]:
        """Audio of one run of at most MAX_TOKENS tokens, float32 mono at 24 kHz, from just before its first sound
        (from_first_sound), vocoded in windows (windows()): from FIRST frames once the statistics of `key` (voice,
        language) are learned, normalized partly by those (PRIOR), else from WINDOW frames, normalized by their own
        (which teach the statistics of `key`).
        Each renders SIDE frames beyond its ends, its sine phase continued from where a whole run has it, its level
        matched to the window before over the frames both rendered and eased back over RAMP, the two cross-faded
        over CROSSFADE. A window's audio is passed on as soon as it is made."""
        row = style[min(len(tokens), len(style) - 1)].reshape(1, 256).astype(np.float32)
        x, f0 = self.features(tokens, row, speed, cancel)
        n = x.shape[2]
        given = self.norms.given(key) if key is not None else None
        spans = windows(n, WINDOW if given is None else FIRST)
        phases = self.start_phases(f0) if len(spans) > 1 else None
        before: tuple[np.ndarray, int] | None = None  # the last window's audio and its first frame
        for k, (a, b) in enumerate(spans):
            lo = max(0, a - SIDE)
            hi = min(n, b + SIDE)
            audio, computed = self.vocode(x, f0, row, lo, hi, phases, cancel, given, (hi - lo) / (hi - lo + PRIOR))
            if key is not None and given is None:
                self.norms.learn(key, computed, hi - lo)
            start = a * graph.HOP - lo * graph.HOP  # where this window's own part begins in `audio`
            if before is not None:
                prev, prev_lo = before
                shared = slice((lo - prev_lo) * graph.HOP, len(prev))  # frames both windows rendered, in `prev`
                gain = float(np.clip(_rms(prev[shared]) / max(_rms(audio[:len(prev) - shared.start]), 1e-6), 0.5, 2.0))
                audio = audio * np.interp(np.arange(len(audio)) - start, [0, RAMP], [gain, 1.0]).astype(np.float32)
                fade = np.linspace(0.0, 1.0, CROSSFADE, dtype=np.float32)
                seam = (a - prev_lo) * graph.HOP
                mixed = prev[seam - CROSSFADE // 2:seam + CROSSFADE // 2] * (1 - fade)
                mixed += audio[start - CROSSFADE // 2:start + CROSSFADE // 2] * fade
                audio[start - CROSSFADE // 2:start + CROSSFADE // 2] = mixed
                start -= CROSSFADE // 2
            end = (b - lo) * graph.HOP - (CROSSFADE // 2 if k < len(spans) - 1 else 0)
            out = audio[start:end] if k < len(spans) - 1 else audio[start:(n - lo) * graph.HOP]
            yield _limited(from_first_sound(out) if k == 0 else out)
            before = (audio, lo)


def windows(n: int, first: int = WINDOW) -> list[tuple[int, int]]:
    """The frames [a, b) each vocoder window of an n-frame run contributes: the first `first` frames, each next 1.5x
    the one before up to WINDOW, the last up to 1.5x its size (so none is short); the whole run when it is at most
    1.5x `first`. They bound the vocoder's memory and let a sentence play while it is made."""
    cuts, size = [0], first
    while n - cuts[-1] > size * 3 // 2:
        cuts.append(cuts[-1] + size)
        size = min(WINDOW, size * 3 // 2)
    return list(zip(cuts, [*cuts[1:], n]))


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a, dtype=np.float64)))) if len(a) else 0.0


def from_first_sound(audio: np.ndarray) -> np.ndarray:
    """`audio` from LEAD_S before its first 10 ms frame over SOUND_RMS (all of it when none is)."""
    frame = SAMPLE_RATE // 100
    n = len(audio) // frame
    loud = np.flatnonzero(np.sqrt(np.mean(np.square(audio[:n * frame].reshape(n, frame)), axis=1)) > SOUND_RMS)
    return audio[max(0, int(loud[0]) * frame - int(LEAD_S * SAMPLE_RATE)):] if len(loud) else audio


def _limited(audio: np.ndarray) -> np.ndarray:
    peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
    return audio / peak if peak > 1.0 else audio


class KokoroBackend:
    """Kokoro speaks `Voice.name` (a voice pack, or "default": the pack of `Voice.language`) in the language of
    `Voice.language` (else the pack's). A registered voice is a style fitted to its clip (engine/backends/
    kokoro_voice.py) and speaks every language. A voice registered before (Piper's voice-matching profile) is
    still spoken by Piper, loaded on the first such voice, until the bot has fitted it again."""

    def __init__(self, settings: KokoroSettings | None = None, workers: int = 1, piper: EngineSettings | None = None) -> None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError as exc:  # pragma: no cover - a dependency of the project
            raise BackendUnavailable("onnxruntime is not installed") from exc
        self.settings = settings or KokoroSettings()
        self.workers = max(1, workers)
        self.model = KokoroModel(self.settings, intra_op_threads(self.settings, 1))
        missing = sorted(set(DEFAULT_VOICES.values()) - set(self.model.packs))
        if missing:
            raise BackendUnavailable(f"Kokoro's voice packs {', '.join(missing)} are missing: {kokoro_assets.SETUP_HINT}.")
        self._piper_settings = piper or EngineSettings()
        self._piper: object | None = None
        self._piper_lock = threading.Lock()
        self._prints: dict[str, Voiceprint] | None = None
        # a registered voice's rows (a few dozen kB) and correction by its blob
        self._styles: dict[bytes, tuple[np.ndarray, MatchProfile | None]] = {}
        self.style_packs = tuple(n for n in self.model.packs if pack_language(n) == "en")
        self.fit_stages = "clear"  # how far a registration's fit goes (kokoro_voice.STAGES; bench/voices.py)
        voices = tuple(self.model.packs)
        # what the packs' voiceprints depend on; the version adds the fit's (a new fit refits stored voices)
        self.model_stamp = (f"kokoro-82m v1.0 int8 {kokoro_assets.MODEL_SHA256[:16]} {graph.SOUND_VERSION}; "
                            f"{kokoro_assets.VOICES_PACKAGE}")
        self.info = BackendInfo(
            name="kokoro",
            version=f"{self.model_stamp}; registered voices: style fit {kokoro_voice.FIT_VERSION}",
            sample_rate=SAMPLE_RATE,
            clones=False,
            voices=voices,
            languages=tuple(DEFAULT_VOICES),
            stock=tuple(stock_voice(n) for n in voices if pack_language(n)),
        )

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> KokoroBackend:
        return cls(settings.kokoro, workers=settings.workers, piper=settings)

    def voice_languages(self, voice: Voice) -> tuple[str, ...]:
        """What `voice` speaks: a pack its own language, an earlier registered voice Piper's, "default" and a
        fitted voice every language."""
        if voice.profile is not None:
            return self.info.languages if KokoroStyle.is_style(voice.profile.features) else ("en",)
        code = pack_language(voice.name) if voice.name in self.model.packs else ""
        return (code,) if code else self.info.languages

    @property
    def sessions_alive(self) -> int:
        """onnxruntime sessions in existence: Kokoro's (one per part, made on first use) and the earlier
        registered voices' Piper's."""
        with self._piper_lock:
            piper = self._piper.sessions_alive if self._piper is not None else 0
        return self.model.sessions_alive + piper

    # -- registered voices -----------------------------------------------------------------------------

    def voiceprints(self) -> dict[str, Voiceprint]:
        """Each English pack's voiceprint, read from the assets folder, else rendered once and stored there."""
        with self._piper_lock:
            if self._prints is not None:
                return self._prints
        path = kokoro_assets.folder(self.settings.assets_dir) / kokoro_voice.EMBEDDINGS_FILE
        prints = kokoro_voice.load_voiceprints(path, self.model_stamp)
        if prints is None or set(prints) != set(self.style_packs):
            prints = {n: Voiceprint.of(self.render(kokoro_voice.CALIBRATION_TEXT, self.model.style(n)))
                      for n in self.style_packs}
            try:
                kokoro_voice.save_voiceprints(path, prints, self.model_stamp)
            except OSError as exc:  # a read-only install: they are made again by the next process
                log.warning("could not store Kokoro's pack voiceprints in %s: %s", path, exc)
        with self._piper_lock:
            self._prints = prints
        return prints

    def render(self, text: str, rows: np.ndarray) -> np.ndarray:
        """English `text` in the style `rows`, whole, as 16 kHz float32 (what the speaker encoder reads)."""
        import soxr

        tokens = self.model.tokens(phonemize(text, g2p_key("en")))
        audio = np.concatenate([a for run in token_runs(tokens, self.model.breaks)
                                for a in self.model.run(run, rows, 1.0, None)])
        return soxr.resample(audio, SAMPLE_RATE, kokoro_voice.RATE).astype(np.float32)

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None,
                         progress: Progress | None = None) -> bytes:
        """The clip's style (kokoro_voice.StyleFit): blends of the nearest packs, corrected, as a KokoroStyle."""
        import soxr

        audio16k = soxr.resample(np.asarray(clip, dtype=np.float32), sample_rate, kokoro_voice.RATE) \
            if sample_rate != kokoro_voice.RATE else np.asarray(clip, dtype=np.float32)
        prints = self.voiceprints()
        fit = StyleFit(Voiceprint.of(audio16k, reference_embedding), prints, self.model.style, self.render, progress,
                       stages=self.fit_stages, audio=audio16k)
        style = fit.run()
        log.info("fitted a Kokoro style in %.1f s over %d renders (cosine %.3f): %s", fit.report.seconds,
                 len(fit.report.tried), fit.report.score, style)
        return style.to_bytes()

    def fitted(self, blob: bytes) -> tuple[np.ndarray, MatchProfile | None]:
        """A fitted voice's style rows and its correction, made from its blob once (StyleError when damaged)."""
        with self._piper_lock:
            hit = self._styles.get(blob)
        if hit is None:
            style = KokoroStyle.from_bytes(blob)
            unknown = set(style.weights) - set(self.model.packs)
            if unknown:
                raise kokoro_voice.StyleError("This voice was fitted to voice packs that are not installed; "
                                              "register it again.")
            hit = (style.rows(self.model.style), style.match)
            with self._piper_lock:
                if len(self._styles) >= 64:
                    self._styles.pop(next(iter(self._styles)))
                self._styles[blob] = hit
        return hit

    @property
    def piper(self):
        """The Piper backend that speaks earlier registered voices (Piper's voice matching), made on first use."""
        with self._piper_lock:
            if self._piper is None:
                from engine.backends.piper import PiperBackend

                self._piper = PiperBackend(self._piper_settings.piper, workers=self.workers)
            return self._piper

    def _piper_voice(self, voice: Voice) -> Voice:
        profile = dataclasses.replace(voice.profile, backend="piper")
        return dataclasses.replace(voice, name="default", profile=profile)

    # -- synthesis -----------------------------------------------------------------------------------------

    def pack_for(self, voice: Voice) -> str:
        if voice.name in self.model.packs:
            return voice.name
        if voice.name not in ("", "default"):
            raise EngineError(f"Unknown voice {voice.name[:40]!r}; see /voice list for the voices there are.")
        return DEFAULT_VOICES.get(base(voice.language), DEFAULT_VOICES["en"])

    def warm_up(self) -> None:
        """Create the sessions and run Piper's WARM_UP_TEXT (one sentence as long as the engine's longest segment):
        the memory arena grows to a whole segment's now."""
        for _ in self.synthesize(WARM_UP_TEXT, Voice()):
            pass

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        """Yield float32 mono at 24 kHz: the segment in runs the model reads whole (one, for any segment the
        engine makes), each as its vocoder windows come, or Piper's audio for an earlier registered voice."""
        if not MIN_SPEED <= voice.speed <= 4.0:
            raise EngineError(f"Speed must be between {MIN_SPEED} and 4.0.")
        if voice.profile is not None and not KokoroStyle.is_style(voice.profile.features):
            yield from self._piper_speaks(text, voice, cancel)
            return
        match, key = None, None
        if voice.profile is not None:
            (rows, match), language = self.fitted(voice.profile.features), base(voice.language) or "en"
            british = False
        else:
            pack = self.pack_for(voice)
            rows, language = self.model.style(pack), base(voice.language) or pack_language(pack) or "en"
            british = pack.startswith("b")
            if not voice.pitch:  # a pack's statistics, learned in this language (PSOLA runs per window: kept long)
                key = (pack, language)
        tokens = self.model.tokens(phonemize(text, g2p_key(language, british=british)))
        speed = min(max(voice.speed, MIN_SPEED), MAX_SPEED)
        for run in token_runs(tokens, self.model.breaks):
            windows = self.model.run(run, rows, speed, cancel, key)
            if match is not None:  # corrected whole, as Piper's segments are: PSOLA and the filter across a
                windows = iter([np.concatenate(list(windows))])  # window's seam would click there
            for audio in windows:
                if cancel is not None and cancel.cancelled:
                    return
                if len(audio):
                    yield self._voiced(audio, voice, match)

    def _piper_speaks(self, text: str, voice: Voice, cancel: CancelToken | None) -> Iterator[np.ndarray]:
        import soxr

        rate = self.piper.info.sample_rate
        for audio in self.piper.synthesize(text, self._piper_voice(voice), cancel=cancel):
            yield soxr.resample(audio, rate, SAMPLE_RATE).astype(np.float32)

    def _voiced(self, audio: np.ndarray, voice: Voice, match: MatchProfile | None) -> np.ndarray:
        """The registered voice's correction and the user's pitch (semitones, TD-PSOLA as for Piper's voices)."""
        if match is None and voice.pitch == 0:
            return audio
        from engine.voices.matching import Transform, apply_transform

        transform = Transform.for_profile(match, float(voice.pitch or 0.0))
        return np.asarray(apply_transform(audio, SAMPLE_RATE, transform), dtype=np.float32)

    def close(self) -> None:
        with self._piper_lock:
            if self._piper is not None:
                self._piper.close()
                self._piper = None
