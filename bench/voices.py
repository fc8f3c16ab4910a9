"""Voice matching bench: similarity gain over the default voice, registration time and matching cost.

Reference speakers are voices the default Piper model did not produce: Debian's festival voices
(kal and ked, American male diphone voices; slt, an American female HTS voice) and espeak-ng
voice variants at several pitches. Install them with

    apt-get install espeak-ng festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts

(the bench runs that itself when it is root and they are missing). For each speaker, a ~10 s clip of
FIT_TEXT is registered; the default voice and the matched voice then speak EVAL_TEXT, which the fit
never saw, and both are compared (Resemblyzer cosine) with the same speaker saying EVAL_TEXT.

    python bench/voices.py [--speakers N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import embedding  # noqa: E402
from engine.base import Voice  # noqa: E402
from engine.piper import PiperBackend  # noqa: E402
from engine.registration import register_clip, synthesize_default  # noqa: E402

FIT_TEXT = (
    "Hello there, this is a short recording of my own voice for the bot. I am reading a few plain "
    "sentences at a steady pace, so that it can learn how I sound when I talk to my friends."
)
EVAL_TEXT = (
    "Please call Stella and ask her to bring these things with her from the store: six spoons of "
    "fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob."
)
RTF_TEXTS = (
    "The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun.",
    "We will meet at the station at half past seven, unless the train is late again.",
)
APT_PACKAGES = ["espeak-ng", "festival", "festvox-kallpc16k", "festvox-kdlpc16k", "festvox-us-slt-hts"]

# (name, kind, voice, extra args)
SPEAKERS = [
    ("festival kal (m)", "festival", "kal_diphone", []),
    ("festival ked (m)", "festival", "ked_diphone", []),
    ("festival slt (f)", "festival", "cmu_us_slt_arctic_hts", []),
    ("espeak en-us+m3 (m)", "espeak", "en-us+m3", ["-p", "40"]),
    ("espeak en+m7 low (m)", "espeak", "en+m7", ["-p", "25"]),
    ("espeak en-gb+m1 (m)", "espeak", "en-gb+m1", ["-p", "55"]),
    ("espeak en+f2 (f)", "espeak", "en+f2", ["-p", "50"]),
    ("espeak en+f4 high (f)", "espeak", "en+f4", ["-p", "75"]),
    ("espeak en-us+f3 (f)", "espeak", "en-us+f3", ["-p", "60"]),
]

GOAL_GAIN = 0.08
GOAL_REGISTER_S = 10.0
GOAL_RTF_EXTRA = 0.15


def ensure_voices() -> None:
    missing = [p for p, exe in (("espeak-ng", "espeak-ng"), ("festival", "text2wave")) if shutil.which(exe) is None]
    have_slt = Path("/usr/share/festival/voices/us/cmu_us_slt_arctic_hts").exists()
    if not missing and have_slt:
        return
    if os.geteuid() != 0:
        sys.exit(f"reference voices missing; as root run: apt-get install {' '.join(APT_PACKAGES)}")
    print("installing reference voices:", " ".join(APT_PACKAGES), file=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "-qq", *APT_PACKAGES], check=True, stdout=subprocess.DEVNULL)


def speak(kind: str, voice: str, extra: list[str], text: str, path: Path) -> tuple[np.ndarray, int]:
    if kind == "festival":
        subprocess.run(
            ["text2wave", "-eval", f"(voice_{voice})", "-o", str(path)],
            input=text.encode(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
        )
    else:
        subprocess.run(["espeak-ng", "-v", voice, *extra, "-s", "150", "-w", str(path), text], check=True, timeout=60)
    audio, sr = sf.read(path, dtype="float32", always_2d=True)
    return audio.mean(axis=1), sr


def embed_at(audio: np.ndarray, sr: int) -> np.ndarray:
    return embedding.embed(soxr.resample(audio, sr, 16_000) if sr != 16_000 else audio)


def rtf(backend: PiperBackend, voice, repeats: int = 2) -> float:
    spent = spoken = 0.0
    for _ in range(repeats):
        for text in RTF_TEXTS:
            start = time.perf_counter()
            audio = np.concatenate(list(backend.synthesize(text, voice)))
            spent += time.perf_counter() - start
            spoken += len(audio) / backend.info.sample_rate
    return spent / spoken


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speakers", type=int, default=len(SPEAKERS), help="how many reference speakers (>= 8)")
    args = parser.parse_args()
    ensure_voices()
    backend = PiperBackend(workers=1)
    backend.warm_up()
    default_eval, sr = synthesize_default(backend, EVAL_TEXT)
    default_emb = embed_at(default_eval, sr)

    rows, reg_times, cold = [], [], None
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind, voice, extra in SPEAKERS[: args.speakers]:
            fit, fit_sr = speak(kind, voice, extra, FIT_TEXT, Path(tmp) / "fit.wav")
            ref_eval, ref_sr = speak(kind, voice, extra, EVAL_TEXT, Path(tmp) / "eval.wav")
            buf = Path(tmp) / "clip.wav"
            sf.write(buf, fit, fit_sr, subtype="PCM_16")
            data = buf.read_bytes()
            start = time.perf_counter()
            reg = register_clip(data, FIT_TEXT, [backend])
            took = time.perf_counter() - start
            if cold is None:
                cold = took  # includes analysing the default voice once per process
            else:
                reg_times.append((took, len(fit) / fit_sr))
            matched = np.concatenate(list(backend.synthesize(EVAL_TEXT, reg.voice(backend.info))))
            target = embed_at(ref_eval, ref_sr)
            s_default = embedding.similarity(default_emb, target)
            s_matched = embedding.similarity(embed_at(matched, sr), target)
            p = reg.profile
            rows.append((name, s_default, s_matched, p.target_f0_hz, p.warp, len(fit) / fit_sr))
            print(
                f"  {name:24s} clip {len(fit) / fit_sr:4.1f} s  f0 {p.target_f0_hz:5.0f} Hz  warp {p.warp:.2f}  "
                f"default {s_default:.3f}  matched {s_matched:.3f}  gain {s_matched - s_default:+.3f}",
                flush=True,
            )
        last_voice = reg.voice(backend.info)

    gains = np.array([m - d for _, d, m, *_ in rows])
    mean_gain = float(gains.mean())
    reg10 = float(np.mean([t for t, _ in reg_times])) if reg_times else float("nan")
    clip_s = float(np.mean([d for _, d in reg_times])) if reg_times else float("nan")
    rtf_plain = rtf(backend, Voice())
    rtf_matched = rtf(backend, last_voice)
    extra = rtf_matched - rtf_plain
    print(f"speakers: {len(rows)} (default voice: {backend.model.name})")
    print(
        f"similarity_gain: {mean_gain:+.3f} (goal >= +{GOAL_GAIN:.2f}; min {gains.min():+.3f}, "
        f"{int((gains > 0).sum())}/{len(gains)} improved) {verdict(mean_gain >= GOAL_GAIN)}"
    )
    print(
        f"registration_10s_clip: {reg10:.1f} s (goal <= {GOAL_REGISTER_S:.0f} s; clips {clip_s:.1f} s on average, "
        f"warm process; the first one, "
        f"with the one-off default-voice analysis: {cold:.1f} s) {verdict(reg10 <= GOAL_REGISTER_S)}"
    )
    print(f"rtf_default: {rtf_plain:.3f}")
    print(f"rtf_matched: {rtf_matched:.3f}")
    print(f"rtf_extra: {extra:+.3f} (goal <= {GOAL_RTF_EXTRA:.2f}) {verdict(extra <= GOAL_RTF_EXTRA)}")
    backend.close()
    return 0 if mean_gain >= GOAL_GAIN and reg10 <= GOAL_REGISTER_S and extra <= GOAL_RTF_EXTRA else 1


if __name__ == "__main__":
    sys.exit(main())
