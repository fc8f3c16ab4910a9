"""DAVE on the voice server: an MLS group per voice channel, proposals, commits, welcomes, transitions (ops 21-31)."""
from __future__ import annotations

import asyncio
import logging
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import davey

from .mls import ExternalSender, Proposal, parse_commit_welcome, proposals_payload, revoke_payload

log = logging.getLogger("sandbox.dave")

DAVE_VERSION = 1
# Opcodes (voice gateway v8).
PREPARE_TRANSITION, EXECUTE_TRANSITION, TRANSITION_READY, PREPARE_EPOCH = 21, 22, 23, 24
EXTERNAL_SENDER, KEY_PACKAGE, PROPOSALS, COMMIT_WELCOME = 25, 26, 27, 28
ANNOUNCE_COMMIT, WELCOME, INVALID_COMMIT_WELCOME = 29, 30, 31
APPEND, REVOKE = 0, 1


class Participant(Protocol):
    """A member of a call as the voice server reaches it: the bot over its websocket, or a simulated human."""
    user_id: int
    local: bool

    async def dave_json(self, op: int, d: Any) -> None: ...

    async def dave_binary(self, op: int, payload: bytes) -> None: ...


@dataclass
class DaveEvent:
    at: float
    channel_id: int
    what: str                   # "commit", "welcome", "invalid", "reject", "revoke", "epoch", ...
    user_id: Optional[int] = None
    detail: Any = None


@dataclass
class _Round:
    """Proposals sent for one epoch, by recipient (a new group: each recipient gets Adds of the others)."""
    epoch: int
    by_recipient: dict[int, list[Proposal]] = field(default_factory=dict)

    def proposals_of(self, uid: int) -> list[Proposal]:
        return self.by_recipient.get(uid, [])


class Human:
    """A simulated Discord client in a voice channel: its own davey session, answering like a real client."""

    local = True

    def __init__(self, server: "DaveServer", user_id: int, channel_id: int) -> None:
        self.server = server
        self.user_id = user_id
        self.channel_id = channel_id
        self.session = davey.DaveSession(DAVE_VERSION, user_id, channel_id)
        self._pending_commit: Optional[asyncio.TimerHandle] = None

    @property
    def group(self) -> "DaveGroup":
        return self.server.group(self.channel_id)

    async def dave_json(self, op: int, d: Any) -> None:
        if op == PREPARE_EPOCH and d.get("epoch") == 1:
            self.session.reinit(DAVE_VERSION, self.user_id, self.channel_id)
            await self.group.key_package(self.user_id, self.session.get_serialized_key_package())

    async def dave_binary(self, op: int, payload: bytes) -> None:
        try:
            if op == EXTERNAL_SENDER:
                self.session.set_external_sender(payload)
                await self.group.key_package(self.user_id, self.session.get_serialized_key_package())
            elif op == PROPOSALS:
                kinds = davey.ProposalsOperationType
                kind = kinds.append if payload[0] == APPEND else kinds.revoke
                result = self.session.process_proposals(kind, payload[1:])
                if result is not None:
                    blob = result.commit + (result.welcome or b"")
                    self._schedule_commit(blob)
            elif op in (ANNOUNCE_COMMIT, WELCOME):
                tid = struct.unpack_from(">H", payload, 0)[0]
                if op == ANNOUNCE_COMMIT:
                    self.session.process_commit(payload[2:])
                else:
                    self.session.process_welcome(payload[2:])
                await self.group.transition_ready(self.user_id, tid)
        except Exception as exc:  # noqa: BLE001 - as discord.py does: report op 31 and start over with a new key package
            log.info("human %s could not process op %s: %s", self.user_id, op, exc)
            if op in (ANNOUNCE_COMMIT, WELCOME):
                tid = struct.unpack_from(">H", payload, 0)[0]
                await self.group.invalid_commit(self.user_id, tid)
                self.session.reinit(DAVE_VERSION, self.user_id, self.channel_id)
                await self.group.key_package(self.user_id, self.session.get_serialized_key_package())

    def _schedule_commit(self, blob: bytes) -> None:
        """A human's client answers a little later than the bot on loopback; the first valid commit wins."""
        if self._pending_commit is not None:
            self._pending_commit.cancel()
        loop = asyncio.get_running_loop()
        self._pending_commit = loop.call_later(self.server.human_commit_delay_s, lambda: self.server.spawn(
            self.group.commit(self.user_id, blob)))

    def close(self) -> None:
        if self._pending_commit is not None:
            self._pending_commit.cancel()

    def decrypt(self, sender_id: int, frame: bytes) -> bytes:
        """Raises when a real client would drop the frame (not E2EE outside passthrough, or no key)."""
        return self.session.decrypt(sender_id, davey.MediaType.audio, frame)


