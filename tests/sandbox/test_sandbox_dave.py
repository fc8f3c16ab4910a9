"""DAVE in the sandbox: real discord.py + davey against the voice server's MLS external sender and listening humans."""
from __future__ import annotations

import asyncio

import davey
import discord
import pytest
from conftest import start_bot, stop_bot

from sandbox import Sandbox

pytestmark = pytest.mark.e2e


async def tone(sb, demo, seconds: float = 1.0, **options) -> None:
    it = await sb.slash(demo.alice, demo.general, "tone", seconds=seconds, **options)
    await asyncio.wait_for(it.wait_followup(), 30)


def listener_stats(sb, demo, bot_id: int) -> davey.DecryptionStats:
    human = sb.voice.dave.group(demo.voice.id).listener(bot_id)
    return human.session.get_decryption_stats(bot_id, davey.MediaType.audio)


def voice_client(bot, demo) -> discord.VoiceClient:
    return bot.get_guild(demo.guild.id).voice_client


async def test_tone_is_end_to_end_encrypted(sb, demo, bot):
    cap = sb.capture(demo.guild)
    await tone(sb, demo, stay=True)
    assert cap.dropped == 0 and cap.decrypt_errors == 0
    assert abs(len(cap.voiced) * 0.02 - 1.0) <= 0.04
    stats = listener_stats(sb, demo, bot.user.id)
    assert stats.successes >= 50 and stats.passthroughs == 0       # every voiced frame was E2EE
    description = next(o for o in sb.voice_log if o.direction == "out" and o.op == 4)
    assert description.d["dave_protocol_version"] == 1
    ops_in = {o.op for o in sb.voice_log if o.direction == "in"}
    ops_out = {o.op for o in sb.voice_log if o.direction == "out"}
    assert {26, 28, 23} <= ops_in and {25, 27, 29, 22} <= ops_out
    code = voice_client(bot, demo).voice_privacy_code
    assert code and code == sb.privacy_code(demo.guild)


async def test_plain_opus_before_the_group_is_ready_is_dropped(sb, demo, bot):
    sb.voice.dave.proposal_delay_s = 0.6           # a slow MLS handshake
    cap = sb.capture(demo.guild)
    await tone(sb, demo, seconds=1.0, wait=False, stay=True)
    assert cap.dropped >= 20                        # the first ~0.6 s went out before E2EE was ready
    assert len(cap.voiced) < 45
    assert any("Unencrypted" in r or "NoDecryptor" in r for r in cap.drop_reasons)
    cap.clear()
    await tone(sb, demo, seconds=0.6, stay=True)    # the same bot, waiting for readiness: nothing dropped
    assert cap.dropped == 0 and abs(len(cap.voiced) * 0.02 - 0.6) <= 0.04


async def test_committer_never_gets_its_own_add_and_members_change_epochs(sb, demo, bot):
    await tone(sb, demo, seconds=0.2, stay=True)
    vc = voice_client(bot, demo)
    group = sb.dave_group(demo.voice)
    first = vc.voice_privacy_code
    bob = sb.user("bob")
    await sb.user_joins_voice(bob, demo.voice)
    await sb._signal.wait_for(lambda: bob.id in group.in_group and not group.awaiting, 10, "bob in the group")
    await sb.user_leaves_voice(demo.alice, demo.guild)
    await sb._signal.wait_for(lambda: demo.alice.id not in group.in_group and not group.awaiting, 10, "alice out")
    assert group.epoch >= 3
    assert set(group.in_group) == {bot.user.id, bob.id}
    for e in sb.voice.dave.events:
        if e.what == "proposals":
            assert ("add", e.user_id) not in e.detail, "a member was sent an Add of itself"
    kinds = {k for e in sb.voice.dave.events if e.what == "proposals" for k, _ in e.detail}
    assert kinds == {"add", "remove"}
    assert vc.voice_privacy_code not in (None, first) and vc.voice_privacy_code == sb.privacy_code(demo.guild)
    cap = sb.capture(demo.guild)
    cap.clear()
    it = await sb.slash(bob, demo.general, "tone", seconds=0.4, stay=True)
    await asyncio.wait_for(it.wait_followup(), 30)
    assert cap.dropped == 0 and abs(len(cap.voiced) * 0.02 - 0.4) <= 0.04


async def test_bad_commit_is_answered_with_op31_and_the_bot_is_added_again(sb, demo, bot):
    await tone(sb, demo, seconds=0.2, stay=True)
    group = sb.dave_group(demo.voice)
    sb.corrupt_next_commit()
    await sb.user_joins_voice(sb.user("bob"), demo.voice)
    await sb._signal.wait_for(lambda: any(e.what == "invalid" for e in sb.voice.dave.events), 10, "op 31")
    assert any(o.direction == "in" and o.op == 31 for o in sb.voice_log)
    await sb.wait_dave_ready(demo.guild)
    assert bot.user.id in group.in_group
    cap = sb.capture(demo.guild)
    cap.clear()
    await tone(sb, demo, seconds=0.4, stay=True)
    assert cap.dropped == 0 and abs(len(cap.voiced) * 0.02 - 0.4) <= 0.04
    assert voice_client(bot, demo).voice_privacy_code == sb.privacy_code(demo.guild)


