"""VoiceConnection's states from voice events: transitions, waiters woken without polling, bounded waits, 4017,
and ObservedVoiceClient reporting discord.py's own flow changes, voice ws messages and cleanup."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import discord
import pytest
from discord.voice_state import ConnectionFlowState

from bot.errors import UserError
from bot.speech.connection import voice_connection as connection_module
from bot.speech.connection.connection_state import ConnectionState as S
from bot.speech.connection.connection_state import StateWatch
from bot.speech.connection.discord_internals import connection_state
from bot.speech.connection.voice_client import Kind, ObservedVoiceClient, VoiceEvent
from bot.speech.connection.voice_connection import NO_DAVE, VoiceConnection

BOT, ALICE = 100, 200


# -- StateWatch -------------------------------------------------------------------------------------------

async def test_a_waiter_wakes_on_the_transition_not_at_its_timeout():
    watch = StateWatch()
    waiter = asyncio.ensure_future(watch.wait_for(S.CONNECTED, timeout=5.0))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    watch.set(S.CONNECTING)  # not what it waits for: it goes on waiting
    await asyncio.sleep(0.01)
    assert not waiter.done()
    started = time.monotonic()
    watch.set(S.CONNECTED)
    assert await asyncio.wait_for(waiter, 0.5) is True
    assert time.monotonic() - started < 0.1


async def test_every_waiter_wakes_and_a_timeout_is_bounded():
    watch = StateWatch()
    waiters = [asyncio.ensure_future(watch.wait_for(S.DROPPED, S.E2EE_READY, timeout=5.0)) for _ in range(3)]
    await asyncio.sleep(0.01)
    watch.set(S.E2EE_READY)
    assert await asyncio.wait_for(asyncio.gather(*waiters), 0.5) == [True] * 3
    started = time.monotonic()
    assert await watch.wait_for(S.DROPPED, timeout=0.1) is False
    assert 0.09 <= time.monotonic() - started < 0.5


async def test_the_listener_hears_changes_only():
    seen = []
    watch = StateWatch(lambda before, now: seen.append((before, now)))
    assert watch.set(S.CONNECTING) and not watch.set(S.CONNECTING)
    watch.set(S.CONNECTED)
    assert seen == [(S.DISCONNECTED, S.CONNECTING), (S.CONNECTING, S.CONNECTED)]


# -- VoiceConnection through a stand-in voice client -----------------------------------------------------

class FakeVoiceClient:
    """What VoiceConnection reads of ObservedVoiceClient, with the events discord.py would cause."""

    def __init__(self, client, channel, *, listener, receive=None) -> None:
        self.client, self.channel, self.listener, self.receive = client, channel, listener, receive
        self.user = SimpleNamespace(id=BOT)
        self.connected = False
        self.dave_protocol_version = 1
        self.can_encrypt = False
        self.voice_privacy_code = "123451234512345123451234512345"
        self.ws = None
        self.disconnects = 0
        self.stuck = False

    def is_connected(self) -> bool:
        return self.connected

    def emit(self, kind: Kind, **fields) -> None:
        self.listener(self, VoiceEvent(kind, **fields))

    def flow(self, connected: bool, close_code: int | None = None) -> None:
        self.connected = connected
        self.emit(Kind.FLOW, connected=connected, close_code=close_code)

    def dave_ready(self) -> None:  # a DAVE transition executed (voice op 22)
        self.can_encrypt = True
        self.emit(Kind.WS_OP, op=22)

    async def disconnect(self, *, force: bool) -> None:
        self.disconnects += 1
        self.flow(False)
        self.emit(Kind.REMOVED)

    async def move_to(self, channel, *, timeout) -> None:
        self.channel = channel
        self.emit(Kind.CHANNEL, channel_id=channel.id)
        if self.stuck:  # discord.py's move does not finish: it logs a timeout, the call is down
            self.flow(False, close_code=4014)


class FakeChannel(discord.VoiceChannel):
    """A voice channel whose connect() makes the VoiceConnection's client (cls) and connects it, or not."""

    def __init__(self, channel_id: int, guild, *, answer: bool = True) -> None:
        self.id, self.guild = channel_id, guild
        self.answer = answer  # whether the voice server lets the client in
        self.lost = 0  # connects whose voice updates are lost (discord.py waits out its timeout)
        self.states: dict[int, object] = {}
        self.connects = 0

    @property
    def members(self):
        return []

    @property
    def voice_states(self):
        return self.states

    def permissions_for(self, _member):
        return discord.Permissions(connect=True, speak=True)

    async def connect(self, *, timeout, self_deaf, reconnect, cls):
        self.connects += 1
        vc = cls(None, self)
        self.guild.vc = vc
        if not self.answer:
            vc.emit(Kind.FLOW, connected=False, close_code=4017)
            await asyncio.sleep(timeout)
            raise asyncio.TimeoutError
        if self.lost:
            self.lost -= 1
            await asyncio.sleep(0)
            raise asyncio.TimeoutError
        vc.flow(True)
        return vc


