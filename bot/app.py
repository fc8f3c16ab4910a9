"""VoiceBot: the AutoShardedBot that owns engine, storage and speakers, loads plugins and syncs commands."""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord.ext import commands

from bot.config import Settings
from bot.errors import on_app_command_error, reply
from bot.plugins import PluginManager
from bot.prefs import PrefsService
from bot.storage.database import Database

log = logging.getLogger(__name__)


async def guild_only_check(interaction: discord.Interaction) -> bool:
    """discord.py only tells Discord a command is guild-only; refuse such commands arriving from a DM here."""
    command = interaction.command
    if interaction.guild_id is not None or command is None:
        return True
    root = getattr(command, "root_parent", None) or command
    if not (getattr(command, "guild_only", False) or getattr(root, "guild_only", False)):
        return True
    if interaction.type is discord.InteractionType.application_command:
        await reply(interaction, "This command only works in a server.")
    return False


def intents() -> discord.Intents:
    wanted = discord.Intents.default()
    wanted.message_content = True  # readout reads messages; a privileged intent to enable in the portal
    wanted.members = False
    return wanted


class VoiceBot(commands.AutoShardedBot):
    """The Discord side. Plugins reach the bot only through its services."""

    def __init__(self, settings: Settings, *, database: Database, engine: Any, **kwargs: Any) -> None:
        d = settings.discord
        if d.shard_count:
            kwargs.setdefault("shard_count", d.shard_count)
        if d.shard_ids:
            kwargs.setdefault("shard_ids", list(d.shard_ids))
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=intents(),
            owner_ids=set(d.owner_ids) or None,
            guild_ready_timeout=d.guild_ready_timeout,
            help_command=None,
            **kwargs,
        )
        self.config = settings
        self.db = database
        self.engine = engine
        self.prefs = PrefsService(database)
        self.plugins = PluginManager(self)
        self.speech: Any = None
        self.voices: Any = None
        self.readout: Any = None  # set by the readout plugin
        self.dictionary: Any = None
        self.languages: Any = None
        self.metrics: Any = None
        self.web: Any = None
        self.tree.on_error = on_app_command_error
        self.tree.interaction_check = guild_only_check
        self.synced: list[discord.app_commands.AppCommand] = []

    async def setup_hook(self) -> None:
        await self.start_services()
        await self.plugins.load_all(list(self.config.plugins.enabled))
        await self.sync_commands()

    async def start_services(self) -> None:
        """Create the services plugins use; overridden by nothing, extended as features land."""
        from bot.services import build_services

        await build_services(self)

    async def sync_commands(self) -> None:
        """Sync slash commands once: to the development guild when set, else globally."""
        guild_id = self.config.discord.sync_guild
        try:
            if guild_id:
                guild = discord.Object(guild_id)
                self.tree.copy_global_to(guild=guild)
                self.synced = await self.tree.sync(guild=guild)
            else:
                self.synced = await self.tree.sync()
            log.info("synced %d slash commands%s", len(self.synced), f" to guild {guild_id}" if guild_id else "")
        except discord.HTTPException as exc:
            log.error("slash command sync failed: %s", exc)

    async def close(self) -> None:
        try:
            from bot.services import stop_services

            await stop_services(self)
        finally:
            await super().close()
