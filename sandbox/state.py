"""Discord-like state of the sandbox: snowflakes, users, guilds, channels, roles, members, messages, permissions."""
from __future__ import annotations

import asyncio
import datetime as _dt
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

DISCORD_EPOCH_MS = 1420070400000

# Permission bits (Discord's numbering).
CREATE_INSTANT_INVITE = 1 << 0
ADMINISTRATOR = 1 << 3
MANAGE_CHANNELS = 1 << 4
MANAGE_GUILD = 1 << 5
ADD_REACTIONS = 1 << 6
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
MANAGE_MESSAGES = 1 << 13
EMBED_LINKS = 1 << 14
ATTACH_FILES = 1 << 15
READ_MESSAGE_HISTORY = 1 << 16
USE_EXTERNAL_EMOJIS = 1 << 18
CONNECT = 1 << 20
SPEAK = 1 << 21
MOVE_MEMBERS = 1 << 24
USE_VAD = 1 << 25
CHANGE_NICKNAME = 1 << 26
USE_APPLICATION_COMMANDS = 1 << 31
ALL_PERMISSIONS = (1 << 51) - 1
DEFAULT_EVERYONE = (CREATE_INSTANT_INVITE | ADD_REACTIONS | VIEW_CHANNEL | SEND_MESSAGES | EMBED_LINKS
                    | ATTACH_FILES | READ_MESSAGE_HISTORY | USE_EXTERNAL_EMOJIS | CONNECT | SPEAK | USE_VAD
                    | CHANGE_NICKNAME | USE_APPLICATION_COMMANDS)

# Gateway intents used for filtering.
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_VOICE_STATES = 1 << 7
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15

JOINED_AT = "2024-01-01T00:00:00+00:00"


def iso_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat()


class Snowflakes:
    """Generates Discord snowflakes from the current time, unique within the sandbox."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._last = 0

    def _make(self, ms_rel: int) -> int:
        ms_rel = max(ms_rel, self._last)
        self._last = ms_rel
        return (ms_rel << 22) | (next(self._counter) % 4096)

    def next(self) -> int:
        return self._make(int(time.time() * 1000) - DISCORD_EPOCH_MS)

    def next_for_shard(self, shard_id: int, shard_count: int) -> int:
        """An id whose owning shard ``(id >> 22) % shard_count`` is ``shard_id``."""
        ms = max(int(time.time() * 1000) - DISCORD_EPOCH_MS, self._last)
        ms += (shard_id - ms) % shard_count
        sid = (ms << 22) | (next(self._counter) % 4096)
        return sid


class Signal:
    """A broadcast 'something changed' notification, for bounded waits on a predicate."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str = "condition") -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise asyncio.TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}")
            try:
                await asyncio.wait_for(self._event.wait(), remaining)
            except asyncio.TimeoutError:
                pass


@dataclass(eq=False)
class User:
    id: int
    name: str
    bot: bool = False
    global_name: Optional[str] = None

    @property
    def mention(self) -> str:
        return f"<@{self.id}>"

    def to_json(self) -> dict:
        return {"id": str(self.id), "username": self.name, "discriminator": "0", "avatar": None,
                "global_name": self.global_name or self.name, "bot": self.bot, "flags": 0, "public_flags": 0}


@dataclass(eq=False)
class Role:
    id: int
    guild: "Guild"
    name: str
    permissions: int = 0
    position: int = 0
    managed: bool = False

    @property
    def mention(self) -> str:
        return f"<@&{self.id}>"

    def to_json(self) -> dict:
        return {"id": str(self.id), "name": self.name, "permissions": str(self.permissions),
                "position": self.position, "color": 0, "hoist": False, "managed": self.managed,
                "mentionable": False, "flags": 0}

    def edit(self, *, permissions: Optional[int] = None, name: Optional[str] = None) -> None:
        """Change the role; sends GUILD_ROLE_UPDATE when the bot is connected."""
        if permissions is not None:
            self.permissions = permissions
        if name is not None:
            self.name = name
        self.guild._emit("GUILD_ROLE_UPDATE", {"guild_id": str(self.guild.id), "role": self.to_json()})


@dataclass(eq=False)
class Member:
    user: User
    guild: "Guild"
    roles: list = field(default_factory=list)
    nick: Optional[str] = None

    @property
    def id(self) -> int:
        return self.user.id

    def to_json(self, with_user: bool = True, channel: Optional["Channel"] = None) -> dict:
        data = {"roles": [str(r.id) for r in self.roles], "nick": self.nick, "joined_at": JOINED_AT,
                "flags": 0, "deaf": False, "mute": False, "pending": False, "avatar": None}
        if with_user:
            data["user"] = self.user.to_json()
        if channel is not None:
            data["permissions"] = str(self.guild.permissions_for(self.user, channel))
        return data


