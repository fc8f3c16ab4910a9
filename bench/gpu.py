"""GPU benchmark of the cosyvoice2 backend: first-chunk latency and real-time factor by concurrency and precision.

Usage (on a machine with a CUDA GPU, the cosyvoice package and a CosyVoice2-0.5B folder):

    python bench/gpu.py                                  # model_dir from [engine.cosyvoice] of ./config.toml
    python bench/gpu.py --model-dir /models/CosyVoice2-0.5B
    python bench/gpu.py --concurrency 1,2,4,8 --precisions fp32,fp16 --modes stream,full --requests 8
    python bench/gpu.py --prompt-wav me.wav --prompt-text "what I say in me.wav" --json out.json

It drives the real adapter (engine.cosyvoice.CosyVoiceBackend, the same calls the bot makes): one voice is
registered (extract_features) from --prompt-wav, or else from a clip the bundled Piper voice speaks, then
segment-sized English texts are synthesized from N threads at once. For every precision (fp32, fp16; the
model is loaded once per precision with the load_jit/load_trt/load_vllm flags of the config), streaming
mode (stream: chunks as the model yields them; full: one chunk per segment) and concurrency it prints
first-chunk latency p50/p95, RTF (synthesis time / audio time, per request; below 1 is faster than real
time), throughput in seconds of audio per second, and peak GPU memory, each with its ratio to the
concurrency-1 fp32 run of the same mode, measured in this run. From the memory growth per stream it
prints the `engine.max_concurrency` that engine.backends.cosyvoice.loader.suggest_concurrency gives for this GPU.

Where there is no CUDA GPU or no model folder it prints one "skipped: ..." line and exits 0.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from engine.backends.cosyvoice.settings import CosyVoiceSettings  # noqa: E402
from engine.base import BackendUnavailable, EngineError, Voice, VoiceProfile  # noqa: E402

TEXTS = (
    "Welcome back, everyone. The game night starts in ten minutes, so grab a seat.",
    "I just pushed the new build to the server; let me know if anything looks broken.",
    "The weather this morning was bright and clear, with a gentle breeze from the west.",
    "Could someone remind me what time the raid begins on Saturday evening?",
)
REFERENCE_TEXT = "Hello, this is a short recording of my voice, made so the bot can learn how I sound."


@dataclass
class Row:
    precision: str
    mode: str
    concurrency: int
    requests: int
    failures: int
    first_p50_s: float
    first_p95_s: float
    rtf: float  # mean over requests of synthesis seconds / audio seconds
    throughput: float  # audio seconds per wall second, all streams together
    peak_gib: float


def _settings(args: argparse.Namespace) -> CosyVoiceSettings:
    table: dict[str, Any] = {}
    config = Path(args.config)
    if config.is_file():
        with config.open("rb") as fh:
            table = tomllib.load(fh).get("engine", {}).get("cosyvoice", {})
    known = {f.name for f in fields(CosyVoiceSettings)}
    settings = CosyVoiceSettings(**{k: v for k, v in table.items() if k in known})
    if args.model_dir:
        settings = replace(settings, model_dir=args.model_dir)
    return settings


def _reference(args: argparse.Namespace) -> tuple[np.ndarray, int, str]:
    """The reference clip to register: --prompt-wav, or the bundled Piper voice reading REFERENCE_TEXT."""
    if args.prompt_wav:
        import soundfile

        audio, rate = soundfile.read(args.prompt_wav, dtype="float32", always_2d=True)
        return audio.mean(axis=1), rate, args.prompt_text
    from engine.backends.piper.backend import PiperBackend

    piper = PiperBackend()
    try:
        audio = np.concatenate(list(piper.synthesize(REFERENCE_TEXT, Voice())))
        return audio, piper.info.sample_rate, REFERENCE_TEXT
    finally:
        piper.close()


def _one(backend: Any, text: str, voice: Voice) -> tuple[float, float, float]:
    """(first-chunk latency, total time, audio seconds) of one request."""
    start = time.perf_counter()
    first = None
    samples = 0
    for chunk in backend.synthesize(text, voice):
        if first is None:
            first = time.perf_counter() - start
        samples += len(chunk)
    total = time.perf_counter() - start
    return (first if first is not None else total), total, samples / backend.info.sample_rate


def _level(backend: Any, voice: Voice, concurrency: int, requests: int, precision: str, mode: str) -> Row:
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    results: list[tuple[float, float, float]] = []
    failures = 0
    wall0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        futures = [pool.submit(_one, backend, TEXTS[i % len(TEXTS)], voice) for i in range(requests)]
        for fut in futures:
            try:
                results.append(fut.result())
            except EngineError as exc:
                failures += 1
                print(f"  request failed: {exc}", file=sys.stderr)
    wall = time.perf_counter() - wall0
    peak = torch.cuda.max_memory_allocated() / (1 << 30)
    firsts = sorted(r[0] for r in results) or [float("nan")]
    return Row(
        precision=precision,
        mode=mode,
        concurrency=concurrency,
        requests=requests,
        failures=failures,
        first_p50_s=float(np.percentile(firsts, 50)),
        first_p95_s=float(np.percentile(firsts, 95)),
        rtf=statistics.fmean(r[1] / r[2] for r in results if r[2] > 0) if results else float("nan"),
        throughput=sum(r[2] for r in results) / wall if wall > 0 else float("nan"),
        peak_gib=peak,
    )


def _ratio(value: float, base: float) -> str:
    return f"{value / base:5.2f}x" if base and base == base and value == value else "   - "


def _print(rows: list[Row]) -> None:
    print()
    print(
        f"{'precision':9} {'mode':6} {'conc':>4} {'n':>3} {'fail':>4} {'first p50':>9} {'(ratio)':>7} "
        f"{'first p95':>9} {'RTF':>6} {'(ratio)':>7} {'audio s/s':>9} {'(ratio)':>7} {'peak GiB':>8}"
    )
    for row in rows:
        base = next(
            (b for b in rows if b.precision == "fp32" and b.mode == row.mode and b.concurrency == 1), None
        )
        print(
            f"{row.precision:9} {row.mode:6} {row.concurrency:4d} {row.requests:3d} {row.failures:4d} "
            f"{row.first_p50_s:9.3f} {_ratio(row.first_p50_s, base.first_p50_s if base else 0):>7} "
            f"{row.first_p95_s:9.3f} {row.rtf:6.3f} {_ratio(row.rtf, base.rtf if base else 0):>7} "
            f"{row.throughput:9.2f} {_ratio(row.throughput, base.throughput if base else 0):>7} {row.peak_gib:8.2f}"
        )
    print("ratios: against the concurrency-1 fp32 run of the same mode, measured above")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--config", default="config.toml", help="TOML file with [engine.cosyvoice] (default "
                                                                "./config.toml)")
    parser.add_argument("--model-dir", default="", help="CosyVoice2-0.5B folder (overrides the config)")
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--modes", default="stream,full", help="stream: chunked streaming; full: one chunk per segment")
    parser.add_argument("--requests", type=int, default=8, help="requests per level (at least 2 per stream)")
    parser.add_argument("--prompt-wav", default="")
    parser.add_argument("--prompt-text", default="")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    args = parser.parse_args(argv)

    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print(f"skipped: no CUDA GPU (torch {torch.__version__} sees none)")
        return 0
    settings = _settings(args)
    if not settings.model_dir or not Path(settings.model_dir).expanduser().is_dir():
        print(f"skipped: no model dir (engine.cosyvoice.model_dir / --model-dir is {settings.model_dir!r})")
        return 0
    if args.prompt_wav and not args.prompt_text:
        parser.error("--prompt-text is needed with --prompt-wav")

    from engine.backends.cosyvoice.backend import CosyVoiceBackend
    from engine.backends.cosyvoice.loader import load_cosyvoice, suggest_concurrency

    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    clip, rate, transcript = _reference(args)
    print(f"GPU: {torch.cuda.get_device_name()}; model: {settings.model_dir}; "
          f"jit={settings.load_jit} trt={settings.load_trt} vllm={settings.load_vllm}")  # fmt: skip

    rows: list[Row] = []
    suggestion: dict[str, Any] = {}
    for precision in precisions:
        base = replace(settings, fp16=precision == "fp16", device=settings.device or "cuda")
        try:
            t0 = time.perf_counter()
            model, version = load_cosyvoice(base, workers=max(levels))
            print(f"{precision}: loaded in {time.perf_counter() - t0:.1f} s ({version})")
        except BackendUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        free_after_load = torch.cuda.mem_get_info()[0]
        voice = None
        for mode in modes:
            backend = CosyVoiceBackend(
                replace(base, streaming=mode == "stream"), workers=max(levels), model=model, version=version
            )
            if voice is None:
                blob = backend.extract_features(clip, rate, transcript)
                voice = Voice(profile=VoiceProfile("bench", backend.info.name, backend.info.version, blob, transcript))
            for text in TEXTS[:2]:  # warm-up: first runs allocate and compile
                _one(backend, text, voice)
            for concurrency in levels:
                row = _level(backend, voice, concurrency, max(args.requests, 2 * concurrency), precision, mode)
                rows.append(row)
                print(f"  {mode} x{concurrency}: first p50 {row.first_p50_s:.3f} s, RTF {row.rtf:.3f}, "
                      f"{row.throughput:.2f} audio s/s, peak {row.peak_gib:.2f} GiB")  # fmt: skip
            backend.close()
        mine = [r for r in rows if r.precision == precision and r.mode == modes[0]]
        if len(mine) > 1 and mine[-1].concurrency > mine[0].concurrency:
            per_stream = (mine[-1].peak_gib - mine[0].peak_gib) / (mine[-1].concurrency - mine[0].concurrency)
            per_stream_bytes = max(int(per_stream * (1 << 30)), 256 << 20)
            suggestion[precision] = {
                "per_stream_gib": round(per_stream_bytes / (1 << 30), 3),
                "free_after_load_gib": round(free_after_load / (1 << 30), 2),
                "max_concurrency": suggest_concurrency(free_after_load, per_stream_bytes),
            }
        del model
        gc.collect()
        torch.cuda.empty_cache()

    _print(rows)
    for precision, s in suggestion.items():
        print(f"{precision}: ~{s['per_stream_gib']} GiB per stream, {s['free_after_load_gib']} GiB free after load "
              f"-> engine.max_concurrency <= {s['max_concurrency']} by memory (see the throughput column for "
              "compute)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": [asdict(r) for r in rows], "suggestion": suggestion}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
