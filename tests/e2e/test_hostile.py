"""Hostile input through the sandbox: texts, voice names and attachments each get a clear, bounded answer."""

from __future__ import annotations

import asyncio
import resource
import time

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import text as sql

from tests.e2e.test_voices import espeak_clip
from tests.engine import clips

pytestmark = pytest.mark.e2e
MB = 1_000_000

ZALGO = "".join(ch + "\u0336\u0337\u0338\u0489\u0300\u0301\u0302\u0303\u0304" * 6 for ch in "hello zalgo")
HOSTILE_TEXTS = {
    "zalgo": ZALGO[:500],
    "10k": "word " * 2000,
    "10k-one-word": "a" * 10_000,
    "control-bytes": "".join(chr(c) for c in range(32)) + "hi\x7f\x1b[31mred\x1b[0m",
    "only-controls": "\x00\x01\x02\x1b\x7f\u200b\u200e\u200f\ufeff",
    "rtl-mixed": "\u202eevil\u202c שלום עולם مرحبا بالعالم hello 你好 Привет \u2067x\u2069",
    "mention-flood": " ".join(f"<@{10**17 + i}>" for i in range(60)) + " <@&1> <#2> @everyone @here",
    "emoji-flood": "😀" * 120 + "<:custom:123456789012345678>" * 10 + "👨‍👩‍👧‍👦" * 20,
    "nested-markdown": "||**__*~~`" * 20 + "deep" + "`~~*__**||" * 20 + " ```py\nprint(1)\n``` > quote",
    "links": "https://example.com/" + "a" * 300 + " " + "http://x.y " * 30,
    "whitespace": " \t\n" * 100,
    "surrogate-ish": "\ufffd\uffff\U0010ffff" * 50,
}
REPLY_OK = ("Speaking.", "Queued:", "too long", "nothing I can say")


def one_liner(text: str) -> None:
    assert text and "\n" not in text.strip() and "Traceback" not in text, text


async def table_counts(bot) -> dict:
    async with bot.db.engine.connect() as conn:
        return {t: (await conn.execute(sql(f"SELECT count(*) FROM {t}"))).scalar()
                for t in ("voices", "voice_features", "voice_shares")}


async def still_answers(sb, demo) -> None:
    it = await sb.slash(demo.alice, demo.general, "queue")
    assert await asyncio.wait_for(it.wait_text(), 10)


def no_traceback_in_bot_messages(sb, demo) -> None:
    for m in sb.bot_messages(demo.general):
        assert "Traceback" not in m.content and "Error" not in m.content, m.content


async def test_say_with_hostile_text_gets_a_clear_bounded_answer(sb, demo, bot):
    for name, text in HOSTILE_TEXTS.items():
        start = time.monotonic()
        it = await sb.slash(demo.alice, demo.general, "say", text=text)
        answer = await it.wait_text(timeout=20)
        assert time.monotonic() - start < 20, name
        one_liner(answer)
        assert any(r in answer for r in REPLY_OK), (name, answer)
        assert it.ephemeral, name
        if len(text) > bot.config.speech.max_text_chars:
            assert "too long" in answer, name
        current, pending = bot.speech.queue(demo.guild.id)
        for utt in [current, *pending]:
            if utt is not None:  # accepted text reaches the engine bounded and without control bytes
                assert len(utt.request.text) <= bot.config.speech.max_text_chars + 20, name
                assert all(c >= " " for c in utt.request.text), (name, utt.request.text)
        bot.speech.stop(demo.guild.id)
        await still_answers(sb, demo)
    no_traceback_in_bot_messages(sb, demo)


@given(st.text(min_size=1, max_size=600))
@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
async def test_say_with_generated_text_always_answers_one_line(sb, demo, bot, text):
    it = await sb.slash(demo.alice, demo.general, "say", text=text)
    answer = await it.wait_text(timeout=20)
    one_liner(answer)
    assert any(r in answer for r in REPLY_OK), (text, answer)
    bot.speech.stop(demo.guild.id)
    no_traceback_in_bot_messages(sb, demo)


