"""`python -m engine say TEXT --out FILE.wav [--reference CLIP | --profile FILE]`: what the bot would play,
written as a 48 kHz stereo WAV, in the configured voice or a voice matched to a reference clip."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import wave
from pathlib import Path

from engine.base import DISCORD_CHANNELS, DISCORD_RATE, Engine, EngineError, Voice
from engine.cli.common import add_engine_arguments, add_reference_arguments, engine_settings, read_clip
from engine.languages import base
from engine.voices.registration import Registration


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", metavar="TEXT", help='the text to speak ("-" reads standard input)')
    p.add_argument("--out", required=True, metavar="FILE.wav", help="where to write the WAV")
    p.add_argument("--voice", default="default", metavar="NAME", help="a voice name the backend offers")
    p.add_argument("--speaker-id", type=int, default=None, help="speaker of a multi-speaker Piper model")
    p.add_argument("--speed", type=float, default=1.0, metavar="X", help="speaking rate, >1 is faster (0.25-4)")
    p.add_argument("--pitch", type=float, default=0.0, help="pitch shift in semitones")
    p.add_argument("--language", default="", metavar="auto|CODE",
                   help="the text's language (auto: detected), spoken by a voice that speaks it; says which on stderr")
    add_engine_arguments(p)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--reference", metavar="CLIP",
                       help="speak in a voice matched to this clip (WAV, FLAC, Ogg, MP3)")
    group.add_argument("--profile", metavar="FILE", help="speak in a voice registered with `register`")
    add_reference_arguments(p)


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
        voice = await _voice(args, engine)
        if args.language:
            voice = _route(args.language, text, voice, engine)
        return await engine.synthesize_all(text, voice, key="cli")
    finally:
        await engine.close()


async def _voice(args: argparse.Namespace, engine: Engine) -> Voice:
    """The voice asked for: a built-in one, or one matched to --reference or a --profile."""
    if not (args.reference or args.profile):
        return Voice(name=args.voice, speed=args.speed, pitch=args.pitch, speaker_id=args.speaker_id)
    if args.profile:
        try:
            registration = Registration.from_json(Path(args.profile).read_text())
        except OSError as exc:
            raise EngineError(f"cannot read {args.profile}: {exc.strerror or exc}") from exc
    else:
        data = read_clip(args.reference, args.max_clip_bytes)
        registration = await engine.register(data, args.transcript, max_bytes=args.max_clip_bytes)
    voice = registration.voice(engine.info, speed=args.speed, pitch=args.pitch)
    if voice.profile is None:
        raise EngineError(f"That voice has no features for the {engine.info.name} backend; register it again.")
    return voice


def _route(language: str, text: str, voice: Voice, engine: Engine) -> Voice:
    """The voice for `language` (auto: detected, else the default voice's); one line on stderr says which."""
    code = base(language)
    if language == "auto":
        from engine import langid

        found = langid.detect(text, engine.info.languages[0])
        code = found.language
        how = f"detected, {found.confidence:.0%}" if found.detected else "too short or unclear to detect: the default"
    elif code:
        how = "given"
    else:
        raise EngineError(f"--language takes auto or a language code such as fr, not {language[:20]!r}.")
    routed = engine.route(voice, code)
    speaks = engine.languages()
    name = speaks.get(code, "spoken by no voice here")
    print(f"language {code} ({name}; {how}), voice {routed.name}", file=sys.stderr)
    return routed


def run(args: argparse.Namespace) -> int:
    """Check the options, synthesize (the configured voice, or one matched to --reference/--profile), write the WAV."""
    what = "matched voice" if (args.reference or args.profile) else f"{DISCORD_RATE} Hz stereo"
    text = sys.stdin.read() if args.text == "-" else args.text
    if not (0.25 <= args.speed <= 4.0):  # comparisons with NaN are False: rejected too
        raise EngineError("--speed must be between 0.25 and 4.")
    if not (-12.0 <= args.pitch <= 12.0):
        raise EngineError("--pitch must be between -12 and 12 semitones.")
    out = Path(args.out)
    if out.is_dir():
        raise EngineError(f"--out {out} is a directory; give a file name such as {out / 'say.wav'}.")
    pcm = asyncio.run(_say(args, text))
    try:
        write_wav(out, pcm)
    except OSError as exc:
        raise EngineError(f"cannot write {out}: {exc.strerror or exc}") from exc
    seconds = len(pcm) / (DISCORD_RATE * DISCORD_CHANNELS * 2)
    print(f"wrote {out} ({seconds:.2f} s, {what})", file=sys.stderr)
    return 0