class DaveGroup:
    """The MLS group of one voice channel, with the voice server as its external sender."""

    def __init__(self, server: "DaveServer", channel_id: int) -> None:
        self.server = server
        self.channel_id = channel_id
        self.epoch = 0                                   # 0: no group yet (members hold pending groups)
        self.leaves: list[Optional[int]] = []            # leaf index -> user id
        self.members: dict[int, Participant] = {}        # present in the channel, in join order
        self.key_packages: dict[int, bytes] = {}         # latest unused key package per user
        self.stale: set[int] = set()                     # in the tree but starting over (op 31, a new key package)
        self.round: Optional[_Round] = None
        self.awaiting: dict[int, set[int]] = {}          # transition id -> users yet to send op 23
        self.announced: dict[int, list[int]] = {}        # transition id -> users told of it
        self._delivering = False
        self._due = False
        self._timer: Optional[asyncio.TimerHandle] = None

    # ---- membership ------------------------------------------------------------------------------------
    @property
    def in_group(self) -> list[int]:
        return [u for u in self.leaves if u is not None]

    async def join(self, member: Participant) -> None:
        """A client whose SESSION_DESCRIPTION said DAVE (or a human arriving): it starts a new DAVE session."""
        self.members[member.user_id] = member
        if member.user_id in self.leaves:
            self._restarting(member.user_id)   # a resumed connection: its old leaf goes
        await member.dave_binary(EXTERNAL_SENDER, self.server.sender.package())

    async def leave(self, user_id: int) -> None:
        member = self.members.pop(user_id, None)
        if isinstance(member, Human):
            member.close()
        self.key_packages.pop(user_id, None)
        for waiting in self.awaiting.values():
            waiting.discard(user_id)
        self._not_committing(user_id)
        await self._revoke_adds_of(user_id)
        await self._finish_transitions()
        await self._propose()

    def _not_committing(self, user_id: int) -> None:
        """`user_id` will not commit this round (it left, or its DAVE session starts over)."""
        if self.round is not None:
            self.round.by_recipient.pop(user_id, None)
            if not any(u in self.members for u in self.round.by_recipient):
                self.round = None         # nobody left who could commit it

    def _restarting(self, user_id: int) -> None:
        self.stale.add(user_id)
        self._not_committing(user_id)

    async def key_package(self, user_id: int, key_package: bytes) -> None:
        if user_id not in self.members:
            return
        self.key_packages[user_id] = key_package
        if user_id in self.leaves:
            self._restarting(user_id)   # it re-initialised (resume, op 31): remove its old leaf, add again
        await self._propose()

    async def invalid_commit(self, user_id: int, transition_id: int) -> None:
        self.server.event(self.channel_id, "invalid", user_id, transition_id)
        self.awaiting.get(transition_id, set()).discard(user_id)
        if user_id in self.leaves:
            self._restarting(user_id)
        await self._finish_transitions()

    # ---- proposals -----------------------------------------------------------------------------------
    async def _revoke_adds_of(self, user_id: int) -> None:
        """A joining member left before being committed: revoke the Adds that name them."""
        if self.round is None:
            return
        for recipient, props in list(self.round.by_recipient.items()):
            gone = [p for p in props if p.kind == "add" and p.user_id == user_id]
            if not gone or recipient not in self.members:
                continue
            self.round.by_recipient[recipient] = [p for p in props if p not in gone]
            self.server.event(self.channel_id, "revoke", user_id, recipient)
            await self.members[recipient].dave_binary(PROPOSALS, bytes([REVOKE]) + revoke_payload(gone))
        if not any(self.round.by_recipient.values()):
            self.round = None

    async def _propose(self) -> None:
        """Send the proposals the current membership needs, unless a round is waiting for its commit."""
        if self.round is not None or self._delivering:
            return
        delay = self.server.proposal_delay_s
        if delay > 0 and not self._due:           # a slow voice server: propose a little later
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(
                    delay, lambda: self.server.spawn(self._propose_due()))
            return
        present = set(self.members)
        if self.epoch > 0:
            committers = [u for u in self.in_group if u in present and u not in self.stale]
            if not committers:
                self._reset()
        if self.epoch == 0:
            await self._propose_new_group()
            return
        removes = [(leaf, uid) for leaf, uid in enumerate(self.leaves)
                   if uid is not None and (uid not in present or uid in self.stale)]
        adds = [(uid, kp) for uid, kp in self.key_packages.items() if uid not in self.leaves or uid in self.stale]
        if not removes and not adds:
            return
        sender, cid, epoch = self.server.sender, self.channel_id, self.epoch
        props = [sender.remove(cid, epoch, uid, leaf) for leaf, uid in removes]
        props += [sender.add(cid, epoch, uid, kp) for uid, kp in adds]
        recipients = [u for u in self.in_group if u in present and u not in self.stale]
        self.round = _Round(epoch, {u: props for u in recipients})
        await self._send_round()

    async def _propose_due(self) -> None:
        self._timer, self._due = None, True
        try:
            await self._propose()
        finally:
            self._due = False

    async def _propose_new_group(self) -> None:
        candidates = [u for u in self.members if u in self.key_packages]
        if len(candidates) < 2:
            return
        sender, cid = self.server.sender, self.channel_id
        adds = {u: sender.add(cid, 0, u, self.key_packages[u]) for u in candidates}
        # Each candidate is already in its own pending group: it never receives an Add for itself.
        self.round = _Round(0, {u: [adds[o] for o in candidates if o != u] for u in candidates})
        await self._send_round()

    async def _send_round(self) -> None:
        assert self.round is not None
        for uid, props in self._ordered(self.round.by_recipient):
            self.server.event(self.channel_id, "proposals", uid, [(p.kind, p.user_id) for p in props])
            await self.members[uid].dave_binary(PROPOSALS, bytes([APPEND]) + proposals_payload(props))

    def _ordered(self, by_user: dict) -> list[tuple[int, Any]]:
        """The bot (over its websocket) first, simulated humans after: it gets the chance to commit."""
        items = [(u, v) for u, v in by_user.items() if u in self.members]
        return sorted(items, key=lambda kv: self.members[kv[0]].local)

    def _reset(self) -> None:
        self.epoch = 0
        self.leaves = []
        self.stale.clear()
        self.server.event(self.channel_id, "reset")

    async def new_epoch(self) -> None:
        """Op 24 epoch 1 to everyone: the call starts a new group (each member re-initialises)."""
        self._reset()
        self.round = None
        self.key_packages.clear()
        for _, member in self._ordered(dict(self.members)):
            await member.dave_json(PREPARE_EPOCH, {"epoch": 1, "protocol_version": DAVE_VERSION})

    # ---- commits ------------------------------------------------------------------------------------
    async def commit(self, user_id: int, blob: bytes) -> None:
        """Op 28: the first valid commit of the epoch wins; the others are ignored as Discord does."""
        rnd = self.round
        try:
            cw = parse_commit_welcome(blob)
        except ValueError as exc:
            self.server.event(self.channel_id, "reject", user_id, str(exc))
            return
        if rnd is None or cw.epoch != self.epoch or cw.epoch != rnd.epoch or user_id not in self.members:
            self.server.event(self.channel_id, "reject", user_id, "stale commit")
            return
        mine = {p.ref: p for p in rnd.proposals_of(user_id)}
        if not cw.refs or any(r not in mine for r in cw.refs):
            self.server.event(self.channel_id, "reject", user_id, "commit names unknown proposals")
            return
        props = [mine[r] for r in cw.refs]
        added = [p.user_id for p in props if p.kind == "add"]
        if added and cw.welcome is None:
            self.server.event(self.channel_id, "reject", user_id, "adds without a welcome")
            return
        before = set(self.in_group) - self.stale
        if self.epoch == 0:
            self.leaves = [user_id]
            before = {user_id}
        for p in props:
            if p.kind == "remove" and p.user_id in self.leaves:
                self.leaves[self.leaves.index(p.user_id)] = None
        for p in props:
            if p.kind == "add":
                self.stale.discard(p.user_id)
                self.key_packages.pop(p.user_id, None)
                if None in self.leaves:
                    self.leaves[self.leaves.index(None)] = p.user_id
                else:
                    self.leaves.append(p.user_id)
        while self.leaves and self.leaves[-1] is None:
            self.leaves.pop()
        self.epoch += 1
        self.round = None
        tid = self.server.next_transition_id()
        told = [u for u in before if u in self.leaves and u in self.members]
        welcomed = [u for u in added if u in self.members and u in self.leaves]
        self.awaiting[tid] = set(told) | set(welcomed)
        self.announced[tid] = told + welcomed
        self.server.event(self.channel_id, "commit", user_id, {"epoch": self.epoch, "transition_id": tid,
                                                               "added": added, "leaves": list(self.leaves)})
        commit_msg = struct.pack(">H", tid) + cw.commit
        welcome_msg = struct.pack(">H", tid) + (cw.welcome or b"")
        # Listeners (simulated humans) take the new keys before the bot's next frame can use them.
        targets = [(u, ANNOUNCE_COMMIT, commit_msg) for u in told] + [(u, WELCOME, welcome_msg) for u in welcomed]
        targets.sort(key=lambda t: not self.members[t[0]].local)
        self._delivering = True          # a member failing here starts over only after everyone got this epoch
        try:
            for uid, op, msg in targets:
                if uid in self.members:
                    await self.server.deliver(self.members[uid], op, msg)
        finally:
            self._delivering = False
        await self._finish_transitions()
        await self._propose()

    async def transition_ready(self, user_id: int, transition_id: int) -> None:
        self.awaiting.get(transition_id, set()).discard(user_id)
        await self._finish_transitions()

    async def _finish_transitions(self) -> None:
        for tid in [t for t, waiting in self.awaiting.items() if not waiting]:
            del self.awaiting[tid]
            for uid in self.announced.pop(tid, []):
                member = self.members.get(uid)
                if member is not None:
                    await member.dave_json(EXECUTE_TRANSITION, {"transition_id": tid})

    # ---- listening ----------------------------------------------------------------------------------
    def listener(self, exclude: int) -> Optional[Human]:
        """The simulated human who listens for the capture: the earliest joined one still in the channel."""
        return next((m for u, m in self.members.items() if u != exclude and isinstance(m, Human)), None)


