"""The Kokoro-82M backend (the default): natural voices in English, Japanese, Mandarin, Spanish, French, Italian,
Portuguese and Hindi from one int8 ONNX model and its 54 voice packs, on the CPU."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.backends.cpu import WARM_UP_TEXT, usable_cores
from engine.backends.kokoro import assets as kokoro_assets
from engine.backends.kokoro import graph as graph
from engine.backends.kokoro import tuning as kokoro_tuning
from engine.backends.kokoro import voice as kokoro_voice
from engine.backends.kokoro.g2p import g2p_key, phonemize
from engine.backends.kokoro.norms import NormPools
from engine.backends.kokoro.settings import KokoroSettings
from engine.backends.kokoro.shape import Shape, ShapeStream
from engine.backends.kokoro.voice import KokoroStyle, StyleFit, Voiceprint
from engine.backends.kokoro.windows import HOP, WINDOW, Stitcher, rendered, windows
from engine.backends.runs import clause_runs
from engine.backends.sessions import new_session, run_cancellable
from engine.base import (
    BackendDefaults,
    BackendInfo,
    BackendUnavailable,
    CancelToken,
    EngineError,
    Progress,
    StockVoice,
    Voice,
)
from engine.languages import base
from engine.settings import EngineSettings

if TYPE_CHECKING:
    from engine.voices.profile import MatchProfile

log = logging.getLogger(__name__)


SAMPLE_RATE = 24_000
MAX_TOKENS = 510  # the model reads 512 tokens, a pad at each end; a voice pack has a style row per count
MIN_SPEED, MAX_SPEED = 0.5, 2.0
# The vocoder's windows (KokoroModel.run, windows.windows), in decoder frames of 12.5 ms. Its instance norms
# normalize each channel over what they see, so a window normalized by its own statistics sounds unlike the same audio
# vocoded whole: a 0.6 s first window raised PocketSphinx's word errors from 0.069 to 0.123 on five long sentences; 3 s
# windows cost 9 errors on four 6 s sentences (17 vs 8); 4 s windows (runs of up to 6 s whole) 1 in 11 sentences (20
# vs 19). So a run is vocoded in such windows until the voice's statistics in its language are learned
# (norms.py); then in windows from FIRST frames, each 1.5x the one before up to WINDOW, every one normalized by
# the learned statistics alone, so the first is heard after 0.8 s of the run is vocoded rather than all of it, and
# every window of a run is normalized alike (no seam where the normalization changes). Measured on 20 sentences of
# af_heart against the same runs vocoded whole (AMD EPYC, AVX2; PocketSphinx WER; resemblyzer similarity to the
# voice, the mean of the whole runs' embeddings; the largest log-mel flux at a seam over the whole run's there):
#   normalized by                                     WER     voice   seam flux
#   the whole run (not streamed)                      0.076   0.964   -
#   own weighted n / (n + 200), learned the rest      0.098   0.953   1.309   (shipped before; 1.05-1.16 on a Xeon)
#   the learned statistics alone                      0.061   0.946   1.158   (shipped)
#   own and what the run's earlier windows computed   0.092   0.953   1.193
#   learned alone in the first window, then own+200   0.089   -       1.422
# (earlier, on a Xeon and 14 sentences, the learned statistics alone moved the similarity to the voice's pack voiceprint
# from 0.930 to 0.880; here, against the voice's whole runs, 0.964 -> 0.946: the words are kept and the seams join.)
# Windows also bound the vocoder's memory (the engine after warm-up: 758 MB vocoding 150 characters whole, 557 MB in
# 4 s windows with the shared arena).
LEARNING_WINDOW = 320  # frames (4 s) of the windows that teach a voice's statistics (whole runs up to 6 s)
FIRST = 64  # frames (0.8 s) of the first window when the statistics are learned and other inferences run
FIRST_ALONE = 40  # ... and when none does (the first word sooner; the next window is made at the whole CPU's speed),
# twice, then growing 4/3 (ALONE_GROWTH), not 1.5x: a 60-frame second window, and windows growing 1.5x, took longer to
# make than what the windows before leave in hand plays at 1.5 audio seconds per second (a 2-core AVX2 host), so the
# player held a sentence's first chunk for the next windows (e2e bench's TTFA breakdown; docs/decisions/
# 2026-12-06-sentences-and-windows.md). Under load runs keep 1.5x: smaller windows there made first windows wait.
ALONE_REPEAT, ALONE_GROWTH = 2, 4 / 3
# Each run starts with ~0.35 s of silence (the model's duration for its leading pad token): it is cut to LEAD_S before
# the first 10 ms over SOUND_RMS, so the first word is heard that much sooner. Cut from the audio, not from the
# vocoder's input: vocoding the run without those frames saved 10% of its time but raised PocketSphinx's word errors
# on 60 sentences from 0.073 to 0.084-0.105 (the vocoder's normalization and its convolutions' reach see them).
LEAD_S, SOUND_RMS = 0.05, 1e-3
# A run ends with a longer silence than the model puts between two sentences inside one run (measured, whole runs,
# silence between 10 ms frames over SOUND_RMS: en 0.34-0.47 s inside a run against 0.42-0.46 s after a run's last
# sound plus the next's lead; ja 0.53-0.55 vs 0.67-0.70 plus; zh 0.11-0.13 vs 0.74-0.79 plus). So a run's end is cut
# to its language's pause inside a run less the next run's LEAD_S after its last sound (CLAUSE_PAUSE_S when a sentence
# over MAX_TOKENS goes on in another run), each language's the shortest measured inside a run, so that no pause
# between two runs is longer than the same sentences would have in one: bench/e2e.py's kokoro_sentence_pause_vs_one_run.
SENTENCE_PAUSE_S = {"en": 0.34, "ja": 0.5, "zh": 0.11}
OTHER_PAUSE_S = SENTENCE_PAUSE_S["en"]  # languages not measured: as English
CLAUSE_PAUSE_S = 0.2
# Kokoro reads at most MAX_TOKENS phonemes at once: a sentence longer than this many characters' worth (about as many
# phonemes in English; engine/segment.py's split_sentences) is cut at its last clause mark before it, and a run
# longer than MAX_TOKENS at its last clause mark (token_runs). The bound is the model's, set by memory: a run's
# features are made whole (the vocoder's windows do not grow with the run).
SENTENCE_CHARS = 400
FRAME_S = HOP / SAMPLE_RATE  # a decoder frame: 12.5 ms
PAD_MARGIN = 4  # decoder frames vocoded beyond where the leading and trailing pauses are cut (KokoroModel.sounding)
# What warming up speaks: a long run (the memory arena's size), then sentences unlike it and each other, about 13 s in
# all, from which the default voice's vocoder statistics are learned (norms.py: the variety pooled matters)
WARM_UP_SENTENCES = (
    WARM_UP_TEXT,
    "Could you tell me where the nearest train station is?",
    "We painted the whole kitchen yellow last weekend, and honestly, it looks wonderful!",
)
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


def token_runs(tokens: list[int], model: KokoroModel, limit: int = MAX_TOKENS) -> Iterator[list[int]]:
    """`tokens` in runs of at most `limit` (one for a sentence the engine cut): over it, cut after the last clause
    mark, at a space only when one clause alone is over it (engine/backends/runs.py)."""
    return clause_runs(tokens, limit, model.clauses, model.spaces)  # type: ignore[return-value]


class KokoroModel:
    """The model's sessions (its text-to-features part, its vocoder, the vocoder's phase; engine/backends/
    kokoro_graph.py), each shared by every worker (onnxruntime runs a session from several threads at once), the
    vocoder the host runs fastest (tuning.py), its phoneme vocabulary, the voice packs, each read on first
    use, and the vocoder's statistics learned per voice, language and pitch (norms.py). An inference that
    starts alone runs on every usable core (the first word soonest); one that starts beside another on the share of
    them the host's tuning chose (the most audio with all of them busy)."""

    def __init__(self, settings: KokoroSettings, at_once: int = 1) -> None:
        self.tuning = kokoro_tuning.tuning(settings.assets_dir, at_once)
        self.files = kokoro_assets.graph_paths(settings.assets_dir)
        self.vocoder = self.tuning.vocoder  # the vocoder file: float or integer convolutions
        self.packs = kokoro_assets.voice_packs(settings.assets_dir)
        cores = settings.intra_op_threads or usable_cores()
        self.threads = (cores, settings.intra_op_threads or self.tuning.threads)  # (alone, beside others)
        self.vocab: dict[str, int] = kokoro_assets.vocabulary()
        self.clauses = frozenset(self.vocab[c] for c in ",.;:!?—…" if c in self.vocab)
        self.spaces = frozenset(self.vocab[c] for c in " " if c in self.vocab)
        self._sessions: dict[tuple[str, int], Any] = {}
        self._styles: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._running = 0  # inferences running now
        self.norms = NormPools()

    def session(self, name: str, threads: int | None = None) -> Any:
        """The session of the part `name` with `threads` intra-op threads (default: the share beside others)."""
        key = (name, threads or self.threads[1])
        with self._lock:
            if key not in self._sessions:
                self._sessions[key] = new_session(str(self.files[name]), key[1], shared_arena=True,
                                                  options=self.tuning.options)
            return self._sessions[key]

    def idle(self) -> bool:
        """Whether no inference runs now."""
        with self._lock:
            return self._running == 0

    def _infer(self, name: str, feeds: dict, cancel: CancelToken | None) -> list:
        """One inference of the part `name`: on every core when none other runs, else on the tuned share."""
        with self._lock:
            alone = self._running == 0
            self._running += 1
        try:
            return run_cancellable(self.session(name, self.threads[0] if alone else self.threads[1]), feeds, cancel)
        finally:
            with self._lock:
                self._running -= 1

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
                 cancel: CancelToken | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The vocoder's input for one run of at most MAX_TOKENS tokens: decoder features [1, 512, n], F0 [1, n], and
        the decoder frames of each token, the pads at each end included [len(tokens) + 2]."""
        feeds = {"tokens": np.array([[0, *tokens, 0]], dtype=np.int64), "style": style,
                 "speed": np.array([speed], dtype=np.float32)}
        x, f0, durations = self._infer(graph.FEATURES, feeds, cancel)
        return x, f0, 2 * np.asarray(durations, dtype=np.int64).reshape(-1)

    def start_phases(self, f0: np.ndarray) -> np.ndarray:
        """The sine source's phase (turns, [1, n, 9]) accumulated up to each frame, as one whole run has it."""
        increments = run_cancellable(self.session(graph.PHASE, 1), {graph.F0: f0}, None)[0]
        return np.cumsum(increments.astype(np.float64), axis=1) % 1.0

    def vocode(self, x: np.ndarray, f0: np.ndarray, style: np.ndarray, lo: int, hi: int, phases: np.ndarray | None,
               cancel: CancelToken | None, norms: np.ndarray | None = None,
               own: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Audio of frames [lo, hi) (float32 mono, 24 kHz), the sine source starting where a whole run has it, its
        instance norms normalizing by `own` times their statistics over the window plus 1 - `own` times `norms`
        (NormPool.given; by their own alone without); and the statistics they computed (kokoro_graph.NORMS_OUT)."""
        start = (phases[:, lo - 1:lo, :].astype(np.float32) if lo > 0 and phases is not None
                 else np.zeros((1, 1, graph.HARMONICS), np.float32))
        shape = self._norms_shape()
        feeds = {graph.X: np.ascontiguousarray(x[:, :, lo:hi]), graph.F0: np.ascontiguousarray(f0[:, lo:hi]),
                 "style": style, graph.PHASE0: start,
                 graph.NORMS: np.zeros(shape, np.float32) if norms is None else norms,
                 graph.OWN: np.full(shape, 1.0 if norms is None else own, np.float32)}
        audio, computed = self._infer(self.vocoder, feeds, cancel)
        return np.asarray(audio, dtype=np.float32).reshape(-1), computed

    def sounding(self, tokens: list[int], frames: np.ndarray, n: int, pause_s: float) -> tuple[int, int]:
        """The frames of a run worth vocoding once its statistics are learned: from LEAD_S before its first token
        after the leading pad to `pause_s` after its last token that is not a pause (punctuation, a space), with
        PAD_MARGIN frames to spare each side (the pads' silence is cut from the audio anyway: vocoded normalized by
        their own statistics they had to be, to keep the words; by learned ones they need not)."""
        ends = np.cumsum(frames)
        sounding = [k for k, t in enumerate(tokens) if t not in self.clauses and t not in self.spaces]
        if not sounding:
            return 0, n
        first = max(0, int(ends[0]) - round(LEAD_S / FRAME_S) - PAD_MARGIN) // 4 * 4  # on the run's 10 ms grid
        last = int(ends[sounding[-1] + 1]) + round(pause_s / FRAME_S) + PAD_MARGIN
        return first, min(n, max(last, first + 1))

    @functools.cache  # noqa: B019 - one per model, which lives as long as the engine
    def _norms_shape(self) -> tuple[int, ...]:
        """NORMS's shape [1, S, 1], read from the vocoder session once."""
        return tuple(next(i.shape for i in self.session(self.vocoder).get_inputs() if i.name == graph.NORMS))

    def run(self, tokens: list[int], style: np.ndarray, speed: float, cancel: CancelToken | None,
            key: Hashable | None = None, shape: Shape | None = None,
            pause_s: float = OTHER_PAUSE_S, alone: bool = True) -> Iterator[tuple[np.ndarray, float]]:
        """Audio of one run of at most MAX_TOKENS tokens, float32 mono at 24 kHz, from LEAD_S before its first sound to
        `pause_s` less LEAD_S after its last (the pause before the next run's), one vocoder window per item
        (windows.windows): from FIRST frames (FIRST_ALONE when `alone`, the engine's own lately, and no other
        inference runs) once the statistics of `key` (voice, language, pitch) are learned,
        normalized by those alone, else from LEARNING_WINDOW frames, normalized by their own (which teach them).
        `shape` maps the F0 the vocoder is given and corrects the stitched audio as it comes (kokoro_shape.ShapeStream:
        a registered voice, a changed pitch).
        Each renders SIDE frames beyond its ends, its sine phase continued from where a whole run has it, and is
        stitched to the one before (kokoro_windows.Stitcher). The features are made once, in the first item. Each
        item is (audio, the audio seconds of the run's next window; 0 after its last)."""
        row = style[min(len(tokens), len(style) - 1)].reshape(1, 256).astype(np.float32)
        x, f0, frames = self.features(tokens, row, speed, cancel)
        if shape is not None:
            f0 = shape.f0(f0)
        n = x.shape[2]
        given = self.norms.given(key) if key is not None else None
        start, end = (0, n) if given is None else self.sounding(tokens, frames, n, pause_s)
        if given is None:  # normalized by their own statistics: long windows (short ones cost words)
            spans = windows(n, LEARNING_WINDOW, LEARNING_WINDOW)
        else:
            quiet = alone and self.idle()  # the engine its own lately, and no inference running now
            first, repeat, growth = (FIRST_ALONE, ALONE_REPEAT, ALONE_GROWTH) if quiet else (FIRST, 1, 1.5)
            spans = [(start + a, start + b) for a, b in windows(end - start, first, repeat=repeat, growth=growth)]
        phases = self.start_phases(f0) if len(spans) > 1 or start else None
        stitcher = Stitcher(end)
        corrector = ShapeStream(shape, f0) if shape is not None and shape.corrects else None
        for k, (a, b) in enumerate(spans):
            lo, hi = rendered(a, b, end)
            audio, computed = self.vocode(x, f0, row, lo, hi, phases, cancel, given, 0.0)
            if key is not None and given is None:
                self.norms.learn(key, computed, hi - lo)
            out = stitcher.add(audio, a, b)
            if corrector is not None:
                out = corrector.add(out, k == len(spans) - 1)
            if k == 0:
                out = from_first_sound(out)
            last = k == len(spans) - 1
            if last:
                out = to_last_sound(out, max(0.0, pause_s - LEAD_S))
            yield _limited(out), 0.0 if last else (spans[k + 1][1] - spans[k + 1][0]) * FRAME_S


def from_first_sound(audio: np.ndarray) -> np.ndarray:
    """`audio` from LEAD_S before its first 10 ms frame over SOUND_RMS (all of it when none is)."""
    loud = _loud_frames(audio)
    return audio[max(0, int(loud[0]) * SAMPLE_RATE // 100 - int(LEAD_S * SAMPLE_RATE)):] if len(loud) else audio


def to_last_sound(audio: np.ndarray, tail_s: float) -> np.ndarray:
    """`audio` up to `tail_s` after its last 10 ms frame over SOUND_RMS (all of it when none is)."""
    loud = _loud_frames(audio)
    return audio[:(int(loud[-1]) + 1) * SAMPLE_RATE // 100 + int(tail_s * SAMPLE_RATE)] if len(loud) else audio


def _loud_frames(audio: np.ndarray) -> np.ndarray:
    """Indices of the 10 ms frames of `audio` over SOUND_RMS."""
    frame = SAMPLE_RATE // 100
    n = len(audio) // frame
    return np.flatnonzero(np.sqrt(np.mean(np.square(audio[:n * frame].reshape(n, frame)), axis=1)) > SOUND_RMS)


def _limited(audio: np.ndarray) -> np.ndarray:
    """`audio` within full scale: a rare peak over it clipped (scaling a whole window down would step the level at its
    seams)."""
    return np.clip(audio, -1.0, 1.0)


class KokoroBackend(BackendDefaults):
    """Kokoro speaks `Voice.name` (a voice pack, or "default": the pack of `Voice.language`) in the language of
    `Voice.language` (else the pack's). A registered voice is a style fitted to its clip (kokoro/voice.py) and
    speaks every language; one registered before as Piper's voice-matching profile is spoken by Piper, through the
    engine's catalog (`reads`), until the bot has fitted it again."""

    def __init__(self, settings: KokoroSettings | None = None, workers: int = 1, at_once: int | None = None) -> None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError as exc:  # pragma: no cover - a dependency of the project
            raise BackendUnavailable("onnxruntime is not installed") from exc
        self.settings = settings or KokoroSettings()
        self.workers = max(1, workers)
        self.model = KokoroModel(self.settings, at_once or self.workers)  # inferences at once: the engine's slots
        missing = sorted(set(DEFAULT_VOICES.values()) - set(self.model.packs))
        if missing:
            raise BackendUnavailable(f"Kokoro's voice packs {', '.join(missing)} are missing: "
                                     f"{kokoro_assets.SETUP_HINT}.")
        self._lock = threading.Lock()
        self._prints: dict[str, Voiceprint] | None = None
        self._warmed = 0  # warm_up calls so far
        # a registered voice's rows (a few dozen kB) and correction by its blob
        self._styles: dict[bytes, tuple[np.ndarray, MatchProfile | None]] = {}
        self.style_packs = tuple(n for n in self.model.packs if pack_language(n) == "en")
        self.fit_stages = "clear"  # how far a registration's fit goes (kokoro_voice.STAGES; bench/voices.py)
        voices = tuple(self.model.packs)
        # what the packs' voiceprints depend on; the version adds the fit's (a new fit refits stored voices)
        self.model_stamp = (f"kokoro-82m v1.0 int8 {kokoro_assets.MODEL_SHA256[:16]} {graph.SOUND_VERSION}"
                            f"{' integer vocoder' if self.model.vocoder == graph.VOCODER_INT else ''}; "
                            f"{kokoro_assets.VOICES_PACKAGE}")
        self.info = BackendInfo(
            name="kokoro",
            version=f"{self.model_stamp}; registered voices: style fit {kokoro_voice.FIT_VERSION}",
            sample_rate=SAMPLE_RATE,
            clones=False,
            voices=voices,
            languages=tuple(DEFAULT_VOICES),
            stock=tuple(stock_voice(n) for n in voices if pack_language(n)),
            sentence_chars=SENTENCE_CHARS,
            steps=True,
            units=tuple((b - a) * HOP / SAMPLE_RATE for a, b in windows(10 * WINDOW, FIRST)[:6]),
            unit_growth=max(1.5, ALONE_GROWTH),  # (windows.windows' growth, loaded and alone)
            reads=("piper",),  # a voice registered under Piper speaks (through Piper) until it is fitted again
            features=(kokoro_voice.STYLE_KIND,),
        )

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> KokoroBackend:
        return cls(KokoroSettings.of(settings), workers=settings.workers, at_once=kokoro_tuning.concurrency(settings))

    def voice_languages(self, voice: Voice) -> tuple[str, ...]:
        """What `voice` speaks: a pack its own language, "default" and a fitted voice every language."""
        code = pack_language(voice.name) if voice.name in self.model.packs else ""
        return (code,) if code else self.info.languages

    @property
    def sessions_alive(self) -> int:
        """onnxruntime sessions in existence (one per part, made on first use)."""
        return self.model.sessions_alive

    # -- registered voices -----------------------------------------------------------------------------

    def voiceprints(self) -> dict[str, Voiceprint]:
        """Each English pack's voiceprint, read from the assets folder, else rendered once and stored there."""
        with self._lock:
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
        with self._lock:
            self._prints = prints
        return prints

    def render(self, text: str, rows: np.ndarray) -> np.ndarray:
        """English `text` in the style `rows`, whole, as 16 kHz float32 (what the speaker encoder reads)."""
        import soxr

        tokens = self.model.tokens(phonemize(text, g2p_key("en")))
        audio = np.concatenate([a for run in token_runs(tokens, self.model)
                                for a, _ in self.model.run(run, rows, 1.0, None)])
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
        with self._lock:
            hit = self._styles.get(blob)
        if hit is None:
            style = KokoroStyle.from_bytes(blob)
            unknown = set(style.weights) - set(self.model.packs)
            if unknown:
                raise kokoro_voice.StyleError("This voice was fitted to voice packs that are not installed; "
                                              "register it again.")
            hit = (style.rows(self.model.style), style.match)
            with self._lock:
                if len(self._styles) >= 64:
                    self._styles.pop(next(iter(self._styles)))
                self._styles[blob] = hit
        return hit

    # -- synthesis -----------------------------------------------------------------------------------------

    def pack_for(self, voice: Voice) -> str:
        if voice.name in self.model.packs:
            return voice.name
        if voice.name not in ("", "default"):
            raise EngineError(f"Unknown voice {voice.name[:40]!r}; see /voice list for the voices there are.")
        return DEFAULT_VOICES.get(base(voice.language), DEFAULT_VOICES["en"])

    def warm_up(self) -> None:
        """Create the sessions and speak WARM_UP_SENTENCES (each call starting at the next, so that workers warming up
        at once teach the default voice's statistics from different sentences): the memory arena grows to a long
        run's now, and af_heart's English statistics are learned."""
        with self._lock:
            first, self._warmed = self._warmed % len(WARM_UP_SENTENCES), self._warmed + 1
        for text in WARM_UP_SENTENCES[first:] + WARM_UP_SENTENCES[:first]:
            for _ in self.synthesize(text, Voice()):
                pass

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None,
                   alone: bool = True) -> Iterator[tuple[np.ndarray, float]]:
        """Yield float32 mono at 24 kHz, one vocoder window at a time with the next one's audio seconds
        (BackendInfo.steps: the engine gives each its own slot): the sentence in runs the model reads whole (one, but
        for a sentence over MAX_TOKENS phonemes). A registered voice and a changed pitch are shaped window by
        window (kokoro_shape.Shape); the vocoder's statistics are learned per voice, language and pitch. `alone`: no
        other stream used the engine lately (the smaller first windows of an idle engine; StreamingEngine's ALONE_S)."""
        if not MIN_SPEED <= voice.speed <= 4.0:
            raise EngineError(f"Speed must be between {MIN_SPEED} and 4.0.")
        match, who = None, ""  # who: what the vocoder's statistics are learned for (a pack or a fitted style)
        if voice.profile is not None:
            (rows, match), language = self.fitted(voice.profile.features), base(voice.language) or "en"
            british, who = False, voice.profile.features.hex()
        else:
            pack = self.pack_for(voice)
            rows, language = self.model.style(pack), base(voice.language) or pack_language(pack) or "en"
            british, who = pack.startswith("b"), pack
        pitch = float(voice.pitch or 0.0)
        shape = Shape(match, pitch) if match is not None or pitch else None
        key = (who, language, pitch)
        tokens = self.model.tokens(phonemize(text, g2p_key(language, british=british)))
        speed = min(max(voice.speed, MIN_SPEED), MAX_SPEED)
        runs = list(token_runs(tokens, self.model))
        for r, run in enumerate(runs):
            pause = SENTENCE_PAUSE_S.get(language, OTHER_PAUSE_S) if r == len(runs) - 1 else CLAUSE_PAUSE_S
            for audio, next_s in self.model.run(run, rows, speed, cancel, key, shape, pause / speed, alone):
                if cancel is not None and cancel.cancelled:
                    return
                yield audio, next_s or (FIRST * FRAME_S if r < len(runs) - 1 else 0.0)

    def close(self) -> None:
        """Nothing to release: the sessions go with the model."""
