"""REST API (/api/v10): login, command sync, interaction callbacks and webhooks, messages; attachment serving."""
from __future__ import annotations

import asyncio
import json
import mimetypes
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from aiohttp import web

from .interactions import Response
from .state import Message, iso_now

if TYPE_CHECKING:
    from .world import World

JSON = {"Content-Type": "application/json"}   # exactly this: discord.py parses nothing else


@dataclass
class RestCall:
    at: float
    method: str
    path: str
    query: dict
    status: int
    json: Any


def _same_command(a: dict, b: dict) -> bool:
    """Discord keys application commands by name and type (a slash command and a menu may share a name)."""
    return a["name"] == b["name"] and a.get("type", 1) == b.get("type", 1)


class HttpError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _route(method: str, pattern: str, auth: bool = True):
    def deco(fn):
        fn._route = (method, re.compile(pattern.replace("{id}", r"(\d+)").replace("{token}", r"([^/]+)")), auth)
        return fn
    return deco


class RestApi:
    """aiohttp handlers for the REST routes discord.py uses."""

    def __init__(self, sb: "World") -> None:
        self.sb = sb
        self.log: list[RestCall] = []
        self.routes = [getattr(self, n) for n in dir(self) if hasattr(getattr(self, n, None), "_route")]

    # ---- plumbing ----------------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        method = request.method
        try:
            body, files = await self._body(request)
        except Exception:  # noqa: BLE001 - a body the sandbox cannot read is answered as Discord would
            body, files = None, {}
        status, payload, headers = 404, {"code": 0, "message": "404: Not Found"}, dict(JSON)
        fault = self.sb.faults.route_fault(method, path)
        if fault is not None:
            status, headers, raw = fault.response()
            self._log(method, path, request, status, body)
            return web.Response(status=status, body=raw, headers=headers)
        for fn in self.routes:
            m, rx, auth = fn._route
            match = rx.fullmatch(path)
            if m != method or match is None:
                continue
            if auth and request.headers.get("Authorization") != f"Bot {self.sb.token}":
                status, payload = 401, {"code": 0, "message": "401: Unauthorized"}
                break
            try:
                status, payload = await fn(request, body, files, *match.groups())
            except HttpError as e:
                status, payload = e.status, {"code": e.code, "message": e.message, "errors": {}}
            break
        self._log(method, path, request, status, body)
        if payload is None:
            return web.Response(status=204)
        return web.Response(status=status, body=json.dumps(payload).encode(), headers=headers)

    def _log(self, method, path, request, status, body) -> None:
        self.log.append(RestCall(time.monotonic(), method, path, dict(request.query), status, body))
        self.sb._signal.fire()

    async def _body(self, request: web.Request) -> tuple[Any, dict]:
        ctype = request.headers.get("Content-Type", "")
        if ctype.startswith("multipart/"):
            body, files = None, {}
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":
                    body = json.loads(await part.text())
                else:
                    kind = part.headers.get("Content-Type", "application/octet-stream")
                    files[part.name] = (part.filename, await part.read(), kind)
            return body, files
        raw = await request.read()
        return (json.loads(raw) if raw else None), {}

    def _channel(self, cid: str):
        ch = self.sb.channel_by_id(int(cid))
        if ch is None:
            raise HttpError(404, 10003, "Unknown Channel")
        return ch

    def _message_from_body(self, channel, body: Optional[dict], files: dict, **kw) -> Message:
        body = body or {}
        msg = Message(self.sb._ids.next(), channel, self.sb.bot_user, content=body.get("content") or "",
                      embeds=body.get("embeds") or [], components=body.get("components") or [],
                      flags=int(body.get("flags") or 0), tts=bool(body.get("tts")), **kw)
        msg.attachments = self._attachments(body, files)
        return msg

    def _attachments(self, body: dict, files: dict) -> list:
        out = []
        meta = {str(a.get("id")): a for a in (body or {}).get("attachments") or [] if isinstance(a, dict)}
        for key, (filename, data, ctype) in files.items():
            idx = key[len("files["):-1] if key.startswith("files[") else key
            name = meta.get(idx, {}).get("filename") or filename or "file"
            if ctype == "application/octet-stream":  # discord.py sends every file so; Discord types it by its name
                ctype = mimetypes.guess_type(name)[0] or ctype
            out.append(self.sb.attachment(name, data, ctype))
        return out

    def _interaction(self, token: str):
        it = self.sb._interactions.by_token.get(token)
        if it is None:
            raise HttpError(404, 10015, "Unknown Webhook")
        return it

    # ---- login ---------------------------------------------------------------------------------------------
    @_route("GET", r"/users/@me")
    async def me(self, request, body, files):
        return 200, self.sb.bot_user.to_json()

    @_route("GET", r"/oauth2/applications/@me")
    async def app_info(self, request, body, files):
        sb = self.sb
        return 200, {"id": str(sb.application_id), "name": sb.bot_user.name, "description": "sandbox application",
                     "icon": None, "bot_public": True, "bot_require_code_grant": False, "owner": sb.owner.to_json(),
                     "verify_key": "0" * 64, "flags": 0, "team": None, "rpc_origins": [], "tags": [],
                     "bot": sb.bot_user.to_json(), "summary": "", "approximate_guild_count": len(sb.guilds)}

    @_route("GET", r"/gateway/bot")
    async def gateway_bot(self, request, body, files):
        return 200, {"url": self.sb.gateway_url, "shards": self.sb.recommended_shards,
                     "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}

    @_route("GET", r"/gateway", auth=False)
    async def gateway(self, request, body, files):
        return 200, {"url": self.sb.gateway_url}

    # ---- application commands ------------------------------------------------------------------------------
    @_route("PUT", r"/applications/{id}/commands")
    async def put_global(self, request, body, files, app):
        return 200, self.sb._store_commands(None, body or [])

    @_route("PUT", r"/applications/{id}/guilds/{id}/commands")
    async def put_guild(self, request, body, files, app, gid):
        return 200, self.sb._store_commands(int(gid), body or [])

    @_route("GET", r"/applications/{id}/commands")
    async def get_global(self, request, body, files, app):
        return 200, self.sb.commands(None)

    @_route("GET", r"/applications/{id}/guilds/{id}/commands")
    async def get_guild(self, request, body, files, app, gid):
        return 200, self.sb.commands(int(gid))

    @_route("POST", r"/applications/{id}/commands")
    async def post_global(self, request, body, files, app):
        cmds = [c for c in self.sb.commands(None) if not _same_command(c, body)] + [body]
        return 200, next(c for c in self.sb._store_commands(None, cmds) if _same_command(c, body))

    @_route("POST", r"/applications/{id}/guilds/{id}/commands")
    async def post_guild(self, request, body, files, app, gid):
        cmds = [c for c in self.sb.commands(int(gid)) if not _same_command(c, body)] + [body]
        return 200, next(c for c in self.sb._store_commands(int(gid), cmds) if _same_command(c, body))

    # ---- interactions --------------------------------------------------------------------------------------
    @_route("POST", r"/interactions/{id}/{token}/callback", auth=False)
    async def callback(self, request, body, files, iid, token):
        it = self._interaction(token)
        if it.callback is not None:
            raise HttpError(400, 40060, "Interaction has already been acknowledged.")
        ctype = int(body.get("type"))
        data = body.get("data") or {}
        msg = None
        if ctype in (4, 5):
            flags = int(data.get("flags") or 0) | (128 if ctype == 5 else 0)
            msg = self._message_from_body(it.channel, {**data, "flags": flags}, files, type=20,
                                          webhook_id=self.sb.application_id, application_id=self.sb.application_id,
                                          interaction_metadata={"id": str(it.id), "type": it.type,
                                                                "user": it.user.to_json()})
            it.original = msg
            if ctype == 4 and not msg.ephemeral:
                self.sb._channel_message(msg)
        elif ctype == 7 and it.source_message is not None:
            msg = self._edit(it.source_message, data, files)
        elif ctype == 6 and it.source_message is not None:
            msg = it.source_message
        it._record(Response("callback", ctype, data, time.monotonic(), msg))
        if ctype in (1, 8):
            return 204, None
        result = {"interaction": {"id": str(it.id), "type": it.type,
                                  "response_message_id": str(msg.id) if msg else None,
                                  "response_message_loading": ctype == 5,
                                  "response_message_ephemeral": bool(msg and msg.ephemeral)}}
        if msg is not None:
            result["resource"] = {"type": ctype, "message": msg.to_json()}
        else:
            result["resource"] = {"type": ctype}
        return 200, result

    def _edit(self, msg: Message, body: dict, files: dict) -> Message:
        body = body or {}
        for key in ("content", "embeds", "components"):
            if key in body and body[key] is not None:
                setattr(msg, key, body[key])
        if "attachments" in body or files:
            keep = {str(a.get("id")) for a in body.get("attachments") or [] if isinstance(a, dict)}
            msg.attachments = [a for a in msg.attachments if str(a.id) in keep] + self._attachments(body, files)
        msg.flags &= ~128
        msg.edited_timestamp = iso_now()
        if not msg.ephemeral and msg in msg.channel.messages:
            self.sb._dispatch_message("MESSAGE_UPDATE", msg)
        return msg

    def _webhook_message(self, it, mid: str) -> Message:
        if mid == "@original":
            if it.original is None:
                raise HttpError(404, 10008, "Unknown Message")
            return it.original
        for r in it.responses:
            if r.message is not None and str(r.message.id) == mid:
                return r.message
        raise HttpError(404, 10008, "Unknown Message")

    @_route("POST", r"/webhooks/{id}/{token}", auth=False)
    async def followup(self, request, body, files, app, token):
        it = self._interaction(token)
        body = body or {}
        if it.original is not None and it.original.flags & 128 and not any(r.kind == "followup" for r in it.responses):
            # Like Discord: the first follow-up after a defer fills in the "thinking..." message.
            msg = self._edit(it.original, body, files)
            if not msg.ephemeral and msg not in msg.channel.messages:
                self.sb._channel_message(msg)
        else:
            msg = self._message_from_body(it.channel, body, files, type=0, webhook_id=self.sb.application_id,
                                          application_id=self.sb.application_id)
            if not msg.ephemeral:
                self.sb._channel_message(msg)
        it._record(Response("followup", None, body, time.monotonic(), msg))
        if request.query.get("wait") in ("1", "true", "True"):
            return 200, msg.to_json()
        return 204, None

    @_route("GET", r"/webhooks/{id}/{token}/messages/(@original|\d+)", auth=False)
    async def get_webhook_message(self, request, body, files, app, token, mid):
        return 200, self._webhook_message(self._interaction(token), mid).to_json()

    @_route("PATCH", r"/webhooks/{id}/{token}/messages/(@original|\d+)", auth=False)
    async def edit_webhook_message(self, request, body, files, app, token, mid):
        it = self._interaction(token)
        msg = self._webhook_message(it, mid)
        was_loading = bool(msg.flags & 128)
        self._edit(msg, body, files)
        if was_loading and not msg.ephemeral and msg not in msg.channel.messages:
            self.sb._channel_message(msg)
        it._record(Response("edit", None, body or {}, time.monotonic(), msg))
        return 200, msg.to_json()

    @_route("DELETE", r"/webhooks/{id}/{token}/messages/(@original|\d+)", auth=False)
    async def delete_webhook_message(self, request, body, files, app, token, mid):
        it = self._interaction(token)
        msg = self._webhook_message(it, mid)
        msg.deleted = True
        it._record(Response("delete", None, {}, time.monotonic(), msg))
        return 204, None

    # ---- channels and messages -----------------------------------------------------------------------------
    @_route("GET", r"/channels/{id}")
    async def get_channel(self, request, body, files, cid):
        return 200, self._channel(cid).to_json()

    @_route("POST", r"/channels/{id}/typing")
    async def typing(self, request, body, files, cid):
        self._channel(cid)
        return 204, None

    @_route("POST", r"/channels/{id}/messages")
    async def send_message(self, request, body, files, cid):
        ch = self._channel(cid)
        if ch.guild is not None and not self.sb._bot_can_send(ch):
            raise HttpError(403, 50013, "Missing Permissions")
        msg = self._message_from_body(ch, body, files)
        self.sb._channel_message(msg)
        return 200, msg.to_json()

    @_route("GET", r"/channels/{id}/messages")
    async def list_messages(self, request, body, files, cid):
        limit = int(request.query.get("limit", 50))
        msgs = [m for m in self._channel(cid).messages if not m.deleted]
        return 200, [m.to_json() for m in reversed(msgs)][:limit]

    def _find_message(self, cid: str, mid: str) -> Message:
        for m in self._channel(cid).messages:
            if m.id == int(mid) and not m.deleted:
                return m
        raise HttpError(404, 10008, "Unknown Message")

    @_route("GET", r"/channels/{id}/messages/{id}")
    async def get_message(self, request, body, files, cid, mid):
        return 200, self._find_message(cid, mid).to_json()

    @_route("PATCH", r"/channels/{id}/messages/{id}")
    async def edit_message(self, request, body, files, cid, mid):
        msg = self._find_message(cid, mid)
        return 200, self._edit(msg, body, files).to_json()

    @_route("DELETE", r"/channels/{id}/messages/{id}")
    async def delete_message(self, request, body, files, cid, mid):
        self.sb.delete_message(self._find_message(cid, mid))
        return 204, None

    @_route("PUT", r"/channels/{id}/messages/{id}/reactions/([^/]+)/@me")
    async def react(self, request, body, files, cid, mid, emoji):
        self._find_message(cid, mid)
        return 204, None

    @_route("POST", r"/users/@me/channels")
    async def create_dm(self, request, body, files):
        user = self.sb.user_by_id(int(body["recipient_id"]))
        if user is None:
            raise HttpError(404, 10013, "Unknown User")
        return 200, self.sb.dm_channel(user).to_json()

    # ---- guilds and users ----------------------------------------------------------------------------------
    def _guild(self, gid: str):
        g = self.sb.guild_by_id(int(gid))
        if g is None:
            raise HttpError(404, 10004, "Unknown Guild")
        return g

    @_route("GET", r"/guilds/{id}")
    async def get_guild_obj(self, request, body, files, gid):
        return 200, self._guild(gid).to_json()

    @_route("GET", r"/guilds/{id}/channels")
    async def guild_channels(self, request, body, files, gid):
        return 200, [c.to_json() for c in self._guild(gid).channels]

    @_route("GET", r"/guilds/{id}/roles")
    async def guild_roles(self, request, body, files, gid):
        return 200, [r.to_json() for r in self._guild(gid).roles]

    @_route("GET", r"/guilds/{id}/members/{id}")
    async def guild_member(self, request, body, files, gid, uid):
        g = self._guild(gid)
        if int(uid) not in g.members:
            raise HttpError(404, 10007, "Unknown Member")
        return 200, g.members[int(uid)].to_json()

    @_route("GET", r"/guilds/{id}/members")
    async def guild_members(self, request, body, files, gid):
        return 200, [m.to_json() for m in self._guild(gid).members.values()]

    @_route("PATCH", r"/guilds/{id}/members/{id}")
    async def edit_member(self, request, body, files, gid, uid):
        g = self._guild(gid)
        member = g.members.get(int(uid))
        if member is None:
            raise HttpError(404, 10007, "Unknown Member")
        body = body or {}
        if "channel_id" in body:
            target = self.sb.channel_by_id(int(body["channel_id"])) if body["channel_id"] else None
            await self.sb.move_member(member, target)
        if "nick" in body:
            member.nick = body["nick"]
        return 200, member.to_json()

    @_route("GET", r"/users/{id}")
    async def get_user(self, request, body, files, uid):
        user = self.sb.user_by_id(int(uid))
        if user is None:
            raise HttpError(404, 10013, "Unknown User")
        return 200, user.to_json()


async def serve_attachment(sb: "World", request: web.Request) -> web.StreamResponse:
    """GET /attachments/{id}/{filename}: the registered bytes, honouring the hostile-download knobs."""
    att = sb._attachments.get(int(request.match_info["aid"]))
    if att is None:
        return web.Response(status=404, text="not found")
    data = att.data
    resp = web.StreamResponse(status=200, headers={"Content-Type": att.content_type})
    declared = len(data) if att.content_length == "real" else att.content_length
    if declared is None:
        resp.enable_chunked_encoding()
    else:
        resp.content_length = declared
        data = data[:declared]
    await resp.prepare(request)
    half = len(data) // 2 if att.stall_s else len(data)
    await resp.write(data[:half])
    if att.stall_s:
        await asyncio.sleep(att.stall_s)
        await resp.write(data[half:])
    if declared is not None and declared > len(data):
        request.transport.close()       # promised more than it sends: the client sees a truncated body
        return resp
    await resp.write_eof()
    return resp