@dataclass(eq=False)
class Attachment:
    """Bytes served over HTTP by the sandbox, with knobs for hostile downloads."""
    id: int
    filename: str
    data: bytes
    content_type: str
    url: str = ""
    proxy_url: str = ""
    size: Optional[int] = None          # size reported in JSON (default: len(data))
    content_length: Any = "real"        # "real", None (chunked, no header) or an int to send as the header
    stall_s: float = 0.0                # pause this long after the first half of the body

    def to_json(self) -> dict:
        return {"id": str(self.id), "filename": self.filename,
                "size": len(self.data) if self.size is None else self.size,
                "url": self.url, "proxy_url": self.proxy_url, "content_type": self.content_type}


@dataclass(eq=False)
class Message:
    id: int
    channel: "Channel"
    author: User
    content: str = ""
    attachments: list = field(default_factory=list)
    embeds: list = field(default_factory=list)
    components: list = field(default_factory=list)
    flags: int = 0
    type: int = 0
    tts: bool = False
    webhook_id: Optional[int] = None
    application_id: Optional[int] = None
    interaction_metadata: Optional[dict] = None
    timestamp: str = field(default_factory=iso_now)
    edited_timestamp: Optional[str] = None
    deleted: bool = False
    mentions: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & 64)

    def to_json(self) -> dict:
        data = {"id": str(self.id), "type": self.type, "content": self.content, "channel_id": str(self.channel.id),
                "author": self.author.to_json(), "timestamp": self.timestamp, "edited_timestamp": self.edited_timestamp,
                "tts": self.tts, "mention_everyone": False, "mentions": [u.to_json() for u in self.mentions],
                "mention_roles": [], "attachments": [a.to_json() for a in self.attachments], "embeds": self.embeds,
                "pinned": False, "flags": self.flags, "components": self.components}
        if self.channel.guild is not None:
            data["guild_id"] = str(self.channel.guild.id)
        if self.webhook_id is not None:
            data["webhook_id"] = str(self.webhook_id)
        if self.application_id is not None:
            data["application_id"] = str(self.application_id)
        if self.interaction_metadata is not None:
            data["interaction_metadata"] = self.interaction_metadata
        data.update(self.extra)
        return data


@dataclass(eq=False)
class Channel:
    id: int
    guild: Optional["Guild"]
    name: str
    type: int = 0               # 0 text, 1 DM, 2 voice
    position: int = 0
    user_limit: int = 0
    bitrate: int = 64000
    overwrites: dict = field(default_factory=dict)   # target id -> (type 0 role / 1 member, allow, deny)
    messages: list = field(default_factory=list)
    recipient: Optional[User] = None

    @property
    def mention(self) -> str:
        return f"<#{self.id}>"

    def set_overwrite(self, target: Union[Role, User, Member], *, allow: int = 0, deny: int = 0) -> None:
        """Set a permission overwrite for a role or member; sends CHANNEL_UPDATE when the bot is connected."""
        kind = 0 if isinstance(target, Role) else 1
        self.overwrites[target.id] = (kind, allow, deny)
        if self.guild is not None:
            self.guild._emit("CHANNEL_UPDATE", self.to_json())

    def to_json(self) -> dict:
        if self.type == 1:
            return {"id": str(self.id), "type": 1, "last_message_id": None,
                    "recipients": [self.recipient.to_json()] if self.recipient else []}
        data = {"id": str(self.id), "type": self.type, "name": self.name, "position": self.position,
                "guild_id": str(self.guild.id), "parent_id": None, "nsfw": False,
                "permission_overwrites": [{"id": str(t), "type": k, "allow": str(a), "deny": str(d)}
                                          for t, (k, a, d) in self.overwrites.items()]}
        if self.type == 2:
            data.update(bitrate=self.bitrate, user_limit=self.user_limit, rtc_region=None)
        else:
            data.update(topic=None, rate_limit_per_user=0, last_message_id=None)
        return data


