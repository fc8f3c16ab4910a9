"""One bot process of the scale-out test: the real VoiceBot (bot.startup.create_bot) against a sandbox in the test.

`python tests/e2e/fleet_bot.py` with the environment of `sandbox.env(sb)` and FLEET_DB_URL (PostgreSQL),
FLEET_SHARD_IDS ("0"), FLEET_SHARD_COUNT, FLEET_ENGINE_URL (the remote backend's server: nginx) and
FLEET_WEB_PORT (/healthz). Prints READY once connected; stops cleanly when its stdin closes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
MAX_LIFE_S = 900.0  # a bot never outlives a stuck test by long


def settings_from_env():
    from bot.config import DEFAULT_CONFIG, load_settings
    from engine.backends.remote.settings import RemoteSettings

    env = os.environ
    s = load_settings(DEFAULT_CONFIG, environ={})
    r = dataclasses.replace
    remote = r(RemoteSettings.of(s.engine), url=env["FLEET_ENGINE_URL"])
    return r(
        s,
        database=r(s.database, url=env["FLEET_DB_URL"]),
        discord=r(s.discord, token=env["SANDBOX_TOKEN"], guild_ready_timeout=0.2,
                  shard_ids=[int(i) for i in env["FLEET_SHARD_IDS"].split(",")],
                  shard_count=int(env["FLEET_SHARD_COUNT"])),
        speech=r(s.speech, idle_leave_s=0.0),
        engine=r(s.engine, backend="remote").with_tables(remote),
        web=r(s.web, enabled=True, host="127.0.0.1", port=int(env["FLEET_WEB_PORT"])),
    )


async def run() -> None:
    from bot.startup import create_bot, start_in_background
    from sandbox import point_discord_at_env

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from_env()
    bot = await create_bot(settings, connector=point_discord_at_env())
    running = await start_in_background(bot, settings.discord.token, ready_timeout=120)
    print("READY", flush=True)
    closed = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), lambda: os.read(sys.stdin.fileno(), 4096) or closed.set())
    try:
        await asyncio.wait_for(closed.wait(), MAX_LIFE_S)
    except asyncio.TimeoutError:
        pass
    finally:
        loop.remove_reader(sys.stdin.fileno())
        await running.stop()


if __name__ == "__main__":
    asyncio.run(run())