class DaveServer:
    """All DAVE groups of the sandbox's voice server; every change runs under one lock, in arrival order."""

    def __init__(self, human_commit_delay_s: float = 0.03, proposal_delay_s: float = 0.0) -> None:
        self.sender = ExternalSender()
        self.groups: dict[int, DaveGroup] = {}
        self.humans: dict[tuple[int, int], Human] = {}           # (channel id, user id) -> human
        self.events: list[DaveEvent] = []
        self.human_commit_delay_s = human_commit_delay_s
        self.proposal_delay_s = proposal_delay_s      # > 0: the MLS handshake takes this much longer
        self.corrupt_next: set[int] = set()                      # user ids whose next commit/welcome is damaged
        self._lock = asyncio.Lock()
        self._tid = 0
        self._tasks: set[asyncio.Task] = set()
        self.on_change = lambda: None

    def group(self, channel_id: int) -> DaveGroup:
        if channel_id not in self.groups:
            self.groups[channel_id] = DaveGroup(self, channel_id)
        return self.groups[channel_id]

    def event(self, channel_id: int, what: str, user_id: Optional[int] = None, detail: Any = None) -> None:
        self.events.append(DaveEvent(time.monotonic(), channel_id, what, user_id, detail))
        self.on_change()

    def next_transition_id(self) -> int:
        self._tid = self._tid % 65535 + 1
        return self._tid

    async def deliver(self, member: Participant, op: int, payload: bytes) -> None:
        if member.user_id in self.corrupt_next and not member.local:
            self.corrupt_next.discard(member.user_id)
            payload = payload[:2] + bytes(b ^ 0x5A for b in payload[2:18]) + payload[18:]
            self.event(0, "corrupted", member.user_id, op)
        await member.dave_binary(op, payload)

    # ---- serialized entry points -------------------------------------------------------------------
    def spawn(self, coro) -> None:
        """Run a group change in arrival order, after the changes before it."""
        async def run() -> None:
            async with self._lock:
                try:
                    await coro
                except Exception:
                    log.exception("DAVE group change failed")
                finally:
                    self.on_change()
        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def human_joined(self, user_id: int, channel_id: int) -> None:
        human = Human(self, user_id, channel_id)
        self.humans[(channel_id, user_id)] = human
        self.spawn(self.group(channel_id).join(human))

    def member_left(self, user_id: int, channel_id: int) -> None:
        self.humans.pop((channel_id, user_id), None)
        self.spawn(self.group(channel_id).leave(user_id))

    async def settle(self, timeout: float = 5.0) -> None:
        """Wait until no group change is queued or running (bounded)."""
        deadline = time.monotonic() + timeout
        while self._tasks and time.monotonic() < deadline:
            await asyncio.wait(set(self._tasks), timeout=max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        for human in self.humans.values():
            human.close()
        for group in self.groups.values():
            if group._timer is not None:
                group._timer.cancel()
        for task in self._tasks:
            task.cancel()
