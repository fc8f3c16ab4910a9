"""VoiceService (bot.voices): register, resolve, share and delete users' voices; owners alone may change them."""

from __future__ import annotations

import asyncio
import collections
import logging
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import aiohttp
import discord
from discord import app_commands

from bot import role_voices
from bot.config import VoiceSettings
from bot.errors import UserError
from bot.guild_options import OptionError
from bot.prefs import PrefsService
from bot.stock_voices import StockVoices
from bot.storage import voices_repo as repo
from bot.storage.database import Database
from bot.storage.settings_repo import UserPrefs
from bot.storage.voices_repo import DuplicateVoiceName, VoiceInfo
from bot.user_options import BY_FIELD as USER_OPTIONS
from bot.user_options import VOICE_DEFAULTS
from engine.base import Engine, EngineError, Progress, Voice, VoiceProfile

if TYPE_CHECKING:
    from engine.voices.registration import Registration

log = logging.getLogger(__name__)
NAME_RE = re.compile(r"^[\w][\w \-']{0,31}$")
ROLE_MENTION = re.compile(r"<@&(\d{1,20})>|(\d{1,20})")
CLEARED = {"default", "off", "none"}  # a voice word that removes a server's assignment
DOWNLOAD_TIMEOUT_S = 30.0


def check_name(name: str) -> str:
    """A voice name: 1-32 letters, digits, spaces, - _ or '; no path separators or markup."""
    clean = " ".join((name or "").split())
    if not NAME_RE.fullmatch(clean):
        raise UserError("A voice name has 1-32 letters, digits, spaces, - _ or ' (and starts with a letter or digit).")
    return clean


