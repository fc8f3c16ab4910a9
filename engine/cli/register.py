"""`python -m engine register CLIP --out PROFILE`: check a reference clip and write its voice profile."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from engine.backends.kokoro.voice import KokoroStyle
from engine.base import EngineError
from engine.cli.common import (
    add_engine_arguments,
    add_reference_arguments,
    engine_settings,
    read_clip,
    write_text_atomic,
)
from engine.voices.registration import Registration


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("clip", metavar="CLIP", help="reference recording: WAV, FLAC, Ogg/Opus or MP3, 3-30 s of speech")
    p.add_argument("--out", required=True, metavar="PROFILE", help="where to write the profile (JSON)")
    add_reference_arguments(p)
    add_engine_arguments(p)


async def _register(args: argparse.Namespace, data: bytes) -> Registration:
    from engine.factory import build_engine

    engine = build_engine(engine_settings(args, workers=1, max_concurrency=1))
    try:
        return await engine.register(data, args.transcript, max_bytes=args.max_clip_bytes)
    finally:
        await engine.close()


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.is_dir():
        raise EngineError(f"--out {out} is a directory; give a file name such as {out / 'voice.json'}.")
    data = read_clip(args.clip, args.max_clip_bytes)
    registration = asyncio.run(_register(args, data))
    try:
        write_text_atomic(out, registration.to_json())
    except OSError as exc:
        raise EngineError(f"cannot write {out}: {exc.strerror or exc}") from exc
    p = registration.profile
    match = f", pitch {p.target_f0_hz:.0f} Hz, formant warp {p.warp:.2f}" if p else ""
    style = next((KokoroStyle.from_bytes(b) for b in registration.features.values() if KokoroStyle.is_style(b)), None)
    if style is not None:
        match = ", Kokoro style from " + " ".join(f"{n} {w:.2f}" for n, w in style.weights.items())
    print(
        f"wrote {out}: {registration.duration_s:.1f} s of speech{match}, "
        f"{registration.timings.get('total', 0):.1f} s to register",
        file=sys.stderr,
    )
    return 0
