"""The real VoiceBot in its own process, against a sandbox running in the test process, until it is killed.

`python tests/e2e/crash_bot.py DB_PATH` with the environment of `sandbox.env(sb)`. Prints READY once the bot is
connected. With CRASH_ON_SQL set (e.g. "INSERT INTO voice_features") the process SIGKILLs itself right after
the first such statement runs, inside its transaction: a crash in the middle of a write.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def settings_for(db_path: str):
    from bot.config import DEFAULT_CONFIG, load_settings

    s = load_settings(DEFAULT_CONFIG, environ={})
    return dataclasses.replace(
        s,
        database=dataclasses.replace(s.database, path=db_path),
        discord=dataclasses.replace(s.discord, token=os.environ["SANDBOX_TOKEN"], guild_ready_timeout=0.2),
        speech=dataclasses.replace(s.speech, idle_leave_s=0.0),
    )


def crash_on(db, prefix: str) -> None:
    from sqlalchemy import event

    def after(conn, cursor, statement, params, context, executemany):
        if statement.lstrip().upper().startswith(prefix.upper()):
            os.kill(os.getpid(), signal.SIGKILL)

    event.listen(db.engine.sync_engine, "after_cursor_execute", after)


async def run(db_path: str) -> None:
    from bot.startup import create_bot, start_in_background
    from bot.storage.database import Database
    from sandbox import point_discord_at_env

    settings = settings_for(db_path)
    db = Database(settings.database_url)
    if os.environ.get("CRASH_ON_SQL"):
        crash_on(db, os.environ["CRASH_ON_SQL"])
    bot = await create_bot(settings, database=db, connector=point_discord_at_env())
    running = await start_in_background(bot, settings.discord.token, ready_timeout=120)
    print("READY", flush=True)
    await running.task


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1]))
