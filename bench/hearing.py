"""Hearing bench: how soon the bot's level falls after a member's first packet and rises after their last, and what
the receive path costs per speaking member.

The bot starts as `make run` does (create_bot, its default engine and settings) against the sandbox; a sandbox member
in its call speaks real speech (the bot's own voice, rendered once) as a Discord client does (SPEAKING, DAVE- and
transport-encrypted Opus). Level: the bot says the same sentence twice, once with nobody talking (the reference) and
once while the member talks; the channel's frames are compared one by one, and the times are from the member's
first (last) packet sent to the first frame heard at most 3 dB above the fall (within 1 dB of the reference).
Cost: the CPU time of discord.py's socket reader thread (the receive path runs on it) while `--members` speak at
once, against the same thread while nobody speaks, in the same run.

    .venv/bin/python bench/hearing.py [--trials N] [--members M] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench._harness import bench_settings, join, new_room, pct, wav_of  # noqa: E402
from engine.base import Voice  # noqa: E402
from engine.bench import Metric, report  # noqa: E402

SAID = ("The quick brown fox jumps over the lazy dog near the river bank. Seven silver spoons sat quietly inside a "
        "wooden drawer all winter, waiting for the spring.")
TALKED = "Sorry to cut in, could you say that again?"
DOWN_GOAL_S = 0.100
BACK_GOAL_S = 0.600
CPU_GOAL = 0.01  # of a core per speaking member


def frame_db(pcm: bytes) -> float:
    x = np.frombuffer(pcm, dtype="<i2")[::2].astype(np.float64)
    return 10 * np.log10(float(np.sum(x * x)) + 1e-9)


async def said(sb, room, text: str):
    """/say `text`; the channel's capture once its first second was heard."""
    capture = sb.capture(room.guild)
    capture.clear()
    it = await sb.slash(room.user, room.text, "say", text=text)
    await it.wait_text(timeout=60)
    await capture.wait_for_audio(1.0, timeout=60)
    return capture


def levels(capture) -> list[tuple[float, float]]:
    """(arrival, level dB) of each voiced frame the channel heard."""
    return [(p.at, frame_db(pcm)) for p, pcm in capture.decoded(capture.voiced)]


def times(reference: list[tuple[float, float]], ducked: list[tuple[float, float]], first: float, last: float,
          depth_db: float) -> tuple[float | None, float | None]:
    """Seconds from `first` to the first frame heard within 3 dB of the fall, and from `last` to the first frame
    heard after it within 1 dB of the reference (None: not seen); frames compared by index (one voiced frame each:
    the same sentence in the same voice)."""
    down = back = None
    for (at, level), (_, ref) in zip(ducked, reference, strict=False):
        if ref < 60:  # too quiet to compare (a pause between words)
            continue
        change = level - ref
        if down is None and at >= first and change <= -(depth_db - 3):
            down = at - first
        if back is None and at >= last and change >= -1:
            back = at - last
    return down, back


def thread_cpu(name_prefix: str) -> float:
    """CPU seconds of this process's live threads whose name starts with `name_prefix`."""
    total = 0.0
    for t in threading.enumerate():
        if t.name.startswith(name_prefix) and t.ident is not None:
            try:
                total += time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except (OSError, ProcessLookupError):
                pass
    return total


async def run(trials: int, members: int, seconds: float) -> list[Metric]:
    from demo.sandbox_bot import sandbox_settings, start_bot
    from sandbox import Sandbox, restore_discord

    metrics: list[Metric] = []
    with tempfile.TemporaryDirectory(prefix="bench-hearing-") as tmp:
        async with Sandbox() as sb:
            running = await start_bot(sb, sandbox_settings(bench_settings(Path(tmp)), sb))
            bot = running.bot
            try:
                talk_pcm = b"".join([c.pcm async for c in bot.engine.stream(TALKED, Voice(), key="bench-hearing")])
                talk_wav = wav_of(talk_pcm)
                room = await new_room(sb, "hearing")
                talkers = [sb.user(f"talker{i}") for i in range(members)]
                for user in talkers:
                    room.guild.add_member(user)
                    await sb.user_joins_voice(user, room.voice)
                await join(sb, room, bot)
                await sb.voice.dave.settle()
                await sb.wait_dave_ready(room.guild, timeout=30)
                depth = bot.speech.call(room.guild.id).connection.ducking.depth_db or 10.0

                downs, backs, missing = [], [], 0
                for _ in range(trials):
                    capture = await said(sb, room, SAID)
                    await capture.wait_until_silent(0.6, timeout=120)
                    reference = levels(capture)
                    capture = await said(sb, room, SAID)
                    talk = sb.speak(talkers[0], talk_wav, room.guild)
                    await talk.wait(timeout=30)
                    await capture.wait_until_silent(0.6, timeout=120)
                    down, back = times(reference, levels(capture), talk.sent_at[0], talk.sent_at[-1], depth)
                    if down is None or back is None:
                        missing += 1
                        continue
                    downs.append(down)
                    backs.append(back)
                note = (f"{len(downs)} of {trials} trials, ducking {depth:g} dB; down "
                        + " ".join(f"{d * 1000:.0f}" for d in downs) + " ms, back "
                        + " ".join(f"{b * 1000:.0f}" for b in backs) + " ms")
                if downs:
                    metrics.append(Metric("level_down_p50_s", pct(downs, 0.5), "", True, note))
                    metrics.append(Metric("level_down_max_s", max(downs), f"<= {DOWN_GOAL_S}",
                                          max(downs) <= DOWN_GOAL_S, note))
                    metrics.append(Metric("level_back_p50_s", pct(backs, 0.5), "", True, note))
                    metrics.append(Metric("level_back_max_s", max(backs), f"<= {BACK_GOAL_S}",
                                          max(backs) <= BACK_GOAL_S, note))
                metrics.append(Metric("trials_unmeasured", missing, "== 0", missing == 0,
                                      "a trial whose fall or rise was not seen"))

                # the receive path's cost: the socket reader thread with nobody speaking, then with every talker
                reader = "voice-socket-reader"
                cpu0, t0 = thread_cpu(reader), time.monotonic()
                await asyncio.sleep(seconds)
                idle = (thread_cpu(reader) - cpu0) / (time.monotonic() - t0)
                packets0 = bot.speech.received.packets
                loops = max(1, int(seconds / (len(talk_pcm) / 192_000)))
                cpu0, t0 = thread_cpu(reader), time.monotonic()
                for _ in range(loops):
                    talks = [sb.speak(u, talk_wav, room.guild) for u in talkers]
                    for t in talks:
                        await t.wait(timeout=60)
                busy = (thread_cpu(reader) - cpu0) / (time.monotonic() - t0)
                per_member = max(0.0, busy - idle) / members
                got = bot.speech.received.packets - packets0
                metrics.append(Metric("receive_idle_core_share", idle, "", True, "the reader thread, nobody speaking"))
                metrics.append(Metric("receive_core_share_per_speaking_member", per_member, f"< {CPU_GOAL}",
                                      per_member < CPU_GOAL,
                                      f"{members} members at once, {got} packets; the thread at "
                                      f"{busy:.4f} of a core, idle {idle:.4f}"))
            finally:
                await running.stop()
        restore_discord()
    return metrics


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--members", type=int, default=5)
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args(argv)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"cpu: {cpu}", flush=True)
    metrics = asyncio.run(run(args.trials, args.members, args.seconds))
    return report(metrics)


if __name__ == "__main__":
    sys.exit(main())