async def test_readout_of_hostile_messages_is_bounded_and_the_bot_keeps_reading(sb, demo, bot):
    heard: list[str] = []
    done = asyncio.Event()

    def on(guild_id, utt, outcome):
        heard.append(utt.request.text)
        done.set()
    bot.speech.listeners.append(on)
    it = await sb.slash(sb.owner, demo.general, "readout channel", channel=demo.general)
    assert "read aloud" in await it.wait_text()
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="xsaid", value="off")
    await it.wait_text()
    it = await sb.slash(demo.alice, demo.general, "join")
    await it.wait_text(timeout=20)
    await sb.wait_voice_connected(demo.guild)
    limit = (await bot.prefs.guild(demo.guild.id)).max_message_chars
    for name, text in HOSTILE_TEXTS.items():
        before = len(heard)
        await sb.post(demo.alice, demo.general, text)
        await asyncio.sleep(0.6)  # within the per-user rate limit
        bot.speech.stop(demo.guild.id)
        for spoken in heard[before:]:
            assert len(spoken) <= limit + len(", and more"), (name, len(spoken))
            assert all(c >= " " for c in spoken), (name, spoken)
    # after all of it, a plain message is still read
    done.clear()
    await asyncio.sleep(1.0)
    await sb.post(demo.alice, demo.general, "still reading after all that")
    await asyncio.wait_for(done.wait(), 30)
    for _ in range(100):
        if "still reading after all that" in heard:
            break
        await asyncio.sleep(0.1)
    assert "still reading after all that" in heard
    no_traceback_in_bot_messages(sb, demo)


HOSTILE_NAMES = ["../../etc/passwd", "..\\..\\windows\\system32", "'; DROP TABLE voices; --", "x" * 1000,
                 "<@123456789012345678>", "**bold**", "", "   ", "a/b", "name\x00null", "-leading-dash"]


async def test_hostile_voice_names_are_refused_and_nothing_is_stored(sb, demo, bot):
    att = sb.attachment("me.wav", b"RIFF" + bytes(100), "audio/wav")
    for name in HOSTILE_NAMES:
        it = await sb.slash(demo.alice, demo.general, "voice register", name=name, clip=att)
        answer = await it.wait_text(timeout=10)
        one_liner(answer)
        assert "voice name" in answer and it.ephemeral, (name, answer)
        for cmd, opts in (("voice use", {}), ("voice delete", {}), ("voice rename", {"new_name": "ok"}),
                          ("voice share", {"server": True})):
            it = await sb.slash(demo.alice, demo.general, cmd, name=name, **opts)
            answer = await it.wait_text(timeout=10)
            one_liner(answer)
            assert "no voice named" in answer or "own no voice" in answer, (cmd, name, answer)
            assert len(answer) < 200
        it = await sb.slash(demo.alice, demo.general, "say", text="hello", voice=name or "x")
        assert "no voice named" in await it.wait_text(timeout=10)
    it = await sb.slash(demo.alice, demo.general, "nickname", name="n" * 1000)
    assert "at most 32" in await it.wait_text()
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="max_queue", value="'; DROP TABLE x; --" * 50)
    answer = await it.wait_text()
    one_liner(answer)
    assert "whole number" in answer
    assert await table_counts(bot) == {"voices": 0, "voice_features": 0, "voice_shares": 0}
    async with bot.db.engine.connect() as conn:
        tables = {r[0] for r in await conn.execute(sql("SELECT name FROM sqlite_master WHERE type='table'"))}
    assert {"voices", "voice_features", "voice_shares", "user_settings", "guild_settings"} <= tables
    bot.speech.stop(demo.guild.id)


