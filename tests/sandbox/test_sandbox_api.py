"""The sandbox's test-facing API against a minimal discord.py bot: interactions, messages, sharding."""
from __future__ import annotations

import asyncio

import pytest
from conftest import start_bot, stop_bot

from sandbox import CommandNotSynced, Sandbox

pytestmark = pytest.mark.e2e


async def test_autocomplete(sb, demo, bot):
    choices = await sb.autocomplete(demo.alice, demo.general, "pick", "name", "ab")
    assert [c["value"] for c in choices] == ["abba", "abc"]


async def test_button_click(sb, demo, bot):
    it = await sb.slash(demo.alice, demo.general, "buttons")
    r = await it.wait_response(5)
    assert r.components[0]["components"][0]["custom_id"] == "ok"
    click = await sb.click(demo.alice, it, "ok")
    cr = await click.wait_response(5)
    assert cr.type == 7
    assert click.final_text() == "clicked by alice"
    assert it.original.content == "clicked by alice" and it.original.components == []


async def test_subcommand_with_attachment(sb, demo, bot):
    clip = sb.attachment("a.wav", b"RIFF" + b"\0" * 1000, "audio/wav")
    it = await sb.slash(demo.alice, demo.general, "voice register", name="me", clip=clip)
    r = await it.wait_response(5)
    assert r.content == "registered me: 1004 bytes audio/wav" and r.ephemeral


async def test_message_context_menu_with_a_file_answer(sb, demo, bot):
    menu = sb.find_command("Quote this", demo.guild, type_=3)
    assert menu["type"] == 3 and "options" not in menu
    msg = await sb.post(demo.alice, demo.general, "to be quoted")
    it = await sb.message_command(sb.owner, msg, "Quote this")
    r = await it.wait_response(5)
    assert r.content == "alice wrote: to be quoted"
    att = r.message.attachments[0]
    assert (att.filename, att.data, att.content_type) == ("q.txt", b"to be quoted", "text/plain")
    with pytest.raises(CommandNotSynced):
        await sb.message_command(demo.alice, msg, "Quote that")
    with pytest.raises(CommandNotSynced):
        await sb.slash(demo.alice, demo.general, "Quote this")


async def test_unsynced_command_and_bad_option(sb, demo, bot):
    with pytest.raises(CommandNotSynced):
        await sb.slash(demo.alice, demo.general, "nope")
    with pytest.raises(CommandNotSynced):
        await sb.slash(demo.alice, demo.general, "say", text="x", bogus=1)
    with pytest.raises(CommandNotSynced):
        await sb.slash(demo.alice, demo.general, "voice nothing")


async def test_dm_interaction(sb, demo, bot):
    it = await sb.slash(demo.alice, None, "tone")
    r = await it.wait_response(5)
    assert r.content == "guild only"
    assert it.payload["context"] == 1 and "user" in it.payload and "member" not in it.payload


async def test_messages(sb, demo, bot):
    msg = await sb.post(demo.alice, demo.general, "hello there")
    await asyncio.wait_for(bot.message_event.wait(), 5)
    seen = bot.seen_messages[0]
    assert (seen.id, seen.content, seen.author.id) == (msg.id, "hello there", demo.alice.id)
    assert seen.guild.id == demo.guild.id and seen.author.voice is not None
    await bot.get_channel(demo.general.id).send("reply from bot")
    m = await sb.wait_bot_message(demo.general, lambda m: m.content == "reply from bot", 5)
    assert m.author.id == sb.bot_user.id


async def test_new_guild_after_connect_and_permissions(sb, demo, bot):
    g = sb.guild("Later")
    ch = g.voice_channel("Locked")
    ch.set_overwrite(g.everyone, deny=1 << 20)
    g.bot_role.edit(permissions=0)
    for _ in range(50):
        dg = bot.get_guild(g.id)
        if dg and dg.get_channel(ch.id) and not dg.me.guild_permissions.administrator:
            break
        await asyncio.sleep(0.05)
    perms = dg.get_channel(ch.id).permissions_for(dg.me)
    assert not perms.connect and perms.view_channel     # discord.py also clears Speak without Connect
    assert g.permissions_for(sb.bot_user, ch) & (1 << 21) and not g.permissions_for(sb.bot_user, ch) & (1 << 20)


async def test_shards_route_guilds():
    async with Sandbox(shards=2) as sb:
        g0 = sb.guild("zero", shard=(0, 2))
        g1 = sb.guild("one", shard=(1, 2))
        g0.text_channel("general")
        c1 = g1.text_channel("general")
        u = sb.user("bob")
        bot, task = await start_bot(sb)
        try:
            assert bot.shard_count == 2 and {g.id for g in bot.guilds} == {g0.id, g1.id}
            assert bot.get_guild(g0.id).shard_id == 0 and bot.get_guild(g1.id).shard_id == 1
            gc = [(o.shard, o.d["id"]) for o in sb.gateway_log if o.t == "GUILD_CREATE"]
            assert sorted(gc) == [(0, str(g0.id)), (1, str(g1.id))]
            it = await sb.slash(u, c1, "ping")
            assert (await it.wait_response(5)).content == "pong"
        finally:
            await stop_bot(bot, task)


async def test_message_edit_delete_webhook_and_bot_authors(sb, demo, bot):
    deleted, edited = asyncio.Event(), asyncio.Event()

    async def on_delete(m):
        deleted.set()

    async def on_edit(before, after):
        if after.content == "edited":
            edited.set()
    bot.add_listener(on_delete, "on_message_delete")
    bot.add_listener(on_edit, "on_message_edit")
    msg = await sb.post(demo.alice, demo.general, "original")
    await asyncio.wait_for(bot.message_event.wait(), 5)
    await sb.edit_message(msg, "edited")
    await asyncio.wait_for(edited.wait(), 5)
    sb.delete_message(msg)
    await asyncio.wait_for(deleted.wait(), 5)
    other_bot = sb.user("otherbot", bot=True)
    await sb.post(other_bot, demo.general, "beep")
    await sb.post(demo.alice, demo.general, "via hook", webhook=True)
    for _ in range(100):
        if len(bot.seen_messages) >= 3:
            break
        await asyncio.sleep(0.05)
    beep, hook = bot.seen_messages[1:3]
    assert beep.author.bot and beep.content == "beep"
    assert hook.webhook_id is not None and hook.content == "via hook"
