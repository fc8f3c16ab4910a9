"""Options and files shared by the CLI subcommands: the engine's options, reference clips, atomic writes."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from engine.backends import DEFAULT_BACKEND, backend_names
from engine.backends.piper.settings import PiperSettings
from engine.base import EngineError
from engine.settings import ConversionSettings, EngineSettings
from engine.voices.clip import ClipRejected


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """Options that pick and tune the backend; shared by subcommands that build an engine."""
    p.add_argument("--backend", default="", help=backend_names())
    p.add_argument("--model", default="", help="a Piper .onnx voice (implies --backend piper; default: the bundled "
                                               "en_US-joe-medium)")
    p.add_argument("--max-chars", type=int, default=EngineSettings.max_text_chars, help="longest text accepted")
    p.add_argument("--voices-dir", default="", metavar="DIR",
                   help="a folder of extra Piper voices (.onnx + .onnx.json)")
    p.add_argument("--noise-scale", type=float, default=PiperSettings.noise_scale,
                   help="Piper's variation of the voice; 0 with --noise-w 0: the same rendering every time")
    p.add_argument("--noise-w", type=float, default=PiperSettings.noise_w, help="Piper's variation of phoneme lengths")
    p.add_argument("--converter", default="", metavar="ONNX",
                   help="a voice converter's .onnx (docs/conversion.md): registered voices converted, not matched")


def engine_settings(args: argparse.Namespace, **overrides: object) -> EngineSettings:
    piper = PiperSettings(model=args.model, voices_dir=args.voices_dir, noise_scale=args.noise_scale,
                          noise_w=args.noise_w)
    backend = args.backend or ("piper" if args.model else DEFAULT_BACKEND)
    settings = EngineSettings(backend=backend, max_text_chars=args.max_chars, tables=(piper,),
                              conversion=ConversionSettings(model=args.converter))
    return replace(settings, **overrides)  # type: ignore[arg-type]


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


def write_text_atomic(path: Path, text: str) -> None:
    """Write beside the target and rename: a half-written profile never replaces a good one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
