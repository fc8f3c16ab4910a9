"""Playback cost bench: CPU per 20 ms frame of each part, one discord.py player thread per guild vs the one driver.

The project's bot joins N sandbox guilds (real discord.py voice, davey, PyNaCl, Opus); every guild then plays the
same speech for a while, first the way the bot played before (discord.py's `VoiceClient.play`: a player thread per
guild that reads PCM, encodes, encrypts and sends every 20 ms), then through the bot's `VoiceDriver` (one thread
for all guilds, encoding ahead). The figure is CPU seconds of the playing threads per frame sent, and the ratio
of the two in the same run; each part (Opus encoding, DAVE encryption, transport encryption and RTP, the send)
is timed on its own on one connection.

    .venv/bin/python bench/playback.py [--guilds N] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import discord  # noqa: E402

from bench._harness import bench_settings, join, new_room  # noqa: E402
from engine.base import Voice  # noqa: E402
from engine.bench import Metric, report  # noqa: E402

TEXT = "Our town library opened a new reading room last spring, and it has been busy ever since."


def per_frame_us(fn, frames: list[bytes]) -> float:
    t0 = time.perf_counter()
    for f in frames:
        fn(f)
    return (time.perf_counter() - t0) / len(frames) * 1e6


class PcmLoop(discord.AudioSource):
    """A discord.AudioSource that plays the same PCM frames over for a fixed number of frames, and adds the CPU time
    its player thread used meanwhile to `cpu` (from the first frame to the end)."""

    def __init__(self, frames: list[bytes], count: int, cpu: list[float]) -> None:
        self.frames, self.left, self.i, self.cpu = frames, count, 0, cpu
        self.t0: float | None = None

    def read(self) -> bytes:
        if self.t0 is None:
            self.t0 = time.thread_time()
        if self.left <= 0:
            self.cpu.append(time.thread_time() - self.t0)
            return b""
        self.left -= 1
        self.i += 1
        return self.frames[self.i % len(self.frames)]

    def is_opus(self) -> bool:
        return False



async def run(guilds: int, seconds: float) -> list[Metric]:
    from bot.speech.connection.discord_internals import connection_state, voice_packet
    from bot.speech.playback.opus import voice_encoder
    from bot.speech.playback.source import StreamingSource
    from demo.sandbox_bot import sandbox_settings, start_bot
    from engine.base import FRAME_BYTES
    from sandbox import Sandbox, restore_discord

    metrics: list[Metric] = []
    with tempfile.TemporaryDirectory(prefix="bench-playback-") as tmp:
        async with Sandbox() as sb:
            running = await start_bot(sb, sandbox_settings(bench_settings(Path(tmp)), sb))
            bot = running.bot
            try:
                pcm = b"".join([c.pcm async for c in bot.engine.stream(TEXT, Voice(), key="bench-playback")])
                frames = [pcm[i:i + FRAME_BYTES] for i in range(0, len(pcm) - FRAME_BYTES + 1, FRAME_BYTES)]
                rooms = [await new_room(sb, f"playback-{i}") for i in range(guilds)]
                for room in rooms:
                    await join(sb, room, bot)
                speakers = [bot.speech.speaker(r.guild.id) for r in rooms]
                voice_clients = [bot.get_guild(r.guild.id).voice_client for r in rooms]  # discord.py's, measured as is
                count = int(seconds / 0.02)
                options = bot.speech.driver.encoder_options

                # one discord.py player thread per guild (how the bot played before the driver)
                done = asyncio.Event()
                left = [guilds]
                loop = asyncio.get_running_loop()

                def after(_err) -> None:
                    left[0] -= 1
                    if left[0] == 0:
                        loop.call_soon_threadsafe(done.set)

                cpu: list[float] = []
                t0 = time.monotonic()
                for vc in voice_clients:
                    vc.play(PcmLoop(frames, count, cpu), after=after, **options)
                await asyncio.wait_for(done.wait(), seconds * 4 + 30)
                threads_cpu = sum(cpu)
                threads_wall = time.monotonic() - t0
                await asyncio.sleep(0.5)

                # the one driver
                cpu0, t0 = bot.speech.driver.cpu_s, time.monotonic()
                tracks = []
                for sp in speakers:
                    src = StreamingSource(max_frames=count + 1)

                    async def chunks():
                        from engine.base import AudioChunk
                        for i in range(count):
                            yield AudioChunk(frames[i % len(frames)], 48_000, 2)

                    src.start(chunks())
                    await asyncio.wait_for(src.producer, 60)
                    tracks.append(bot.speech.driver.play(src, sp.connection.sink, hold_limit_s=10.0))
                await asyncio.wait_for(asyncio.gather(*(t.done for t in tracks)), seconds * 4 + 30)
                await asyncio.sleep(0.1)  # the driver folds its CPU time in once it has no tracks
                driver_cpu = bot.speech.driver.cpu_s - cpu0
                driver_wall = time.monotonic() - t0
                sent = guilds * count

                # each part on one connection
                vc = voice_clients[0]
                encode = voice_encoder(options, bot.speech.driver.complexity)
                opus = [encode(f) for f in frames]
                state = connection_state(vc)
                parts = {
                    "opus_encode_as_before": per_frame_us(
                        functools.partial(discord.opus.Encoder(**options).encode, frame_size=960), frames),
                    "opus_encode_with_complexity": per_frame_us(encode, frames),
                    "dave_encrypt": per_frame_us(state.dave_session.encrypt_opus, opus)
                    if state.dave_session is not None and state.can_encrypt else float("nan"),
                    "dave_and_transport_encrypt_rtp": per_frame_us(lambda f: voice_packet(vc, f), opus),
                    "send_audio_packet_all_but_encode": per_frame_us(
                        lambda f: vc.send_audio_packet(f, encode=False), opus),
                }
                for name, us in parts.items():
                    metrics.append(Metric(f"part_{name}_us_per_frame", us, "", True, "one connection, in a loop"))
                old_us = threads_cpu / sent * 1e6
                new_us = driver_cpu / sent * 1e6
                metrics.append(Metric("thread_per_guild_cpu_us_per_frame", old_us, "", True,
                                      f"{guilds} guilds x {count} frames in {threads_wall:.1f} s (player threads)"))
                metrics.append(Metric("driver_cpu_us_per_frame", new_us, "", True,
                                      f"{guilds} guilds x {count} frames in {driver_wall:.1f} s (the driver thread)"))
                ratio = new_us / old_us if old_us else float("nan")
                metrics.append(Metric("driver_vs_thread_per_guild_cpu", ratio, "<= 1.0", ratio <= 1.0,
                                      f"late ticks {bot.speech.driver.late_ticks} of {bot.speech.driver.ticks}"))
            finally:
                await running.stop()
        restore_discord()
    return metrics


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--guilds", type=int, default=15)
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args(argv)
    metrics = asyncio.run(run(args.guilds, args.seconds))
    return report(metrics)


if __name__ == "__main__":
    sys.exit(main())