async def test_voice_resume_rejoins_the_group(sb, demo, bot):
    await tone(sb, demo, seconds=0.2, stay=True)
    acks = [o for o in sb.voice_log if o.direction == "in" and o.op == 7]
    assert not acks
    assert await sb.close_voice_ws(demo.guild, 4015)
    await sb._signal.wait_for(lambda: any(o.direction == "in" and o.op == 7 for o in sb.voice_log), 10, "RESUME")
    resume = next(o for o in sb.voice_log if o.direction == "in" and o.op == 7)
    assert resume.d["seq_ack"] > 0                      # it acknowledges the binary and JSON frames it got
    await sb.wait_voice_connected(demo.guild)
    await sb.wait_dave_ready(demo.guild)
    cap = sb.capture(demo.guild)
    cap.clear()
    await tone(sb, demo, seconds=0.4, stay=True)
    assert cap.dropped == 0 and abs(len(cap.voiced) * 0.02 - 0.4) <= 0.04


async def test_prepare_epoch_starts_a_new_group(sb, demo, bot):
    await tone(sb, demo, seconds=0.2, stay=True)
    vc = voice_client(bot, demo)
    before = vc.voice_privacy_code
    await sb.dave_new_group(demo.voice)
    await sb._signal.wait_for(lambda: any(o.direction == "out" and o.op == 24 for o in sb.voice_log), 5, "op 24")
    await sb.wait_dave_ready(demo.guild)
    assert sb.dave_group(demo.voice).epoch == 1
    assert vc.voice_privacy_code not in (None, before) and vc.voice_privacy_code == sb.privacy_code(demo.guild)


async def test_client_without_dave_is_closed_with_4017(sb, demo, bot, monkeypatch):
    monkeypatch.setattr(discord.voice_state.VoiceConnectionState, "max_dave_protocol_version", property(lambda s: 0))
    channel = bot.get_channel(demo.voice.id)
    with pytest.raises(discord.errors.ConnectionClosed) as exc:
        await channel.connect(timeout=10, reconnect=False)
    assert exc.value.code == 4017
    assert sb.voice.refused_no_dave == 1
    assert not sb.voice_connected(demo.guild)


async def test_revoked_adds_when_a_joiner_leaves_before_the_commit():
    async with Sandbox() as sb:
        sb.voice.dave.human_commit_delay_s = 5.0        # nobody commits during this test
        guild = sb.guild("g")
        voice = guild.voice_channel("Voice")
        alice, bob = sb.user("alice"), sb.user("bob")
        await sb.user_joins_voice(alice, voice)
        await sb.user_joins_voice(bob, voice)
        await sb.voice.dave.settle()
        alice_session = sb.voice.dave.humans[(voice.id, alice.id)].session
        assert alice_session.status == davey.SessionStatus.awaiting_response     # she holds a commit
        await sb.user_leaves_voice(bob, guild)
        await sb.voice.dave.settle()
        assert [e.user_id for e in sb.voice.dave.events if e.what == "revoke"] == [bob.id]
        assert alice_session.status == davey.SessionStatus.pending               # the revoke undid it
        assert sb.dave_group(voice).round is None and sb.dave_group(voice).epoch == 0


async def test_legacy_mode_without_e2ee():
    async with Sandbox(dave=False) as sb:
        from sandbox.demo import create_demo
        demo = await create_demo(sb)
        bot, task = await start_bot(sb)
        try:
            cap = sb.capture(demo.guild)
            await tone(sb, demo, seconds=0.4)
            assert cap.dropped == 0 and abs(len(cap.voiced) * 0.02 - 0.4) <= 0.04
            description = next(o for o in sb.voice_log if o.direction == "out" and o.op == 4)
            assert description.d["dave_protocol_version"] == 0
            assert not any(o.op in range(21, 32) for o in sb.voice_log)
        finally:
            await stop_bot(bot, task)


def test_malformed_or_foreign_commits_are_refused():
    from rfc9420.codec.tls import write_opaque_varint

    from sandbox.mls import ExternalSender, parse_commit_welcome, proposals_payload
    for junk in (b"", b"\x00\x01\x00\x01garbage", bytes(64)):
        with pytest.raises(ValueError):
            parse_commit_welcome(junk)
    sender = ExternalSender()
    a, b = davey.DaveSession(1, 111, 42), davey.DaveSession(1, 222, 42)
    a.set_external_sender(sender.package())
    add = sender.add(42, 0, 222, b.get_serialized_key_package())
    result = a.process_proposals(davey.ProposalsOperationType.append, proposals_payload([add]))
    cw = parse_commit_welcome(result.commit + result.welcome)
    assert (cw.commit, cw.welcome, cw.epoch, cw.refs) == (result.commit, result.welcome, 0, [add.ref])
    assert proposals_payload([add]) == write_opaque_varint(add.message)