class World:
    def __init__(self, *others_in_call: int) -> None:
        self.guild = SimpleNamespace(id=1, me=SimpleNamespace(id=BOT), vc=None, get_channel=self.channel)
        self.voice = FakeChannel(10, self.guild)
        self.lounge = FakeChannel(11, self.guild)
        for uid in (BOT, *others_in_call):
            self.voice.states[uid] = object()
        client = SimpleNamespace(get_guild=lambda _id: self.guild, loop=None)
        self.states: list[S] = []
        self.conn = VoiceConnection(client, 1, on_state=lambda _b, now: self.states.append(now),
                                    voice_client_cls=FakeVoiceClient)

    def channel(self, channel_id: int):
        return {10: self.voice, 11: self.lounge}.get(channel_id)

    @property
    def vc(self) -> FakeVoiceClient:
        return self.guild.vc


async def test_join_connects_then_e2ee_ready_wakes_the_waiter():
    w = World(ALICE)
    await w.conn.join(w.voice)
    assert w.states == [S.CONNECTING, S.CONNECTED]  # alice expects E2EE, which is not ready yet
    waiter = asyncio.ensure_future(w.conn.wait_e2ee(5.0))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    w.vc.dave_ready()
    assert await asyncio.wait_for(waiter, 0.5) is True
    assert w.conn.state is S.E2EE_READY and w.conn.sink.ready_to_send()
    assert await w.conn.wait_privacy_code(1.0) == "12345 12345 12345 12345 12345 12345"


async def test_alone_nobody_needs_e2ee_until_someone_joins():
    w = World()
    await w.conn.join(w.voice)
    assert w.conn.state is S.E2EE_READY and await w.conn.wait_privacy_code(1.0) is None
    w.voice.states[ALICE] = object()
    w.conn.members_changed()
    assert w.conn.state is S.CONNECTED and not w.conn.sink.ready_to_send()


async def test_e2ee_that_never_gets_ready_is_a_bounded_false():
    w = World(ALICE)
    await w.conn.join(w.voice)
    started = time.monotonic()
    assert await w.conn.wait_e2ee(0.1) is False
    assert time.monotonic() - started < 0.5 and w.conn.state is S.CONNECTED


async def test_a_dropped_voice_websocket_waits_for_discord_py_and_does_not_rejoin():
    w = World()
    await w.conn.join(w.voice)
    w.vc.flow(False, close_code=4006)
    assert w.conn.state is S.RECONNECTING and not w.conn.is_connected()
    ensured = asyncio.ensure_future(w.conn.ensure())
    await asyncio.sleep(0.05)
    assert not ensured.done()
    w.vc.flow(True)  # discord.py reconnected by itself
    assert await asyncio.wait_for(ensured, 0.5) is True
    assert w.conn.state is S.E2EE_READY and w.voice.connects == 1  # no rejoin fought it


async def test_a_reconnect_that_does_not_come_back_in_time_is_a_rejoin(monkeypatch):
    monkeypatch.setattr(connection_module, "RECONNECT_GRACE_S", 0.05)
    w = World()
    await w.conn.join(w.voice)
    old = w.vc
    old.flow(False, close_code=4006)
    assert await w.conn.ensure() is True
    assert w.voice.connects == 2 and old.disconnects == 1 and w.vc is not old
    old.emit(Kind.FLOW, connected=False)  # the replaced client's late events change nothing
    assert w.conn.state is S.E2EE_READY