def _truncated_ogg() -> bytes:
    data = clips.encode(clips.speechlike(8.0, 48_000), 48_000, "OGG", "OPUS")
    return data[: len(data) // 2]


# name -> (make attachment kwargs, what the final answer must contain)
ATTACHMENTS = {
    "pdf": (lambda: dict(filename="a.pdf", data=clips.pdf_like(2 * MB), content_type="application/pdf"),
            "not audio"),
    "random-bytes": (lambda: dict(filename="x.wav", data=bytes(range(256)) * 400, content_type="audio/wav"),
                     "not audio"),
    "truncated-ogg": (lambda: dict(filename="v.ogg", data=_truncated_ogg(), content_type="audio/ogg"),
                      "damaged"),
    "wav-claims-2h": (lambda: dict(filename="long.wav", data=clips.wav_header_claiming(2 * 3600 * 32_000),
                                   content_type="audio/wav"), "Not registered"),
    "wav-claims-10GB": (lambda: dict(filename="huge.wav", data=clips.wav_header_claiming(10 * 10**9),
                                     content_type="audio/wav"), "Not registered"),
    "flac-2-hours": (lambda: dict(filename="long.flac", data=clips.long_flac(2.0), content_type="audio/flac"),
                     "2 h 0 min"),
    "zip-bomb": (lambda: dict(filename="voice.zip", data=clips.zip_bomb(200), content_type="application/zip"),
                 "not audio"),
    # Content-Length lies
    "length-says-less": (lambda: dict(filename="me.wav", data=espeak_clip(), content_type="audio/wav",
                                      content_length=4000), "Not registered"),
    "length-says-more": (lambda: dict(filename="me.wav", data=espeak_clip(), content_type="audio/wav",
                                      content_length=9_000_000), "download of that file failed"),
    "length-says-50MB": (lambda: dict(filename="me.wav", data=b"RIFF" + bytes(1000), content_type="audio/wav",
                                      content_length=50 * MB), "limit"),
    "chunked-over-cap": (lambda: dict(filename="me.wav", data=b"RIFF" + bytes(11 * MB), content_type="audio/wav",
                                      content_length=None, size=1000), "limit"),
    "size-lies-small": (lambda: dict(filename="me.wav", data=b"RIFF" + bytes(11 * MB), content_type="audio/wav",
                                     size=2000), "limit"),
    "stalls-then-pdf": (lambda: dict(filename="a.wav", data=clips.pdf_like(200_000), content_type="audio/wav",
                                     stall_s=1.5), "not audio"),
}


async def test_hostile_attachments_are_not_registered_and_nothing_is_stored(sb, demo, bot):
    wrong = []
    for kind, (make, expected) in ATTACHMENTS.items():
        answer, elapsed, grown_mb = await register_hostile(sb, demo, make())
        if answer.startswith("Registered") or expected not in answer or "\n" in answer or "Traceback" in answer:
            wrong.append(f"{kind}: {answer!r}")
        if elapsed > 45:
            wrong.append(f"{kind}: took {elapsed:.0f} s")
        if grown_mb > 300:
            wrong.append(f"{kind}: peak memory grew by {grown_mb:.0f} MB")
        counts = await table_counts(bot)
        if counts != {"voices": 0, "voice_features": 0, "voice_shares": 0}:
            wrong.append(f"{kind}: stored {counts}")
        await still_answers(sb, demo)
    assert not wrong, "\n".join(wrong)


async def register_hostile(sb, demo, kw: dict) -> tuple[str, float, float]:
    """/voice register with a hostile attachment, confirming consent: (final answer, seconds, MB of peak growth)."""
    att = sb.attachment(kw.pop("filename"), kw.pop("data"), kw.pop("content_type"), **kw)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    start = time.monotonic()
    it = await sb.slash(demo.alice, demo.general, "voice register", name="mine", clip=att)
    first = await it.wait_response(timeout=10)
    if first.components:  # the consent prompt: confirm, then the download and checks run
        press = await sb.click(demo.alice, it, "confirm")
        await press.wait_response(timeout=10)

        def final(_):
            t = it.final_text() or ""
            return t if t.startswith(("Registered", "Not registered")) else None
        answer = await it.wait(final, timeout=45, what="the registration result")
    else:
        answer = await it.wait_text(timeout=10)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    return answer, time.monotonic() - start, grown_mb
