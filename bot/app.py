"""VoiceBot: the AutoShardedBot owning engine, storage and the services plugins call; loads plugins, syncs commands."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import discord
from discord.ext import commands

from bot.config import Settings
from bot.dictionary import DictionaryService
from bot.dictionary_file import global_entries
from bot.errors import on_app_command_error, reply
from bot.languages import LanguageService
from bot.metrics import BotMetrics
from bot.plugins import PluginManager
from bot.prefs import PrefsService
from bot.speech.service import SpeechService
from bot.stock_voices import StockVoices
from bot.storage.database import Database
from bot.voice_recording import VoiceRecordings
from bot.voices import VoiceService
from bot.web import WebServer
from engine.base import Engine

if TYPE_CHECKING:
    from bot.readout import ReadoutService

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

    # made by start_services (setup_hook), before any plugin is loaded
    speech: SpeechService
    voices: VoiceService
    dictionary: DictionaryService
    languages: LanguageService
    stock: StockVoices
    metrics: BotMetrics
    recordings: VoiceRecordings

    def __init__(self, settings: Settings, *, database: Database, engine: Engine, **kwargs: Any) -> None:
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
        self.readout: ReadoutService | None = None  # set by the readout plugin
        self.web: WebServer | None = None  # /healthz and /metrics, when web.enabled
        self.tree.on_error = on_app_command_error
        self.tree.interaction_check = guild_only_check
        self.synced: list[discord.app_commands.AppCommand] = []

    async def setup_hook(self) -> None:
        await self.start_services()
        await self.plugins.load_all(list(self.config.plugins.enabled))
        await self.sync_commands()

    async def start_services(self) -> None:
        """Create the services plugins call (bot.speech, bot.voices, bot.stock, bot.dictionary, bot.languages;
        bot.prefs is made with the bot) once the engine and database are ready."""
        c = self.config
        self.stock = StockVoices(self.engine)
        self.voices = VoiceService(self.db, self.engine, c.voices, self.prefs, self.stock)
        self.dictionary = DictionaryService(self.db, global_entries(c.global_dictionary))
        self.languages = LanguageService(self.engine, self.prefs, self.stock)
        self.speech = SpeechService(self, self.engine, c, prefs=self.prefs, voices=self.voices,
                                    dictionary=self.dictionary, languages=self.languages)
        self.recordings = VoiceRecordings(self.speech)
        self.metrics = BotMetrics(self.speech, self.engine)
        self.speech.listeners.append(self.metrics.observe)
        if c.web.enabled:
            self.web = WebServer(self, self.metrics, c.web.host, c.web.port)
            await self.web.start()

    async def stop_services(self) -> None:
        """Stop speakers and close the engine and database; each step runs even if another fails (a service
        never made, when the bot closes before setup_hook, is skipped)."""
        for name, attr in (("web", "web"), ("speech", "speech"), ("voices", "voices"), ("engine", "engine"),
                           ("database", "db")):
            step = getattr(getattr(self, attr, None), "close", None)
            if step is None:
                continue
            try:
                await step()
            except Exception:
                log.exception("closing %s failed", name)

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
            await self.stop_services()
        finally:
            await super().close()