async def test_moved_follows_the_new_channel_once_discord_py_is_connected_there():
    w = World(ALICE)
    await w.conn.join(w.voice)
    w.vc.dave_ready()
    w.vc.emit(Kind.CHANNEL, channel_id=w.lounge.id)
    assert w.conn.state is S.MOVED and w.conn.channel_id == w.lounge.id
    w.vc.can_encrypt = False  # a new channel: a new MLS group
    w.vc.flow(False, close_code=4014)
    w.vc.emit(Kind.WS_OP, op=4)
    assert w.conn.state is S.MOVED
    w.vc.channel = w.lounge
    w.vc.flow(True)
    assert w.conn.state is S.E2EE_READY  # nobody else in the lounge
    assert w.states[-2:] == [S.MOVED, S.E2EE_READY]


async def test_our_own_move_is_not_reported_as_moved():
    w = World()
    await w.conn.join(w.voice)
    await w.conn.join(w.lounge)
    assert S.MOVED not in w.states and w.conn.state is S.E2EE_READY and w.conn.channel.id == w.lounge.id


async def test_a_move_discord_py_does_not_finish_is_a_fresh_connect():
    w = World()
    await w.conn.join(w.voice)
    old = w.vc
    old.stuck = True
    await w.conn.join(w.lounge)
    assert old.disconnects == 1 and w.vc is not old and w.lounge.connects == 1
    assert w.conn.state is S.E2EE_READY and w.conn.channel.id == w.lounge.id


async def test_kicked_is_dropped_at_once_and_not_rejoined():
    w = World()
    await w.conn.join(w.voice)
    w.vc.emit(Kind.CHANNEL, channel_id=None)  # out of the channel while the call is up: someone disconnected us
    assert w.conn.state is S.DROPPED and w.conn.channel_id is None
    await w.vc.disconnect(force=True)  # then discord.py disconnects and cleans up
    assert w.conn.state is S.DROPPED and w.states.count(S.DROPPED) == 1 and S.RECONNECTING not in w.states
    assert await w.conn.ensure() is False and w.voice.connects == 1


async def test_discord_py_leaving_the_channel_to_reconnect_is_not_a_drop():
    w = World()
    await w.conn.join(w.voice)
    w.vc.flow(False, close_code=4006)  # discord.py takes the call down, then leaves and joins again
    w.vc.emit(Kind.CHANNEL, channel_id=None)
    w.vc.emit(Kind.CHANNEL, channel_id=w.voice.id)
    assert w.conn.state is S.RECONNECTING
    w.vc.flow(True)
    assert w.conn.state is S.E2EE_READY and w.conn.channel_id == w.voice.id


async def test_discord_py_giving_up_is_dropped():
    w = World()
    await w.conn.join(w.voice)
    w.vc.flow(False, close_code=4015)
    w.vc.emit(Kind.REMOVED)  # its resume failed: it disconnected and cleaned up
    assert w.conn.state is S.DROPPED and w.conn.channel_id is None and w.states[-2:] == [S.RECONNECTING, S.DROPPED]


async def test_leave_is_disconnected_not_dropped():
    w = World()
    await w.conn.join(w.voice)
    assert await w.conn.leave() is True
    assert w.conn.state is S.DISCONNECTED and S.DROPPED not in w.states and await w.conn.ensure() is False


async def test_a_4017_close_fails_the_join_at_once_with_what_to_install():
    w = World(ALICE)
    w.voice.answer = False
    started = time.monotonic()
    with pytest.raises(UserError) as err:
        await w.conn.join(w.voice)
    assert time.monotonic() - started < 1.0  # not the 20 s connect timeout
    assert str(err.value) == NO_DAVE.format(channel=w.voice.mention)
    assert w.vc.disconnects == 1 and w.conn.state is S.DISCONNECTED and w.conn.channel_id is None


# -- ObservedVoiceClient on discord.py's own VoiceClient --------------------------------------------------

async def test_observed_voice_client_reports_discord_py_flow_ws_messages_voice_state_and_cleanup():
    events: list[VoiceEvent] = []
    client = discord.Client(intents=discord.Intents.none())
    channel = SimpleNamespace(id=10, guild=SimpleNamespace(id=1), _get_voice_client_key=lambda: (1, "guild_id"))
    vc = ObservedVoiceClient(client, channel, listener=lambda _vc, event: events.append(event))
    flow = connection_state(vc)  # discord.py's connection state, set the way its own code sets it
    try:
        flow.state = ConnectionFlowState.connected
        flow.state = ConnectionFlowState.connected  # no change, no event
        flow.ws = SimpleNamespace(ws=SimpleNamespace(close_code=4017))
        flow.state = ConnectionFlowState.disconnected
        await flow.hook(flow.ws, {"op": 22, "d": {"transition_id": 3}})
        vc.cleanup()
    finally:
        flow._socket_reader.stop()
    assert events == [VoiceEvent(Kind.FLOW, connected=True), VoiceEvent(Kind.FLOW, close_code=4017),
                      VoiceEvent(Kind.WS_OP, op=22), VoiceEvent(Kind.REMOVED)]
    assert vc.dave_protocol_version == 0 and vc.can_encrypt is False


