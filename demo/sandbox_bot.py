"""Start the real bot, through bot.startup.create_bot, against a running Sandbox on loopback."""

from __future__ import annotations

import dataclasses

from bot.config import Settings
from bot.startup import RunningBot, create_bot, start_in_background
from engine.base import Engine


def sandbox_settings(settings: Settings, sb, **discord_overrides) -> Settings:
    """Settings for a bot talking to the sandbox: its token, quick readiness."""
    d = dataclasses.replace(settings.discord, token=sb.token, guild_ready_timeout=0.2, **discord_overrides)
    return dataclasses.replace(settings, discord=d)


async def start_bot(sb, settings: Settings, *, engine: Engine | None = None, ready_timeout: float = 60.0) -> RunningBot:
    """The production startup (database upgrade, engine warm-up, VoiceBot) pointed at `sb`, then ready."""
    from sandbox import point_discord_at

    bot = await create_bot(settings, engine=engine, connector=point_discord_at(sb))
    return await start_in_background(bot, settings.discord.token, ready_timeout=ready_timeout)
