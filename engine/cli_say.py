"""`python -m engine say TEXT --out FILE.wav`: what the bot would play, written as a 48 kHz stereo WAV."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import wave
from dataclasses import replace
from pathlib import Path

from engine.base import DISCORD_CHANNELS, DISCORD_RATE, EngineError, Voice
from engine.settings import EngineSettings, PiperSettings


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """Options that pick and tune the backend; shared by subcommands that build an engine."""
    p.add_argument("--backend", default="piper", help="piper (default), cosyvoice2 or remote")
    p.add_argument("--model", default="", help="a Piper .onnx voice (default: the bundled en_US-joe-medium)")
    p.add_argument("--max-chars", type=int, default=EngineSettings.max_text_chars, help="longest text accepted")


def engine_settings(args: argparse.Namespace, **overrides: object) -> EngineSettings:
    settings = EngineSettings(backend=args.backend, max_text_chars=args.max_chars, piper=PiperSettings(model=args.model))
    return replace(settings, **overrides)  # type: ignore[arg-type]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", metavar="TEXT", help='the text to speak ("-" reads standard input)')
    p.add_argument("--out", required=True, metavar="FILE.wav", help="where to write the WAV")
    p.add_argument("--voice", default="default", metavar="NAME", help="a voice name the backend offers")
    p.add_argument("--speaker-id", type=int, default=None, help="speaker of a multi-speaker Piper model")
    p.add_argument("--speed", type=float, default=1.0, metavar="X", help="speaking rate, >1 is faster (0.25-4)")
    p.add_argument("--pitch", type=float, default=0.0, help="pitch shift in semitones")
    add_engine_arguments(p)


def write_wav(path: Path, pcm: bytes, rate: int = DISCORD_RATE, channels: int = DISCORD_CHANNELS) -> None:
    """Write atomically: a half-written file never replaces a good one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".say-", suffix=".wav", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f, wave.open(f, "wb") as w:
            w.setnchannels(channels)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(pcm)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def _say(args: argparse.Namespace, text: str) -> bytes:
    from engine.factory import build_engine

    engine = build_engine(engine_settings(args, workers=1, max_concurrency=1))
    try:
        voice = Voice(name=args.voice, speed=args.speed, pitch=args.pitch, speaker_id=args.speaker_id)
        return await engine.synthesize_all(text, voice, key="cli")
    finally:
        await engine.close()


def run(args: argparse.Namespace, say=None, what: str = f"{DISCORD_RATE} Hz stereo") -> int:
    """Check the options, synthesize with `say` (default: the configured voice) and write the WAV."""
    text = sys.stdin.read() if args.text == "-" else args.text
    if not (0.25 <= args.speed <= 4.0):  # comparisons with NaN are False: rejected too
        raise EngineError("--speed must be between 0.25 and 4.")
    if not (-12.0 <= args.pitch <= 12.0):
        raise EngineError("--pitch must be between -12 and 12 semitones.")
    out = Path(args.out)
    if out.is_dir():
        raise EngineError(f"--out {out} is a directory; give a file name such as {out / 'say.wav'}.")
    pcm = asyncio.run((say or _say)(args, text))
    try:
        write_wav(out, pcm)
    except OSError as exc:
        raise EngineError(f"cannot write {out}: {exc.strerror or exc}") from exc
    seconds = len(pcm) / (DISCORD_RATE * DISCORD_CHANNELS * 2)
    print(f"wrote {out} ({seconds:.2f} s, {what})", file=sys.stderr)
    return 0