async def test_observed_voice_client_feeds_its_receive_path_and_gives_the_call_keys_once_described():
    from bot.speech.connection.voice_receive import ReceiveCounts, VoiceReceive
    client = discord.Client(intents=discord.Intents.none())
    channel = SimpleNamespace(id=10, guild=SimpleNamespace(id=1), _get_voice_client_key=lambda: (1, "guild_id"))
    receive = VoiceReceive(ReceiveCounts(), is_bot=lambda _: False)
    heard: list[int] = []
    receive.listen(lambda uid, _at: heard.append(uid))
    vc = ObservedVoiceClient(client, channel, listener=lambda _vc, _event: None, receive=receive)
    flow = connection_state(vc)
    try:
        assert vc.call_keys() is None                      # before the session description
        await flow.hook(None, {"op": 5, "d": {"user_id": "42", "ssrc": 7, "speaking": 1}})
        assert receive.datagram in flow._socket_reader._callbacks   # discord.py's reader hands it every packet
        receive.datagram(b"\x80\x78" + bytes(6) + (7).to_bytes(4, "big") + bytes(20))
        flow.mode, flow.secret_key, flow.dave_protocol_version = "aead_xchacha20_poly1305_rtpsize", [1] * 32, 0
        keys = vc.call_keys()
    finally:
        flow._socket_reader.stop()
    assert heard == [42] and keys is not None and keys.secret_key == bytes([1] * 32) and keys.dave is None


async def test_voice_updates_handled_while_the_join_is_being_sent_are_not_lost():
    """discord.py's own connect flow, with VOICE_SERVER_UPDATE and VOICE_STATE_UPDATE handled while its op 4 is
    still being sent (a gateway send that yields): with discord.py 2.7 alone both were dropped (the flow was still
    `disconnected`) and the join waited out its timeout."""
    from discord.voice_state import VoiceConnectionState
    assert "_voice_connect" in VoiceConnectionState.__dict__  # what discord.py's connect flow calls, overridden
    client = discord.Client(intents=discord.Intents.none())
    flow_box: list = []

    async def change_voice_state(*, channel, self_deaf, self_mute):  # the send, yielding before it returns
        flow = flow_box[0]
        await flow.voice_server_update({"token": "t", "guild_id": "1", "endpoint": "127.0.0.1:9"})
        await flow.voice_state_update({"channel_id": "10", "session_id": "s", "user_id": "99"})
        await asyncio.sleep(0)

    guild = SimpleNamespace(id=1, change_voice_state=change_voice_state)
    channel = SimpleNamespace(id=10, guild=guild, _get_voice_client_key=lambda: (1, "guild_id"))
    vc = ObservedVoiceClient(client, channel, listener=lambda _vc, _event: None)
    flow = connection_state(vc)
    flow_box.append(flow)
    flow._create_socket = lambda: None  # (no UDP socket in a unit test)
    flow.timeout = 2.0
    try:
        await flow._voice_connect()
        await asyncio.wait_for(flow._wait_for_state(ConnectionFlowState.got_both_voice_updates), 2.0)
    finally:
        flow._socket_reader.stop()
    assert flow.state is ConnectionFlowState.got_both_voice_updates and flow.endpoint == "127.0.0.1:9"


async def test_a_join_whose_handshake_timed_out_is_tried_once_more_and_a_second_timeout_is_told():
    w = World(ALICE)
    w.voice.lost = 1
    await w.conn.join(w.voice)
    assert w.voice.connects == 2 and w.conn.state is S.CONNECTED
    w2 = World(ALICE)
    w2.voice.lost = 2
    with pytest.raises(UserError, match="in time"):
        await w2.conn.join(w2.voice)
    assert w2.voice.connects == 2 and w2.conn.state is S.DISCONNECTED
