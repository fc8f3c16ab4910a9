"""`run_bot.py --sandbox [--say TEXT] [--out F.wav]`: a demo guild, the bot in it, what the channel heard as WAV."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
import wave
from pathlib import Path

from bot.config import Settings
from demo.sandbox_bot import sandbox_settings, start_bot


def write_wav(path: Path, pcm: bytes, rate: int = 48_000, channels: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)


async def _speak_once(sb, demo, text: str, out: Path) -> float | None:
    """Send /say as the demo user, wait until the channel is quiet, write what it heard; return TTFA."""
    capture = sb.capture(demo.guild)
    capture.clear()
    sent = time.monotonic()
    from sandbox.interactions import CommandNotSynced

    try:
        interaction = await sb.slash(demo.alice, demo.general, "say", text=text)
    except CommandNotSynced:
        print("error: /say is not available: the speech plugin did not load (see the log above)", file=sys.stderr)
        return None
    answer = await interaction.wait_text(timeout=30)
    try:
        await capture.wait_for_audio(0.02, timeout=60)
    except (asyncio.TimeoutError, TimeoutError):
        print(f"bot: {answer}\nno audio arrived", file=sys.stderr)
        return None
    await capture.wait_until_silent(0.6, timeout=600)
    write_wav(out, capture.pcm())
    return capture.first_packet_at - sent


async def _demo(settings: Settings, say: str | None, out: str | None) -> int:
    from sandbox import Sandbox
    from sandbox.demo import create_demo

    if "speech" not in settings.plugins.enabled:
        print("error: the speech plugin is not enabled in [plugins] enabled", file=sys.stderr)
        return 2
    async with Sandbox() as sb:
        demo = await create_demo(sb)
        running = await start_bot(sb, sandbox_settings(settings, sb))
        try:
            texts = [say] if say is not None else None
            n = 0
            while True:
                if texts is None:
                    try:
                        line = await asyncio.to_thread(input, "say> ")
                    except EOFError:
                        break
                    if not line.strip():
                        continue
                    text = line
                else:
                    if not texts:
                        break
                    text = texts.pop(0)
                n += 1
                path = Path(out) if out and say is not None else settings.resolve(f"data/sandbox-{n}.wav")
                ttfa = await _speak_once(sb, demo, text, path)
                if ttfa is None:
                    return 1
                # end-to-end encrypted (DAVE): the code alice's Discord client would show for this call
                code = sb.privacy_code(demo.guild) or "none"
                code = " ".join(code[i:i + 5] for i in range(0, len(code), 5))  # as Discord clients show it
                print(f"wrote {path} (time to first audio {ttfa * 1000:.0f} ms; voice privacy code {code})")
        finally:
            await running.stop()
    return 0


def run_demo(settings: Settings, *, say: str | None = None, out: str | None = None) -> int:
    """`run_bot.py --sandbox`: a demo guild, the bot connected to it, speech written to WAV files."""
    dbfile = dataclasses.replace(settings.database, path=settings.database.path.replace(".db", "-sandbox.db"))
    settings = dataclasses.replace(settings, database=dbfile)
    try:
        return asyncio.run(_demo(settings, say, out))
    except KeyboardInterrupt:
        return 0
