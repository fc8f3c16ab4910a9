"""Who may use each command, through the sandbox: a table of commands by kind of user, DMs, other guilds."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from demo.sandbox_bot import sandbox_settings, start_bot
from tests.e2e.test_voices import FIT, espeak_clip

pytestmark = pytest.mark.e2e
MANAGE_GUILD = 1 << 5
MOVE_MEMBERS = 1 << 24

# Kinds of user in the matrix guild (owned by someone else, so the bot's owner is a plain member there):
#   bot_owner  the application's owner (sb.owner); config owner_ids is empty, so discord.py asks the API
#   manager    a member with a role holding Manage Server; not in voice
#   voice_owner owns the voice "secret"; in the bot's voice channel
#   shared     "secret" is shared with them; in the bot's voice channel
#   listener   a plain member in the bot's voice channel
#   anyone     a plain member, not in voice
KINDS = ("bot_owner", "manager", "voice_owner", "shared", "listener", "anyone")
IN_VOICE = {"voice_owner", "shared", "listener"}
CONTROL = {"manager"} | IN_VOICE          # /skip, /stop, /leave: in the bot's channel or Manage Server
REFUSALS = ("Only the bot's owner", "Manage Server", "Join my voice channel", "to make me leave",
            "to speak there", "no voice named", "own no voice", "only works in a server", "not allowed",
            "Something went wrong", "Join a voice channel first")


@dataclass(frozen=True)
class Case:
    command: str
    options: dict = field(default_factory=dict)
    allowed: frozenset = frozenset(KINDS)
    refusal: str = ""          # what everyone else is told
    after: str = ""            # "rejoin", "stop", "cancel": undo what an allowed call did


def case(command, options=None, allowed=KINDS, refusal="", after=""):
    return Case(command, options or {}, frozenset(allowed), refusal, after)


OWNER = "Only the bot's owner"
MANAGE = "Manage Server"
NO_VOICE = "no voice named"
NOT_OWNED = "own no voice"

MATRIX = [
    # bot owner only
    case("plugins list", allowed={"bot_owner"}, refusal=OWNER),
    case("plugins reload", {"name": "nosuch"}, {"bot_owner"}, OWNER),
    case("plugins unload", {"name": "nosuch"}, {"bot_owner"}, OWNER),
    # Manage Server
    case("settings set", {"setting": "xsaid", "value": "on"}, {"manager"}, MANAGE),
    case("settings set", {"setting": "max_queue", "value": "20"}, {"manager"}, MANAGE),
    case("settings set", {"setting": "custom_voices", "value": "on"}, {"manager"}, MANAGE),
    case("settings role", {}, {"manager"}, MANAGE),
    case("readout channel", {"channel": "general"}, {"manager"}, MANAGE),
    case("readout off", {}, {"manager"}, MANAGE),
    case("dictionary add", {"word": "gif", "say_as": "jif"}, {"manager"}, MANAGE),
    case("dictionary remove", {"word": "gif"}, {"manager"}, MANAGE),
    # anyone
    case("dictionary list"),
    case("dictionary export"),
    case("settings show"),
    case("optout", after="optin"),
    case("optin"),
    case("nickname", {"name": "Someone"}),
    case("queue"),
    case("voice list"),
    case("voice settings", {"speed": 1.0, "pitch": 0.0}),
    case("voice register", {"name": "fresh", "clip": "clip"}, after="cancel"),
    # in the bot's voice channel, or Manage Server
    case("skip", allowed=CONTROL, refusal="Join my voice channel"),
    case("stop", allowed=CONTROL, refusal="Join my voice channel"),
    case("leave", allowed=CONTROL, refusal="to make me leave", after="rejoin"),
    # recording a voice: members of the bot's channel, each their own
    case("voice record", {"name": "fresh"}, IN_VOICE, "Join my voice channel", after="cancel"),
    # speaking there: members of the bot's channel (require_voice is on by default)
    case("say", {"text": "hello there"}, IN_VOICE, "to speak there", after="stop"),
    # the voice's owner, and those it is shared with
    case("voice use", {"name": "secret"}, {"voice_owner", "shared"}, NO_VOICE),
    case("voice preview", {"name": "secret", "text": "hi"}, {"voice_owner", "shared"}, NO_VOICE, after="stop"),
    case("say", {"text": "hello", "voice": "secret"}, {"voice_owner", "shared"}, NO_VOICE, after="stop"),
    case("tts", {"text": "hello", "voice": "secret"}, {"voice_owner", "shared"}, NO_VOICE),
    # the voice's owner alone
    case("voice rename", {"name": "secret", "new_name": "secret"}, {"voice_owner"}, NOT_OWNED),
    case("voice delete", {"name": "secret"}, {"voice_owner"}, NOT_OWNED, after="cancel"),
    case("voice share", {"name": "secret", "user": "bystander"}, {"voice_owner"}, NOT_OWNED),
    case("voice unshare", {"name": "secret", "user": "bystander"}, {"voice_owner"}, NOT_OWNED),
]

# Commands that only make sense in a server: invoked in a DM (channel=None) they are refused.
GUILD_ONLY = [
    ("join", {}), ("leave", {}), ("say", {"text": "hi"}), ("skip", {}), ("stop", {}), ("queue", {}),
    ("nickname", {"name": "x"}), ("settings show", {}), ("settings set", {"setting": "xsaid", "value": "on"}),
    ("settings role", {}), ("readout off", {}), ("voice preview", {"name": "secret"}), ("dictionary list", {}),
    ("tts", {"text": "hi"}), ("voice record", {}),
]
DM_OK = [("optout", {}), ("optin", {}), ("voice list", {}), ("voice settings", {"speed": 1.0})]


@dataclass
class World:
    sb: object
    bot: object
    guild: object
    general: object
    voice: object
    users: dict

    async def ensure_connected(self) -> None:
        if not self.bot.speech.is_connected(self.guild.id):
            it = await self.sb.slash(self.users["listener"], self.general, "join")
            assert "Joined" in await it.wait_text(timeout=20)
        await self.sb.wait_voice_connected(self.guild)
        for _ in range(100):  # the bot's own view of its channel, as the commands see it
            if self.bot.speech.voice_channel(self.guild.id) is not None:
                return
            await asyncio.sleep(0.05)


@pytest.fixture
async def world(sb, settings):
    boss = sb.user("boss")
    guild = sb.guild("Matrix", owner=boss)
    general = guild.text_channel("general")
    voice = guild.voice_channel("Voice")
    users = {"bot_owner": sb.owner}
    for kind in KINDS[1:] + ("bystander",):
        users[kind] = sb.user(kind)
        guild.add_member(users[kind])
    guild.add_member(sb.owner)
    managers = guild.role("managers", MANAGE_GUILD)
    guild.add_member(users["manager"], roles=[managers])
    for kind in IN_VOICE:
        await sb.user_joins_voice(users[kind], voice)
    running = await start_bot(sb, sandbox_settings(settings, sb))
    bot = running.bot
    info = await add_secret_voice(bot, users["voice_owner"].id)
    assert await bot.voices.share(users["voice_owner"].id, "secret", "user", users["shared"].id)
    w = World(sb, bot, guild, general, voice, users)
    await w.ensure_connected()
    assert info.id
    yield w
    await running.stop()


_REGISTRATION: list = []  # the clip's analysis, done once per session: every test stores the same voice


async def add_secret_voice(bot, owner_id: int):
    from bot.storage import voices_repo

    if not _REGISTRATION:
        _REGISTRATION.append(await bot.voices._run_registration(espeak_clip(), FIT))
    reg = _REGISTRATION[0]
    return await voices_repo.add_voice(bot.db, owner_id=owner_id, name="secret", transcript=reg.transcript,
                                       clip_flac=reg.flac, clip_seconds=reg.duration_s, embedding=reg.embedding,
                                       features=dict(reg.features))


def resolve_options(w: World, options: dict) -> dict:
    out = {}
    for key, value in options.items():
        if value == "general":
            value = w.general
        elif value == "bystander":
            value = w.users["bystander"]
        elif value == "clip":
            value = w.sb.attachment("me.wav", b"RIFF" + bytes(64), "audio/wav")
        out[key] = value
    return out


async def run_case(w: World, c: Case, kind: str) -> tuple[str, bool]:
    user = w.users[kind]
    it = await w.sb.slash(user, w.general, c.command, **resolve_options(w, c.options))
    text = await it.wait_text(timeout=20)
    if c.after == "cancel" and it.original is not None and it.original.components:
        press = await w.sb.click(user, it, "cancel")
        await press.wait_response()
    elif c.after == "stop":
        w.bot.speech.stop(w.guild.id)
    elif c.after == "optin":
        await w.bot.prefs.update_user(user.id, opted_out=False)
    elif c.after == "rejoin":
        await w.ensure_connected()
    return text, it.ephemeral


async def test_every_command_by_every_kind_of_user(world):
    w = world
    assert await w.bot.is_owner(w.sb.owner)           # the application's owner, from /oauth2/applications/@me
    assert not await w.bot.is_owner(w.users["manager"])
    wrong = []
    for c in MATRIX:
        for kind in KINDS:
            if c.command in ("skip", "stop", "leave", "say", "voice preview", "voice record"):
                await w.ensure_connected()
            text, ephemeral = await run_case(w, c, kind)
            refused = any(r in text for r in REFUSALS)
            if kind in c.allowed:
                if refused:
                    wrong.append(f"/{c.command} by {kind}: refused: {text!r}")
            else:
                if c.refusal not in text:
                    wrong.append(f"/{c.command} by {kind}: not refused with {c.refusal!r}: {text!r}")
                elif not ephemeral:
                    wrong.append(f"/{c.command} by {kind}: refusal is not ephemeral")
    assert not wrong, "\n".join(wrong)
    # nothing a refused user did stuck: the voice is still secret's, shared with one user, settings unchanged
    voices = await w.bot.voices.visible(w.users["voice_owner"].id, w.guild.id)
    assert [v.name for v in voices] == ["secret"]
    assert await w.bot.voices.visible(w.users["anyone"].id, w.guild.id) == []
    assert await w.bot.voices.visible(w.users["bystander"].id, w.guild.id) == []
    prefs = await w.bot.prefs.guild(w.guild.id)
    assert prefs.readout_channel_ids == [] and prefs.xsaid is True


async def test_guild_only_commands_are_refused_in_dms_and_personal_ones_work(world):
    w = world
    for kind in ("bot_owner", "manager", "anyone"):
        user = w.users[kind]
        for command, options in GUILD_ONLY:
            it = await w.sb.slash(user, None, command, **options)
            text = await it.wait_text(timeout=10)
            assert "only works in a server" in text, (kind, command, text)
            assert it.ephemeral
        for command, options in DM_OK:
            it = await w.sb.slash(user, None, command, **options)
            text = await it.wait_text(timeout=10)
            assert not any(r in text for r in REFUSALS), (kind, command, text)
    it = await w.sb.slash(w.sb.owner, None, "plugins list")
    assert "speech" in await it.wait_text()
    it = await w.sb.slash(w.users["anyone"], None, "plugins list")
    assert OWNER in await it.wait_text()
    # a voice shared with "this server" cannot be shared from a DM
    it = await w.sb.slash(w.users["voice_owner"], None, "voice share", name="secret", server=True)
    assert "only inside that server" in await it.wait_text()


async def test_join_does_not_pull_the_bot_away_from_listeners_or_into_a_forbidden_channel(world):
    w = world
    other = w.guild.voice_channel("Other")
    locked = w.guild.voice_channel("Locked")
    connect = 1 << 20
    mover = w.users["anyone"]
    locked.set_overwrite(mover, deny=connect)
    await w.sb.user_joins_voice(mover, other)
    await asyncio.sleep(0.2)
    it = await w.sb.slash(mover, w.general, "join")
    assert "in use in" in await it.wait_text(timeout=20) and it.ephemeral
    assert w.sb.bot_voice_channel(w.guild) is w.voice
    it = await w.sb.slash(mover, w.general, "join", channel=locked)
    assert "permission to connect" in await it.wait_text(timeout=20)
    # someone with Move Members may move it: the command is accepted (deferred while the bot moves).
    # (The move itself is not awaited here: a bot-initiated move_to times out against the sandbox.)
    movers = w.guild.role("movers", MOVE_MEMBERS)
    w.guild.add_member(w.users["manager"], roles=[movers])
    await w.sb.user_joins_voice(w.users["manager"], other)
    await asyncio.sleep(0.2)
    it = await w.sb.slash(w.users["manager"], w.general, "join")
    assert (await it.wait_response(timeout=10)).type == 5


async def test_a_user_in_another_guild_cannot_touch_this_guilds_queue(world, sb):
    w = world
    guild_b = sb.guild("Elsewhere")
    general_b, voice_b = guild_b.text_channel("general"), guild_b.voice_channel("Voice")
    stranger = sb.user("stranger")
    guild_b.add_member(stranger, roles=[guild_b.role("mods", MANAGE_GUILD | MOVE_MEMBERS)])
    await sb.user_joins_voice(stranger, voice_b)
    await asyncio.sleep(0.3)
    capture = sb.capture(w.guild)
    capture.clear()
    speaker = w.users["listener"]
    long_text = "This guild is speaking a rather long sentence that nobody elsewhere may cut short. " * 3
    for text in (long_text, "and a second message waiting in the queue"):
        it = await sb.slash(speaker, w.general, "say", text=text)
        answer = await it.wait_text(timeout=30)
        assert not any(r in answer for r in REFUSALS), answer
    await capture.wait_for_audio(0.5, timeout=30)
    for command, expect in (("skip", "Nothing is being said"), ("queue", "Nothing is waiting"),
                            ("stop", "0 waiting")):
        it = await sb.slash(stranger, general_b, command)
        assert expect in await it.wait_text(timeout=10), command
    current, pending = w.bot.speech.queue(w.guild.id)
    assert current is not None and len(pending) == 1
    before = capture.voiced_seconds
    await asyncio.sleep(1.0)
    assert capture.voiced_seconds > before + 0.5       # still speaking in guild A
    # a voice shared with guild A is not visible from guild B, even to A's members
    owner = w.users["voice_owner"]
    it = await sb.slash(owner, w.general, "voice share", name="secret", server=True)
    assert "now shared" in await it.wait_text()
    assert [v.name for v in await w.bot.voices.visible(w.users["anyone"].id, w.guild.id)] == ["secret"]
    it = await sb.slash(stranger, general_b, "voice use", name="secret")
    assert NO_VOICE in await it.wait_text()
    w.bot.speech.stop(w.guild.id)
