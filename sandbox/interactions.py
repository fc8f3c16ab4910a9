"""Interactions: building INTERACTION_CREATE payloads from synced commands, and recording the bot's responses."""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from .state import Attachment, Channel, Member, Message, Role, Signal, User

CALLBACK_NAMES = {1: "pong", 4: "message", 5: "defer", 6: "deferred_update", 7: "update", 8: "autocomplete",
                  9: "modal", 10: "premium_required", 12: "launch_activity"}


class CommandNotSynced(LookupError):
    """The test invoked a command the bot never registered."""


@dataclass
class Response:
    """One thing the bot did in answer to an interaction."""
    kind: str                       # "callback", "followup", "edit", "delete"
    type: Optional[int]             # callback type (4 message, 5 defer, 6/7 component, 8 autocomplete, 9 modal)
    data: dict                      # the raw JSON data the bot sent
    at: float                       # time.monotonic()
    message: Optional[Message] = None

    @property
    def content(self) -> Optional[str]:
        return self.data.get("content")

    @property
    def flags(self) -> int:
        return int(self.data.get("flags") or 0)

    @property
    def ephemeral(self) -> bool:
        if self.message is not None:
            return self.message.ephemeral
        return bool(self.flags & 64)

    @property
    def components(self) -> list:
        return self.data.get("components") or []

    @property
    def embeds(self) -> list:
        return self.data.get("embeds") or []

    @property
    def choices(self) -> list:
        return self.data.get("choices") or []

    @property
    def name(self) -> str:
        return CALLBACK_NAMES.get(self.type, self.kind) if self.kind == "callback" else self.kind


class Interaction:
    """A test-side handle on one interaction the sandbox sent to the bot."""

    def __init__(self, payload: dict, channel: Optional[Channel], user: User) -> None:
        self.payload = payload
        self.id = int(payload["id"])
        self.token = payload["token"]
        self.type = payload["type"]
        self.channel = channel
        self.user = user
        self.sent_at = time.monotonic()
        self.responses: list[Response] = []
        self.original: Optional[Message] = None
        self.source_message: Optional[Message] = None     # for component interactions
        self._signal = Signal()

    def __repr__(self) -> str:
        return f"<Interaction {self.id} type={self.type} responses={[r.name for r in self.responses]}>"

    def _record(self, response: Response) -> None:
        self.responses.append(response)
        self._signal.fire()

    @property
    def callback(self) -> Optional[Response]:
        return next((r for r in self.responses if r.kind == "callback"), None)

    @property
    def followups(self) -> list[Response]:
        return [r for r in self.responses if r.kind == "followup"]

    @property
    def edits(self) -> list[Response]:
        return [r for r in self.responses if r.kind == "edit"]

    async def wait_response(self, timeout: float = 5.0) -> Response:
        """The first callback (message, defer, autocomplete, modal...)."""
        return await self._signal.wait_for(lambda: self.callback, timeout, f"a callback to {self!r}")

    async def wait_followup(self, timeout: float = 10.0, index: Optional[int] = None) -> Response:
        """The follow-up number ``index`` (default: the first one)."""
        i = 0 if index is None else index
        return await self._signal.wait_for(lambda: self.followups[i] if len(self.followups) > i else None,
                                           timeout, f"follow-up #{i} to {self!r}")

    async def wait(self, predicate, timeout: float = 10.0, what: str = "a response") -> Any:
        """Wait until ``predicate(self)`` is truthy."""
        return await self._signal.wait_for(lambda: predicate(self), timeout, f"{what} to {self!r}")

    async def wait_text(self, timeout: float = 10.0) -> str:
        """Wait until the user would see some text (a message callback, edit or follow-up), and return it."""
        return await self._signal.wait_for(self.final_text, timeout, f"visible text from {self!r}")

    def final_text(self) -> Optional[str]:
        """The text a user would see at the end: the latest of the original's content (after edits) and follow-ups."""
        text: Optional[str] = None
        for r in self.responses:
            if r.kind in ("followup", "edit") or (r.kind == "callback" and r.type in (4, 7)):
                if r.message is not None and r.message.content:
                    text = r.message.content
                elif r.content:
                    text = r.content
        return text

    @property
    def ephemeral(self) -> bool:
        cb = self.callback
        return bool(cb and (cb.ephemeral or (cb.type == 5 and cb.flags & 64)))


