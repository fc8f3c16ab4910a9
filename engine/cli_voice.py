"""`python -m engine say TEXT --reference CLIP`: the say command, able to speak in a voice matched to a clip."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from engine import cli_say
from engine.base import EngineError
from engine.clip import ClipRejected
from engine.registration import Registration
from engine.settings import EngineSettings


def read_clip(path: str, max_bytes: int) -> bytes:
    """The file's bytes, refusing before reading when it is over the cap."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise ClipRejected(f"{p} is {size / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.1f} MB.")
        with p.open("rb") as f:
            return f.read(max_bytes + 1)
    except OSError as exc:
        raise EngineError(f"cannot read {p}: {exc.strerror or exc}") from exc


def add_reference_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transcript", default="", metavar="T", help="what is said in the reference clip")
    p.add_argument(
        "--max-clip-bytes", type=int, default=EngineSettings().server.max_upload_bytes, help="largest clip accepted"
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    cli_say.add_arguments(p)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--reference", metavar="CLIP", help="speak in a voice matched to this clip (WAV, FLAC, Ogg, MP3)")
    group.add_argument("--profile", metavar="FILE", help="speak in a voice registered with `register`")
    add_reference_arguments(p)


async def _say(args: argparse.Namespace, text: str) -> bytes:
    from engine.factory import build_engine

    engine = build_engine(cli_say.engine_settings(args, workers=1, max_concurrency=1))
    try:
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
        return await engine.synthesize_all(text, voice, key="cli")
    finally:
        await engine.close()


def run(args: argparse.Namespace) -> int:
    if not args.reference and not args.profile:
        return cli_say.run(args)
    return cli_say.run(args, say=_say, what="matched voice")


def write_text_atomic(path: Path, text: str) -> None:
    """Write beside the target and rename: a half-written profile never replaces a good one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
