"""The Sandbox: three loopback listeners (REST+gateway, TLS voice WS, UDP) and the test-facing API."""
from __future__ import annotations

import asyncio
import secrets
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Pattern, Union

import trustme
from aiohttp import web

from .capture import Capture
from .dave import DaveGroup
from .faults import Faults, RouteFault
from .gateway import GatewayServer, GatewaySession
from .interactions import CommandNotSynced, Interaction, InteractionStore, Response, command_data, new_token
from .rest import RestApi, serve_attachment
from .state import (
    ADMINISTRATOR,
    INTENT_DIRECT_MESSAGES,
    INTENT_GUILD_MESSAGES,
    INTENT_MESSAGE_CONTENT,
    INTENT_VOICE_STATES,
    SEND_MESSAGES,
    VIEW_CHANNEL,
    Attachment,
    Channel,
    Guild,
    Member,
    Message,
    Signal,
    Snowflakes,
    User,
)
from .talker import Talk, wav_frames
from .voice import VoiceServer

Target = Union[User, Member]


class Sandbox:
    """A local Discord stand-in. ``async with Sandbox() as sb:`` then point discord.py at it
    (``sandbox.client.point_discord_at(sb)``) and start the bot with ``sb.token``."""

    def __init__(self, *, bot_name: str = "SandboxBot", token: Optional[str] = None, shards: int = 1,
                 bot_permissions: int = ADMINISTRATOR, modes: Optional[list] = None,
                 heartbeat_interval: int = 41250, dave: bool = True) -> None:
        self._ids = Snowflakes()
        self._signal = Signal()
        self.token = token or f"sandbox.{secrets.token_urlsafe(24)}"
        self.recommended_shards = shards
        self.bot_permissions = bot_permissions
        self.application_id = self._ids.next()
        self.bot_user = User(self.application_id, bot_name, bot=True)
        self.owner = User(self._ids.next(), "owner")
        self.users: dict[int, User] = {self.bot_user.id: self.bot_user, self.owner.id: self.owner}
        self.guilds: list[Guild] = []
        self.dm_channels: dict[int, Channel] = {}
        self.faults = Faults()
        self.gateway = GatewayServer(self, heartbeat_interval)
        self.voice = VoiceServer(self, modes, dave_required=dave)   # dave=False: the old non-E2EE voice
        self.rest = RestApi(self)
        self._interactions = InteractionStore()
        self._attachments: dict[int, Attachment] = {}
        self._commands: dict[Optional[int], list] = {}
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self._runners: list[web.AppRunner] = []
        self.api_url = self.gateway_url = self.http_url = self.voice_endpoint = ""
        self.ca_pem_path = ""
        self._ca: Optional[trustme.CA] = None

    # ---- lifecycle ---------------------------------------------------------------------------------------
    async def __aenter__(self) -> "Sandbox":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def start(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="sandbox-")
        self._ca = trustme.CA()
        cert = self._ca.issue_cert("127.0.0.1", "localhost")
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(server_ctx)
        self.ca_pem_path = str(Path(self._tmp.name) / "sandbox-ca.pem")
        self._ca.cert_pem.write_to_path(self.ca_pem_path)

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self.gateway.handle)
        app.router.add_get("/attachments/{aid}/{filename}", self._serve_attachment)
        app.router.add_route("*", "/api/v10/{tail:.*}", self.rest.handle)
        port = await self._serve(app, None)
        self.http_url = f"http://127.0.0.1:{port}"
        self.api_url = f"{self.http_url}/api/v10"
        self.gateway_url = f"ws://127.0.0.1:{port}/gateway"

        vapp = web.Application()
        vapp.router.add_get("/", self.voice.handle)
        vport = await self._serve(vapp, server_ctx)
        self.voice_endpoint = f"127.0.0.1:{vport}"
        await self.voice.start_udp()

    async def _serve_attachment(self, request: web.Request) -> web.StreamResponse:
        return await serve_attachment(self, request)

    async def _serve(self, app: web.Application, ssl_ctx: Optional[ssl.SSLContext]) -> int:
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_ctx)
        await site.start()
        self._runners.append(runner)
        return runner.addresses[0][1]

    async def stop(self) -> None:
        await self.gateway.close_all()
        for vs in list(self.voice.sessions.values()):
            if vs.ws is not None and not vs.ws.closed:
                try:
                    await asyncio.wait_for(vs.ws.close(code=1001), 2.0)
                except Exception:  # noqa: BLE001 - closing on the way out
                    pass
        self.voice.close()
        self.voice.dave.close()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def client_ssl_context(self) -> ssl.SSLContext:
        """An SSLContext that trusts the sandbox CA (for the voice websocket)."""
        ctx = ssl.create_default_context()
        self._ca.configure_trust(ctx)
        return ctx

    # ---- state building ----------------------------------------------------------------------------------
    def user(self, name: str, bot: bool = False) -> User:
        user = User(self._ids.next(), name, bot=bot)
        self.users[user.id] = user
        return user

    def guild(self, name: str, *, owner: Optional[User] = None, shard: Optional[tuple] = None) -> Guild:
        """A new guild with the bot as a member (role with ``bot_permissions``). ``shard=(id, count)`` picks an
        id owned by that shard. Sent with GUILD_CREATE at once if the bot is connected."""
        gid = self._ids.next_for_shard(*shard) if shard else self._ids.next()
        owner = owner or self.owner
        guild = Guild(gid, name, owner, self._ids, self._emit)
        guild.bot_role = guild.role(self.bot_user.name, self.bot_permissions)
        guild.bot_role.managed = True
        guild.add_member(self.bot_user, roles=[guild.bot_role])
        if owner.id != self.bot_user.id:
            guild.add_member(owner)
        self.guilds.append(guild)
        self.gateway.announce_guild(guild)
        return guild

    def guild_by_id(self, gid: int) -> Optional[Guild]:
        return next((g for g in self.guilds if g.id == gid), None)

    def channel_by_id(self, cid: int) -> Optional[Channel]:
        for g in self.guilds:
            for ch in g.channels:
                if ch.id == cid:
                    return ch
        return next((c for c in self.dm_channels.values() if c.id == cid), None)

    def user_by_id(self, uid: int) -> Optional[User]:
        return self.users.get(uid)

    def dm_channel(self, user: User) -> Channel:
        if user.id not in self.dm_channels:
            self.dm_channels[user.id] = Channel(self._ids.next(), None, user.name, type=1, recipient=user)
        return self.dm_channels[user.id]

    def shard_of(self, guild: Guild, shard_count: Optional[int] = None) -> int:
        return (guild.id >> 22) % (shard_count or self.recommended_shards)

    def _emit(self, event: str, data: Any, guild: Optional[Guild], intent: int = 0) -> int:
        return self.gateway.dispatch(event, data, guild.id if guild else None, intent)

    # ---- voice -------------------------------------------------------------------------------------------
    def _set_voice(self, guild: Guild, user: User, channel: Optional[Channel], session_id: Optional[str] = None,
                   **flags) -> None:
        before = guild.voice_states.get(user.id, {}).get("channel")
        if user.id != self.bot_user.id and before is not channel:      # a simulated human's DAVE client
            if before is not None:
                self.voice.dave.member_left(user.id, before.id)
            if channel is not None:
                self.voice.dave.human_joined(user.id, channel.id)
            self.voice.member_moved(guild.id, user.id, before and before.id, channel and channel.id)
        if channel is None:
            guild.voice_states.pop(user.id, None)
        else:
            if user.id not in guild.members:
                guild.add_member(user)
            guild.voice_states[user.id] = {"channel": channel, "session_id": session_id or secrets.token_hex(16),
                                           **flags}
        data = guild.voice_state_json(user.id)
        self._emit("VOICE_STATE_UPDATE", data, guild, 0 if user.id == self.bot_user.id else INTENT_VOICE_STATES)

    def _server_update(self, guild: Guild) -> None:
        vs = self.voice.sessions.get(guild.id) or self.voice.new_session(guild.id)
        self._emit("VOICE_SERVER_UPDATE", {"token": vs.token, "guild_id": str(guild.id),
                                           "endpoint": self.voice_endpoint}, guild)

    async def _voice_state_request(self, session: GatewaySession, d: dict) -> None:
        """The bot's op 4: join, move or leave."""
        guild = self.guild_by_id(int(d["guild_id"]))
        if guild is None:
            return
        await asyncio.sleep(0.005)
        bot = self.bot_user
        if d.get("channel_id") is None:
            self._set_voice(guild, bot, None)
            self.voice.end_session(guild.id)
            return
        channel = self.channel_by_id(int(d["channel_id"]))
        current = guild.voice_states.get(bot.id)
        flags = {"self_mute": bool(d.get("self_mute")), "self_deaf": bool(d.get("self_deaf"))}
        if current is not None and current["channel"] is not channel:
            self._set_voice(guild, bot, channel, session.session_id, **flags)      # a move: state, then server,
            self._server_update(guild)                                              # then the old voice ws is
            await asyncio.sleep(0.02)                                               # closed with 4014, as
            await self.voice.close_ws(guild.id, 4014)                               # Discord does
        else:
            self._server_update(guild)                                              # join/rejoin: server first
            self._set_voice(guild, bot, channel, session.session_id, **flags)

    async def user_joins_voice(self, user: Target, channel: Channel) -> None:
        user = Guild.member_user(user)
        self._set_voice(channel.guild, user, channel)
        await asyncio.sleep(0)

    async def user_leaves_voice(self, user: Target, guild: Guild) -> None:
        self._set_voice(guild, Guild.member_user(user), None)
        await asyncio.sleep(0)

    async def move_member(self, member: Target, channel: Optional[Channel], guild: Optional[Guild] = None) -> None:
        """Move a member (or the bot) to ``channel``; ``None`` disconnects them. A bot move is
        VOICE_STATE_UPDATE + VOICE_SERVER_UPDATE, as Discord sends it."""
        user = Guild.member_user(member)
        guild = guild or (channel.guild if channel is not None else getattr(member, "guild", None))
        if user.id == self.bot_user.id:
            if channel is None:
                await self.kick_bot_from_voice(guild)
                return
            current = guild.voice_states.get(user.id)
            self._set_voice(guild, user, channel, current["session_id"] if current else None)
            self._server_update(guild)
        else:
            self._set_voice(guild, user, channel)
        await asyncio.sleep(0)

    async def kick_bot_from_voice(self, guild: Guild) -> None:
        """Disconnect the bot like a moderator would: VOICE_STATE_UPDATE null, then voice ws close 4014."""
        self._set_voice(guild, self.bot_user, None)
        await asyncio.sleep(0.01)
        await self.voice.close_ws(guild.id, 4014)
        self.voice.end_session(guild.id)

    async def close_voice_ws(self, guild: Guild, code: int = 4015) -> bool:
        """Close the bot's voice websocket (4015: the client resumes)."""
        return await self.voice.close_ws(guild.id, code)

    def bot_voice_channel(self, guild: Guild) -> Optional[Channel]:
        vs = guild.voice_states.get(self.bot_user.id)
        return vs["channel"] if vs else None

    def voice_connected(self, guild: Guild) -> bool:
        return self.voice.connected(guild.id)

    async def wait_voice_connected(self, guild: Guild, timeout: float = 10.0, connected: bool = True) -> None:
        await self._signal.wait_for(lambda: self.voice_connected(guild) == connected, timeout,
                                    f"voice {'connected' if connected else 'disconnected'} in {guild!r}")

    def capture(self, guild: Guild) -> Capture:
        return self.voice.capture(guild.id)

    def speak(self, member: Target, wav: Union[str, Path, bytes], guild: Optional[Guild] = None, *,
              announce: bool = True) -> Talk:
        """``member``, in the bot's voice channel, starts speaking ``wav`` (16-bit PCM) into the call in real time:
        SPEAKING (op 5) with its SSRC (unless ``announce=False``), then its DAVE-encrypted Opus relayed to the bot.
        ``await talk.wait()``."""
        user = Guild.member_user(member)
        guild = guild or getattr(member, "guild", None) or next(g for g in self.guilds if user.id in g.voice_states)
        channel = self.bot_voice_channel(guild)
        vs = self.voice.sessions.get(guild.id)
        human = self.voice.dave.humans.get((channel.id, user.id)) if channel is not None else None
        if vs is None or not vs.described or human is None:
            raise RuntimeError(f"{user.name} and the bot are not in one voice call in {guild.name}")
        return Talk(self.voice, vs, human, self.voice.ssrc_of(user.id), wav_frames(wav), announce).start()

    # ---- DAVE (end-to-end encryption) --------------------------------------------------------------------
    def dave_group(self, channel: Channel) -> DaveGroup:
        """The MLS group of a voice channel (epoch, leaves, events)."""
        return self.voice.dave.group(channel.id)

    def dave_ready(self, guild: Guild) -> bool:
        """The bot is in its channel's MLS group with someone else, and no transition is pending."""
        channel = self.bot_voice_channel(guild)
        vs = self.voice.sessions.get(guild.id)
        if channel is None or vs is None or not vs.dave_version:
            return False
        group = self.voice.dave.group(channel.id)
        return (self.bot_user.id in group.in_group and self.bot_user.id not in group.stale and len(group.in_group) > 1
                and group.round is None and not group.awaiting)

    async def wait_dave_ready(self, guild: Guild, timeout: float = 10.0) -> None:
        await self._signal.wait_for(lambda: self.dave_ready(guild), timeout, f"the bot's E2EE group in {guild!r}")

    def privacy_code(self, guild: Guild) -> Optional[str]:
        """The voice privacy code the listening human's client shows for the bot's call (None: no group)."""
        channel = self.bot_voice_channel(guild)
        listener = self.voice.dave.group(channel.id).listener(self.bot_user.id) if channel is not None else None
        return listener.session.voice_privacy_code if listener is not None and listener.session.ready else None

    def dave_stats(self) -> dict[int, dict]:
        """Per guild: frames heard and dropped by the listening client (see Capture.stats)."""
        return {gid: cap.stats() for gid, cap in self.voice.captures.items()}

    def corrupt_next_commit(self) -> None:
        """Damage the next commit or welcome sent to the bot: its client answers op 31 and is added again."""
        self.voice.dave.corrupt_next.add(self.bot_user.id)

    async def dave_new_group(self, channel: Channel) -> None:
        """Op 24 (epoch 1) to everyone in the channel: the call's MLS group starts over."""
        self.voice.dave.spawn(self.voice.dave.group(channel.id).new_epoch())
        await asyncio.sleep(0)

    # ---- interactions ------------------------------------------------------------------------------------
    def commands(self, guild: Optional[Guild] = None) -> list:
        """The registered application commands (global, or for ``guild``)."""
        key = guild if isinstance(guild, int) or guild is None else guild.id
        return [dict(c) for c in self._commands.get(key, [])]

    def _store_commands(self, guild_id: Optional[int], body: list) -> list:
        old = {(c["name"], c.get("type", 1)): c for c in self._commands.get(guild_id, [])}
        out = []
        for cmd in body:
            prev = old.get((cmd["name"], cmd.get("type", 1)))  # names are unique per type (a menu may share one)
            stored = {**cmd, "id": prev["id"] if prev else str(self._ids.next()),
                      "application_id": str(self.application_id), "version": str(self._ids.next())}
            stored.setdefault("type", 1)
            stored.setdefault("description", "")
            if guild_id is not None:
                stored["guild_id"] = str(guild_id)
            out.append(stored)
        self._commands[guild_id] = out
        self._signal.fire()
        return out

    async def wait_commands(self, guild: Optional[Guild] = None, timeout: float = 10.0) -> list:
        return await self._signal.wait_for(lambda: self.commands(guild), timeout, "command sync")

    def find_command(self, name: str, guild: Optional[Guild], type_: int = 1) -> dict:
        top = name.split()[0] if type_ == 1 else name      # context-menu names hold spaces
        pools = ([self._commands.get(guild.id, [])] if guild else []) + [self._commands.get(None, [])]
        for pool in pools:
            for cmd in pool:
                if cmd["name"] == top and cmd.get("type", 1) == type_:
                    return cmd
        known = sorted({c["name"] for p in pools for c in p})
        raise CommandNotSynced(f"/{top} was not synced{' for ' + guild.name if guild else ''}; synced: {known}")

    def _interaction_payload(self, itype: int, user: User, channel: Optional[Channel], data: dict) -> dict:
        guild = channel.guild if channel is not None else None
        iid = self._ids.next()
        payload = {"id": str(iid), "application_id": str(self.application_id), "type": itype, "token": new_token(),
                   "version": 1, "data": data, "locale": "en-US", "entitlements": [], "attachment_size_limit": 26214400}
        if guild is not None:
            if user.id not in guild.members:
                guild.add_member(user)
            payload.update(
                guild_id=str(guild.id), channel_id=str(channel.id),
                channel={**channel.to_json(), "permissions": str(guild.permissions_for(user, channel))},
                member={**guild.members[user.id].to_json(channel=channel)},
                app_permissions=str(guild.permissions_for(self.bot_user, channel)), guild_locale="en-US",
                authorizing_integration_owners={"0": str(guild.id)}, context=0,
                guild={"id": str(guild.id), "locale": "en-US", "features": []})
        else:
            dm = channel or self.dm_channel(user)
            payload.update(channel_id=str(dm.id), channel=dm.to_json(), user=user.to_json(),
                           app_permissions="0", authorizing_integration_owners={"0": "0"}, context=1)
        return payload

    def _send_interaction(self, payload: dict, user: User, channel: Optional[Channel]) -> Interaction:
        guild = channel.guild if channel is not None else None
        it = Interaction(payload, channel if channel is not None else self.dm_channel(user), user)
        self._interactions.add(it)
        if self._emit("INTERACTION_CREATE", payload, guild) == 0:
            shard = self.shard_of(guild) if guild else 0
            raise RuntimeError(f"no connected bot session owns shard {shard} (has the bot connected?)")
        return it

    async def slash(self, user: Target, channel: Optional[Channel], name: str, /, **options: Any) -> Interaction:
        """Invoke ``/name`` (``"voice register"`` for subcommands) as ``user`` in ``channel`` (None: a DM)."""
        user = Guild.member_user(user)
        guild = channel.guild if channel is not None else None
        cmd = self.find_command(name, guild)
        data = command_data(cmd, name, options, (guild, channel, user))
        it = self._send_interaction(self._interaction_payload(2, user, channel, data), user, channel)
        await asyncio.sleep(0)
        return it

    async def message_command(self, user: Target, message: Message, name: str) -> Interaction:
        """Run the message context-menu command ``name`` (type 3) on ``message`` as ``user``, as Discord sends it:
        ``data.target_id`` and the message in ``data.resolved.messages`` (content included, whatever the intents)."""
        user = Guild.member_user(user)
        channel = message.channel if message.channel.type != 1 else None
        cmd = self.find_command(name, channel.guild if channel is not None else None, type_=3)
        data = {"id": str(cmd["id"]), "name": cmd["name"], "type": 3, "target_id": str(message.id),
                "resolved": {"messages": {str(message.id): message.to_json()}}}
        if cmd.get("guild_id"):
            data["guild_id"] = str(cmd["guild_id"])
        it = self._send_interaction(self._interaction_payload(2, user, channel, data), user, channel)
        await asyncio.sleep(0)
        return it

    async def autocomplete(self, user: Target, channel: Optional[Channel], name: str, focused: str, value: str,
                           /, timeout: float = 5.0, **options: Any) -> list:
        """Autocomplete option ``focused`` of ``/name`` with the partial ``value``; returns the bot's choices."""
        user = Guild.member_user(user)
        guild = channel.guild if channel is not None else None
        cmd = self.find_command(name, guild)
        data = command_data(cmd, name, {**options, focused: value}, (guild, channel, user), focused=focused)
        it = self._send_interaction(self._interaction_payload(4, user, channel, data), user, channel)
        resp = await it.wait_response(timeout)
        return resp.choices

    async def click(self, user: Target, message: Union[Message, Response, Interaction], custom_id: str,
                    component_type: int = 2, values: Optional[list] = None) -> Interaction:
        """Press the button ``custom_id`` on a message (or an interaction response holding one)."""
        user = Guild.member_user(user)
        if isinstance(message, Interaction):
            message = message.original or next((r.message for r in reversed(message.responses) if r.message), None)
        elif isinstance(message, Response):
            message = message.message
        if message is None:
            raise ValueError("no message to click on")
        ids = [c.get("custom_id") for row in message.components for c in row.get("components", [row])]
        if custom_id not in ids:
            raise LookupError(f"no component {custom_id!r} on message {message.id}; it has {ids}")
        data = {"custom_id": custom_id, "component_type": component_type}
        if values is not None:
            data["values"] = values
        payload = self._interaction_payload(3, user, message.channel if message.channel.type != 1 else None, data)
        payload["message"] = message.to_json()
        it = self._send_interaction(payload, user, message.channel if message.channel.type != 1 else None)
        it.source_message = message
        await asyncio.sleep(0)
        return it

    # ---- attachments and messages ------------------------------------------------------------------------
    def attachment(self, filename: str, data: bytes, content_type: str = "application/octet-stream", *,
                   size: Optional[int] = None, content_length: Any = "real", stall_s: float = 0.0) -> Attachment:
        """Bytes served at ``url``/``proxy_url``. ``size`` overrides the size in JSON; ``content_length``
        is "real", None (chunked) or a lying int; ``stall_s`` pauses mid-body."""
        aid = self._ids.next()
        att = Attachment(aid, filename, data, content_type, size=size, content_length=content_length, stall_s=stall_s)
        att.url = f"{self.http_url}/attachments/{aid}/{filename}"
        att.proxy_url = att.url + "?proxy=1"
        self._attachments[aid] = att
        return att

    def _message_json_for(self, msg: Message, session: GatewaySession) -> dict:
        data = msg.to_json()
        guild = msg.channel.guild
        if guild is not None and msg.author.id in guild.members and msg.webhook_id is None:
            data["member"] = guild.members[msg.author.id].to_json(with_user=False)
        mentioned = any(u.id == self.bot_user.id for u in msg.mentions)
        if (guild is not None and not session.intents & INTENT_MESSAGE_CONTENT and not mentioned
                and msg.author.id != self.bot_user.id):
            data.update(content="", embeds=[], attachments=[], components=[])
        return data

    def _dispatch_message(self, event: str, msg: Message) -> int:
        guild = msg.channel.guild
        intent = INTENT_GUILD_MESSAGES if guild is not None else INTENT_DIRECT_MESSAGES
        return self._emit(event, lambda s: self._message_json_for(msg, s), guild, intent)

    def _channel_message(self, msg: Message) -> None:
        msg.channel.messages.append(msg)
        self._dispatch_message("MESSAGE_CREATE", msg)
        self._signal.fire()

    def _bot_can_send(self, channel: Channel) -> bool:
        perms = channel.guild.permissions_for(self.bot_user, channel)
        return perms & (VIEW_CHANNEL | SEND_MESSAGES) == (VIEW_CHANNEL | SEND_MESSAGES)

    async def post(self, user: Target, channel: Channel, content: str = "", *, attachments: Optional[list] = None,
                   embeds: Optional[list] = None, webhook: bool = False, mentions: Optional[list] = None) -> Message:
        """A user (or a bot user, or a webhook) posts in a channel: MESSAGE_CREATE with ``member``."""
        user = Guild.member_user(user)
        if channel.guild is not None and user.id not in channel.guild.members and not webhook:
            channel.guild.add_member(user)
        msg = Message(self._ids.next(), channel, user, content=content, attachments=list(attachments or []),
                      embeds=list(embeds or []), mentions=list(mentions or []))
        if webhook:
            msg.webhook_id = self._ids.next()
        self._channel_message(msg)
        await asyncio.sleep(0)
        return msg

    async def edit_message(self, msg: Message, content: str) -> Message:
        msg.content = content
        msg.edited_timestamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        self._dispatch_message("MESSAGE_UPDATE", msg)
        await asyncio.sleep(0)
        return msg

    def delete_message(self, msg: Message) -> None:
        msg.deleted = True
        data = {"id": str(msg.id), "channel_id": str(msg.channel.id)}
        if msg.channel.guild is not None:
            data["guild_id"] = str(msg.channel.guild.id)
        guild = msg.channel.guild
        self._emit("MESSAGE_DELETE", data, guild, INTENT_GUILD_MESSAGES if guild else INTENT_DIRECT_MESSAGES)

    def bot_messages(self, channel: Channel) -> list[Message]:
        """Messages the bot posted in ``channel`` (REST sends and public interaction replies)."""
        return [m for m in channel.messages if m.author.id == self.bot_user.id and not m.deleted]

    async def wait_bot_message(self, channel: Channel, predicate: Optional[Callable[[Message], bool]] = None,
                               timeout: float = 10.0) -> Message:
        pred = predicate or (lambda m: True)
        return await self._signal.wait_for(
            lambda: next((m for m in self.bot_messages(channel) if pred(m)), None), timeout,
            f"a bot message in #{channel.name}")

    # ---- gateway -----------------------------------------------------------------------------------------
    def connected_shards(self) -> set[int]:
        return self.gateway.connected_shards()

    async def wait_ready(self, shards: Optional[int] = None, timeout: float = 30.0) -> None:
        """Wait until bot sessions are connected for every shard (0..shards-1)."""
        want = set(range(shards or self.recommended_shards))
        await self._signal.wait_for(lambda: want <= self.connected_shards(), timeout, f"bot sessions for shards {want}")

    async def wait_for_op(self, predicate: Callable, timeout: float = 10.0, since: int = 0):
        """Wait for a gateway op (a GatewayOp in ``gateway_log[since:]``) matching ``predicate``."""
        return await self._signal.wait_for(
            lambda: next((o for o in self.gateway.log[since:] if predicate(o)), None), timeout, "a gateway op")

    @property
    def rest_log(self):
        return self.rest.log

    @property
    def gateway_log(self):
        return self.gateway.log

    @property
    def voice_log(self):
        return self.voice.log

    @property
    def interactions(self) -> list[Interaction]:
        return self._interactions.all

    # ---- faults ------------------------------------------------------------------------------------------
    async def drop_gateway(self, shard: Optional[int] = None, code: int = 4000) -> int:
        """Close the bot's gateway connection(s); discord.py RESUMEs and the missed events are replayed."""
        return await self.gateway.drop(shard, code)

    async def request_reconnect(self, shard: Optional[int] = None) -> int:
        """Op 7 RECONNECT."""
        return await self.gateway.send_op(7, None, shard)

    async def invalidate_session(self, resumable: bool = False, shard: Optional[int] = None) -> int:
        """Op 9 INVALID_SESSION (``resumable=False``: the client re-IDENTIFYs after ~5 s)."""
        return await self.gateway.send_op(9, resumable, shard)

    def udp_faults(self, drop: float = 0.0, delay_s: float = 0.0, seed: Optional[int] = None) -> None:
        self.faults.set_udp(drop, delay_s, seed)

    def fail_route(self, method: str, path_pattern: Union[str, Pattern], status: int = 500, times: int = 1,
                   retry_after: float = 0.1, is_global: bool = False) -> RouteFault:
        return self.faults.fail_route(method, path_pattern, status, times, retry_after, is_global)