def option_value(opt_type: int, value: Any, resolved: dict, ctx: tuple) -> Any:
    """Convert a Python value into the wire value of an option, filling ``resolved`` for snowflake types.
    ``ctx`` is (guild or None, channel, invoking user)."""
    guild, channel, invoker = ctx
    if opt_type == 3:
        return str(value)
    if opt_type == 4:
        return int(value)
    if opt_type == 5:
        return bool(value)
    if opt_type == 10:
        return float(value)
    if opt_type in (6, 9) and isinstance(value, (User, Member)):
        user = value.user if isinstance(value, Member) else value
        resolved.setdefault("users", {})[str(user.id)] = user.to_json()
        if guild is not None and user.id in guild.members:
            resolved.setdefault("members", {})[str(user.id)] = guild.members[user.id].to_json(False, channel)
        return str(user.id)
    if opt_type in (8, 9) and isinstance(value, Role):
        resolved.setdefault("roles", {})[str(value.id)] = value.to_json()
        return str(value.id)
    if opt_type == 7 and isinstance(value, Channel):
        data = value.to_json()
        if guild is not None:
            data["permissions"] = str(guild.permissions_for(invoker, value))
        resolved.setdefault("channels", {})[str(value.id)] = data
        return str(value.id)
    if opt_type == 11 and isinstance(value, Attachment):
        resolved.setdefault("attachments", {})[str(value.id)] = value.to_json()
        return str(value.id)
    raise TypeError(f"cannot send {value!r} as an option of type {opt_type}")


def build_options(definition: list, values: dict, resolved: dict, ctx: tuple, *, focused: Optional[str] = None,
                  path: str = "") -> list:
    """Options for one (sub)command level, validated against the synced definition."""
    out = []
    known = {o["name"]: o for o in definition}
    unknown = set(values) - set(known)
    if unknown:
        raise CommandNotSynced(f"/{path}: unknown option(s) {sorted(unknown)}; the synced options are {sorted(known)}")
    for name, opt in known.items():
        if name not in values:
            if opt.get("required") and focused is None:
                raise ValueError(f"/{path}: required option {name!r} missing")
            continue
        if name == focused:
            out.append({"name": name, "type": opt["type"], "value": str(values[name]), "focused": True})
        else:
            out.append({"name": name, "type": opt["type"],
                        "value": option_value(opt["type"], values[name], resolved, ctx)})
    return out


def command_data(command: dict, name: str, values: dict, ctx: tuple, focused: Optional[str] = None) -> dict:
    """``data`` of an application-command interaction for ``name`` ("say", "voice register", "a b c")."""
    parts = name.split()
    resolved: dict = {}
    level = command.get("options") or []
    chain = []
    for part in parts[1:]:
        sub = next((o for o in level if o["name"] == part and o["type"] in (1, 2)), None)
        if sub is None:
            parent = " ".join(parts[:1 + len(chain)])
            raise CommandNotSynced(f"/{name}: {part!r} is not a synced subcommand of /{parent}")
        chain.append(sub)
        level = sub.get("options") or []
    if any(o["type"] in (1, 2) for o in level):
        raise CommandNotSynced(f"/{name} needs a subcommand: {[o['name'] for o in level]}")
    options = build_options(level, values, resolved, ctx, focused=focused, path=name)
    for sub in reversed(chain):
        options = [{"name": sub["name"], "type": sub["type"], "options": options}]
    data = {"id": str(command["id"]), "name": parts[0], "type": command.get("type", 1), "options": options}
    if command.get("guild_id"):
        data["guild_id"] = str(command["guild_id"])
    if resolved:
        data["resolved"] = resolved
    return data


def new_token() -> str:
    return secrets.token_urlsafe(48)


@dataclass
class InteractionStore:
    """Interactions by token, so the REST callback/webhook routes can find them."""
    by_token: dict = field(default_factory=dict)
    by_id: dict = field(default_factory=dict)
    all: list = field(default_factory=list)

    def add(self, it: Interaction) -> None:
        self.by_token[it.token] = it
        self.by_id[it.id] = it
        self.all.append(it)