class Guild:
    """A guild handle: build channels, roles and members; the bot is always a member."""

    def __init__(self, gid: int, name: str, owner: User, ids: Snowflakes, emit: Callable[..., None]) -> None:
        self.id = gid
        self.name = name
        self.owner = owner
        self._ids = ids
        self._emit_cb = emit
        self.roles: list[Role] = [Role(gid, self, "@everyone", DEFAULT_EVERYONE, 0)]
        self.channels: list[Channel] = []
        self.members: dict[int, Member] = {}
        self.voice_states: dict[int, dict] = {}    # user id -> {"channel": Channel, "session_id": str}

    def __repr__(self) -> str:
        return f"<Guild {self.name!r} id={self.id}>"

    @property
    def everyone(self) -> Role:
        return self.roles[0]

    def _emit(self, event: str, data: dict) -> None:
        self._emit_cb(event, data, self)

    def _channel(self, name: str, type_: int, user_limit: int = 0) -> Channel:
        ch = Channel(self._ids.next(), self, name, type_, position=len(self.channels), user_limit=user_limit)
        self.channels.append(ch)
        self._emit("CHANNEL_CREATE", ch.to_json())
        return ch

    def text_channel(self, name: str) -> Channel:
        return self._channel(name, 0)

    def voice_channel(self, name: str, user_limit: int = 0) -> Channel:
        return self._channel(name, 2, user_limit)

    def channel(self, name: str) -> Channel:
        for ch in self.channels:
            if ch.name == name:
                return ch
        raise KeyError(f"no channel {name!r} in {self!r}")

    def role(self, name: str, permissions: int = 0) -> Role:
        role = Role(self._ids.next(), self, name, permissions, position=len(self.roles))
        self.roles.append(role)
        self._emit("GUILD_ROLE_CREATE", {"guild_id": str(self.id), "role": role.to_json()})
        return role

    def add_member(self, user: User, roles: Optional[list] = None, nick: Optional[str] = None) -> Member:
        if user.id in self.members:
            member = self.members[user.id]
            member.roles = list(roles or member.roles)
            member.nick = nick if nick is not None else member.nick
            self._emit("GUILD_MEMBER_UPDATE", {**member.to_json(), "guild_id": str(self.id)})
            return member
        member = Member(user, self, list(roles or []), nick)
        self.members[user.id] = member
        self._emit("GUILD_MEMBER_ADD", {**member.to_json(), "guild_id": str(self.id)})
        return member

    def member(self, user: Union[User, Member, int]) -> Member:
        uid = user if isinstance(user, int) else user.id
        return self.members[uid]

    def remove_member(self, user: Union[User, Member]) -> None:
        self.members.pop(user.id, None)
        self._emit("GUILD_MEMBER_REMOVE", {"guild_id": str(self.id), "user": self.member_user(user).to_json()})

    @staticmethod
    def member_user(obj: Union[User, Member]) -> User:
        return obj.user if isinstance(obj, Member) else obj

    def base_permissions(self, user: User) -> int:
        if user.id == self.owner.id:
            return ALL_PERMISSIONS
        member = self.members.get(user.id)
        perms = self.everyone.permissions
        for role in (member.roles if member else []):
            perms |= role.permissions
        return ALL_PERMISSIONS if perms & ADMINISTRATOR else perms

    def permissions_for(self, user: User, channel: Optional[Channel] = None) -> int:
        """Discord's permission algorithm: roles, then @everyone / role / member overwrites."""
        perms = self.base_permissions(user)
        if perms == ALL_PERMISSIONS or channel is None:
            return perms
        member = self.members.get(user.id)
        role_ids = {r.id for r in (member.roles if member else [])}
        ow = channel.overwrites
        if self.id in ow:
            _, allow, deny = ow[self.id]
            perms = (perms & ~deny) | allow
        allow_r = deny_r = 0
        for tid, (kind, allow, deny) in ow.items():
            if kind == 0 and tid in role_ids:
                allow_r |= allow
                deny_r |= deny
        perms = (perms & ~deny_r) | allow_r
        if user.id in ow:
            _, allow, deny = ow[user.id]
            perms = (perms & ~deny) | allow
        return perms

    def voice_state_json(self, user_id: int) -> dict:
        vs = self.voice_states.get(user_id)
        member = self.members.get(user_id)
        data = {"guild_id": str(self.id), "channel_id": str(vs["channel"].id) if vs else None,
                "user_id": str(user_id), "session_id": vs["session_id"] if vs else "none",
                "deaf": False, "mute": False, "self_deaf": bool(vs and vs.get("self_deaf")),
                "self_mute": bool(vs and vs.get("self_mute")), "self_video": False, "suppress": False,
                "request_to_speak_timestamp": None}
        if member is not None:
            data["member"] = member.to_json()
        return data

    def to_json(self) -> dict:
        return {"id": str(self.id), "name": self.name, "unavailable": False, "member_count": len(self.members),
                "owner_id": str(self.owner.id), "icon": None, "splash": None, "discovery_splash": None,
                "features": [], "emojis": [], "stickers": [], "roles": [r.to_json() for r in self.roles],
                "channels": [c.to_json() for c in self.channels],
                "members": [m.to_json() for m in self.members.values()],
                "voice_states": [{k: v for k, v in self.voice_state_json(uid).items() if k != "guild_id"}
                                 for uid in self.voice_states],
                "presences": [], "threads": [], "stage_instances": [], "guild_scheduled_events": [],
                "large": False, "verification_level": 0, "default_message_notifications": 0,
                "explicit_content_filter": 0, "mfa_level": 0, "nsfw_level": 0, "premium_tier": 0,
                "preferred_locale": "en-US", "afk_channel_id": None, "afk_timeout": 300,
                "system_channel_id": None, "system_channel_flags": 0, "rules_channel_id": None,
                "public_updates_channel_id": None, "vanity_url_code": None, "description": None,
                "banner": None, "max_members": 500000, "premium_subscription_count": 0,
                "joined_at": JOINED_AT, "application_id": None}