class VoiceService:
    def __init__(self, db: Database, engine: Engine, settings: VoiceSettings, prefs: PrefsService,
                 stock: StockVoices | None = None) -> None:
        self.db = db
        self.stock = stock or StockVoices(engine)
        self.engine = engine
        self.settings = settings
        self.prefs = prefs
        self._profiles: collections.OrderedDict[tuple[str, str, str], VoiceProfile | None] = collections.OrderedDict()
        self._session: aiohttp.ClientSession | None = None
        self._refits: dict[str, asyncio.Task[None]] = {}  # voice id -> its features being derived again
        self._refit_failed: set[str] = set()  # not tried again by this process

    # -- using voices ------------------------------------------------------------------------------
    async def resolve(self, user_id: int, guild_id: int | None, name: str | None = None,
                      roles: Sequence[int] = ()) -> Voice:
        """The Voice for this user here: the named one (a registered voice they may use, else a stock voice); else
        their own choice (their registered voice, else their stock voice); else, or first when the server locks
        voices (lock_voice), the voice a moderator set them (/voice set), else their highest role's (role_voice,
        `roles` highest first); else the default."""
        prefs = await self.prefs.user(user_id)
        allowed = guild_id is None or (await self.prefs.guild(guild_id)).custom_voices
        if name:
            stock = self.stock.find(name)
            if stock is not None and not await self._is_visible(user_id, guild_id, name):
                return Voice(name=stock.name, speed=prefs.speed, pitch=prefs.pitch)
            if not allowed:
                raise UserError("This server does not allow custom voices.")
            info = await self.find_visible(user_id, guild_id, name)
            return await self._voice(info.id, user_id, guild_id, prefs, allowed) or self._base(prefs)
        own = await self._voice(prefs.active_voice_id, user_id, guild_id, prefs, allowed) \
            or self.stock.voice(prefs.stock_voice, prefs.speed, prefs.pitch)
        if guild_id is not None and (own is None or (await self.prefs.guild(guild_id)).lock_voice):
            for ref in await self._assigned(user_id, guild_id, roles):
                assigned = await self._voice(ref, user_id, guild_id, prefs, allowed)
                if assigned is not None:
                    return assigned
        return own or self._base(prefs)

    def _base(self, prefs: UserPrefs) -> Voice:
        """The user's stock voice, else the default, in their speed and pitch."""
        return self.stock.voice(prefs.stock_voice, prefs.speed, prefs.pitch) or Voice(speed=prefs.speed,
                                                                                       pitch=prefs.pitch)

    async def _voice(self, ref: str | None, user_id: int, guild_id: int | None, prefs: UserPrefs,
                     allowed: bool) -> Voice | None:
        """A stored voice (a stock voice's name, or a registered voice's id) in the user's speed and pitch; None
        when there is none or they may not use it here (custom voices off, the share withdrawn, no features)."""
        if not ref:
            return None
        stock = self.stock.voice(ref, prefs.speed, prefs.pitch)
        if stock is not None:
            return stock
        if not allowed or not await repo.may_use(self.db, ref, user_id, guild_id):
            return None
        profile = await self.profile(ref)
        return Voice(name=ref, speed=prefs.speed, pitch=prefs.pitch, profile=profile) if profile else None

    async def _assigned(self, user_id: int, guild_id: int, roles: Sequence[int]) -> list[str]:
        """The voices the server gave this member, first first: a moderator's, their highest role's."""
        member = await self.prefs.member(guild_id, user_id)
        role_voice = role_voices.voice_of((await self.prefs.guild(guild_id)).role_voices, roles)
        return [ref for ref in (member.voice, role_voice) if ref]

    async def profile(self, voice_id: str) -> VoiceProfile | None:
        """The current backend's features of a voice: an LRU in front of one indexed query. A voice stored before
        a model change is fitted again from its clip in the background (one at a time, by the engine's
        registrar); meanwhile it speaks with the features it had, where the backend still reads them."""
        info = self.engine.info
        key = (voice_id, info.name, info.version)
        if key in self._profiles:
            self._profiles.move_to_end(key)
            return self._profiles[key]
        found = await repo.load_features(self.db, voice_id, info.name, info.version)
        profile = None
        if found is not None and found.blob is not None:
            profile = VoiceProfile(voice_id, info.name, info.version, found.blob, found.info.transcript)
        elif found is not None:
            profile = await self._earlier(voice_id, found.info.transcript)
            if voice_id not in self._refits and voice_id not in self._refit_failed:
                log.info("voice %s has no %s %s features; fitting it again from its clip", voice_id, info.name,
                         info.version)
                self._refits[voice_id] = asyncio.create_task(self._refit(voice_id, key))
        self._remember(key, profile)
        return profile

    def _remember(self, key: tuple[str, str, str], profile: VoiceProfile | None) -> None:
        self._profiles[key] = profile
        self._profiles.move_to_end(key)
        while len(self._profiles) > self.settings.cache_size:
            self._profiles.popitem(last=False)

    async def _earlier(self, voice_id: str, transcript: str) -> VoiceProfile | None:
        """The features an earlier version of this backend (or one whose features it reads) extracted."""
        info = self.engine.info
        readable = (info.name, *info.reads)
        found = await repo.earlier_features(self.db, voice_id, readable)
        return None if found is None else VoiceProfile(voice_id, info.name, found[0], found[1], transcript)

    async def _refit(self, voice_id: str, key: tuple[str, str, str]) -> None:
        try:
            profile = await self._derive(voice_id)
        except Exception:  # a refit is best effort; the voice keeps its earlier features
            log.exception("voice %s: fitting it again failed", voice_id)
            profile = None
        finally:
            self._refits.pop(voice_id, None)
        if profile is None:
            self._refit_failed.add(voice_id)
            return
        self._remember(key, profile)

    async def _derive(self, voice_id: str) -> VoiceProfile | None:
        """Extract the current backend's features from the stored reference clip (after a model change)."""
        stored = await repo.load_clip(self.db, voice_id)
        if stored is None:
            return None
        flac, transcript = stored
        try:
            reg = await self._run_registration(flac, transcript)
        except EngineError as exc:
            log.warning("voice %s: features could not be derived again: %s", voice_id, exc)
            return None
        info = self.engine.info
        blob = reg.features.get((info.name, info.version))
        if blob is None:
            return None
        await repo.put_features(self.db, voice_id, info.name, info.version, blob)
        return VoiceProfile(voice_id, info.name, info.version, blob, transcript)

    async def refitted(self) -> None:
        """Wait for the refits under way (tests, shutdown)."""
        while self._refits:
            await asyncio.gather(*self._refits.values(), return_exceptions=True)

    async def find_visible(self, user_id: int, guild_id: int | None, name: str, who: str = "You have") -> VoiceInfo:
        wanted = " ".join(name.split()).lower()
        for info in await repo.list_visible(self.db, user_id, guild_id, prefix=wanted, limit=50):
            if info.name.lower() == wanted:
                return info
        raise UserError(f"{who} no voice named {name[:40]!r} (see /voice list).")

    async def _is_visible(self, user_id: int, guild_id: int | None, name: str) -> bool:
        try:
            await self.find_visible(user_id, guild_id, name)
        except UserError:
            return False
        return True

    async def find_owned(self, owner_id: int, name: str) -> VoiceInfo:
        info = await repo.find_owned(self.db, owner_id, " ".join(name.split()))
        if info is None:
            raise UserError(f"You own no voice named {name[:40]!r} (see /voice list).")
        return info

    async def visible(self, user_id: int, guild_id: int | None) -> list[VoiceInfo]:
        return await repo.list_visible(self.db, user_id, guild_id, limit=50)

    async def autocomplete(self, user_id: int, guild_id: int | None, current: str,
                           *, owned_only: bool = False) -> list[app_commands.Choice[str]]:
        infos = await repo.list_visible(self.db, user_id, guild_id, prefix=current.strip()[:32], limit=25)
        if owned_only:
            infos = [i for i in infos if i.owner_id == user_id]
        choices = [app_commands.Choice(name=i.name if i.owner_id == user_id else f"{i.name} (shared)", value=i.name)
                   for i in infos]
        return choices if owned_only else choices + self.stock.choices(current, taken=len(choices))

    # -- registering ---------------------------------------------------------------------------------
    async def download(self, url: str, declared_size: int, cap: int | None = None) -> bytes:
        """Fetch an attachment, refusing it before (declared size) and while (bytes received) over the cap
        (default: the clip size limit)."""
        cap = self.settings.max_clip_bytes if cap is None else cap
        if declared_size > cap:
            raise UserError(f"That file is {declared_size / 1e6:.1f} MB; the limit is {cap / 1e6:.0f} MB.")
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S))
        data = bytearray()
        try:
            async with self._session.get(url) as response:
                if response.status != 200:
                    raise UserError("I could not download that file from Discord; please upload it again.")
                if response.content_length is not None and response.content_length > cap:
                    raise UserError(f"That file is over the {cap / 1e6:.0f} MB limit.")
                async for chunk in response.content.iter_chunked(65536):
                    data += chunk
                    if len(data) > cap:
                        raise UserError(f"That file is over the {cap / 1e6:.0f} MB limit.")
        except (aiohttp.ClientError, asyncio.TimeoutError):
            raise UserError("The download of that file failed or was too slow; please upload it again.") from None
        return bytes(data)

    async def _run_registration(self, data: bytes, transcript: str, progress: Progress | None = None) -> Registration:
        """The engine checks the clip and its backend derives its own features (for a remote backend: the
        clip is uploaded to the engine server)."""
        return await self.engine.register(data, transcript, max_bytes=self.settings.max_clip_bytes, progress=progress)

    @property
    def _too_many(self) -> str:
        return f"You have {self.settings.max_per_user} voices, the most allowed; delete one first."

    async def check_new(self, owner_id: int, name: str) -> str:
        """`name` checked as a new voice of `owner_id`'s (before a clip is asked for, and again when it is stored)."""
        name = check_name(name)
        if await repo.find_owned(self.db, owner_id, name) is not None:
            raise UserError(f"You already have a voice named {name!r}; pick another name or delete it first.")
        if await repo.count_owned(self.db, owner_id) >= self.settings.max_per_user:
            raise UserError(self._too_many)
        return name

    async def register(self, owner_id: int, name: str, data: bytes, transcript: str,
                       progress: Progress | None = None) -> VoiceInfo:
        """Check, analyse and store a clip as `owner_id`'s voice `name`: all of it is stored, or nothing.
        `progress` is called as the engine's fit goes; the user's voice stays what it was meanwhile."""
        name = await self.check_new(owner_id, name)
        try:
            reg = await self._run_registration(data, transcript, progress)
        except EngineError as exc:
            raise UserError(str(exc)) from None
        try:
            return await repo.add_voice(
                self.db, owner_id=owner_id, name=name, transcript=reg.transcript, clip_flac=reg.flac,
                clip_seconds=reg.duration_s, embedding=reg.embedding, features=dict(reg.features),
                max_owned=self.settings.max_per_user,  # checked again: other registrations ran meanwhile
            )
        except DuplicateVoiceName:
            raise UserError(f"You already have a voice named {name!r}.") from None
        except repo.VoiceLimitReached:
            raise UserError(self._too_many) from None

    # -- owner actions -------------------------------------------------------------------------------
    async def use(self, user_id: int, guild_id: int | None, name: str) -> str:
        """Make `name` the user's voice (a registered voice they may use, else a stock voice); its name in words."""
        ref, said, stock = await self._usable(user_id, guild_id, name)
        await self.prefs.update_user(user_id, active_voice_id=None if stock else ref,
                                     stock_voice=ref if stock else None)
        return said

    async def assign(self, guild_id: int, member_id: int, name: str) -> str | None:
        """A moderator sets `member_id`'s voice in this server (/voice set): a voice they may use, its name in
        words; or `default`, None: the one set is removed. A UserError says why not (nothing changed)."""
        if " ".join(name.split()).lower() in CLEARED:
            await self.prefs.update_member(guild_id, member_id, voice=None)
            return None
        ref, said, _ = await self._usable(member_id, guild_id, name, who="That member has")
        await self.prefs.update_member(guild_id, member_id, voice=ref)
        return said

    async def _usable(self, user_id: int, guild_id: int | None, name: str,
                      who: str = "You have") -> tuple[str, str, bool]:
        """(the voice as stored, its name in words, whether it is a stock voice) for `name`, a voice `user_id` may
        use here, or a UserError."""
        stock = self.stock.find(name)
        if stock is not None and not await self._is_visible(user_id, guild_id, name):
            return stock.name, stock.describe(), True
        if guild_id is not None and not (await self.prefs.guild(guild_id)).custom_voices:
            raise UserError("This server does not allow custom voices.")
        info = await self.find_visible(user_id, guild_id, name, who)
        return info.id, repr(info.name), False

    async def role_reader(self, guild: discord.Guild, stored: str) -> Callable[[str], tuple[str, str]]:
        """The reader of `/settings set role_voice @role VOICE` for `guild`, whose mapping is `stored`: a stock voice
        or a registered voice shared with the server (one every member may use); VOICE `off` removes the role's."""
        shared = {} if not (await self.prefs.guild(guild.id)).custom_voices else {
            i.name.lower(): i for i in await repo.list_visible(self.db, 0, guild.id, limit=50)}  # nobody's own

        def read(raw: str) -> tuple[str, str]:
            role_text, _, voice = " ".join(raw.split()).partition(" ")
            mention = ROLE_MENTION.fullmatch(role_text)
            role = guild.get_role(int(mention.group(1) or mention.group(2))) if mention else None
            if role is None:
                raise OptionError(f"I see no role {role_text[:40]!r} in this server: role_voice takes @role VOICE "
                                  "(or @role off).")
            mapping = role_voices.parse(stored)
            if voice.lower() in CLEARED:
                mapping.pop(role.id, None)
                return role_voices.format_mapping(mapping), f"off for {role.mention}"
            stock, info = self.stock.find(voice), shared.get(voice.lower())
            found = (stock.name, stock.label) if stock is not None else (info.id, info.name) if info else None
            if found is None:
                raise OptionError(f"No stock voice or voice shared with this server is named {voice[:40]!r}; a role's "
                                  "voice must be one every member can use (/voice share NAME server:true).")
            if role.id not in mapping and len(mapping) >= role_voices.MAX_ROLES:
                raise OptionError(f"{role_voices.MAX_ROLES} roles have a voice, the most allowed; remove one first.")
            mapping[role.id] = found
            return role_voices.format_mapping(mapping), f"{found[1]} for {role.mention}"

        return read

    async def reset(self, user_id: int) -> None:
        await self.prefs.update_user(user_id, **VOICE_DEFAULTS)

    async def set_speed_pitch(self, user_id: int, speed: float | None, pitch: float | None) -> tuple[float, float]:
        try:
            changes = {f: USER_OPTIONS[f].check(v) for f, v in (("speed", speed), ("pitch", pitch)) if v is not None}
        except OptionError as exc:
            raise UserError(str(exc)) from None
        prefs = await self.prefs.update_user(user_id, **changes) if changes else await self.prefs.user(user_id)
        return prefs.speed, prefs.pitch

    async def rename(self, owner_id: int, name: str, new_name: str) -> VoiceInfo:
        info = await self.find_owned(owner_id, name)
        new_name = check_name(new_name)
        try:
            await repo.rename(self.db, info.id, new_name)
        except DuplicateVoiceName:
            raise UserError(f"You already have a voice named {new_name!r}.") from None
        return info

    async def delete(self, owner_id: int, name: str) -> VoiceInfo:
        info = await self.find_owned(owner_id, name)
        await repo.delete_voice(self.db, info.id)
        for key in [k for k in self._profiles if k[0] == info.id]:
            del self._profiles[key]
        self.prefs.forget_user(owner_id)
        return info

    async def share(self, owner_id: int, name: str, kind: str, target_id: int, *, undo: bool = False) -> bool:
        info = await self.find_owned(owner_id, name)
        if kind == "user" and target_id == owner_id:
            raise UserError("That voice is already yours.")
        if undo:
            return await repo.unshare(self.db, info.id, kind, target_id)
        return await repo.share(self.db, info.id, kind, target_id)

    async def close(self) -> None:
        for task in list(self._refits.values()):
            task.cancel()
        await asyncio.gather(*self._refits.values(), return_exceptions=True)
        if self._session is not None:
            await self._session.close()
