"""/voice record: after the consent button, the sandbox member's own DAVE- and transport-encrypted voice is kept from
the call and registered as an upload is; nobody else's is decoded; Stop, leaving and /stop end it."""

from __future__ import annotations

import io
import wave

import discord
import numpy as np
import pytest
import soxr

from engine.voices import embedding
from sandbox.talker import wav_frames
from tests.audio_util import mono
from tests.e2e.test_hearing import CountingDecoder, join, join_with_bob, until, voice_wav
from tests.e2e.test_voices import SPOKEN, espeak_clip, final_edit

pytestmark = pytest.mark.e2e


def through_opus(wav: bytes) -> bytes:
    """`wav` as the call carries it (20 ms frames, Opus encoded and decoded), as a mono 48 kHz WAV to upload."""
    encoder, decoder = discord.opus.Encoder(), discord.opus.Decoder()
    pcm = b"".join(decoder.decode(encoder.encode(f, 960), fec=False) for f in wav_frames(wav))
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(48_000)
        w.writeframes(np.round(mono(pcm) * 32768).clip(-32768, 32767).astype("<i2").tobytes())
    return out.getvalue()


async def start_recording(sb, demo, bot, name: str = "spoken", user=None):
    """/voice record NAME, consent given: the interaction, the press, and the bot's Recording."""
    user = user or demo.alice
    it = await sb.slash(user, demo.general, "voice record", name=name)
    consent = await it.wait_response(timeout=10)
    assert consent.ephemeral and "right to use it" in consent.content and "only your own audio" in consent.content
    press = await sb.click(user, it, "confirm")
    assert (await press.wait_text()).startswith("Recording your voice")
    return it, press, bot.recordings.active[demo.guild.id, user.id]


async def registered(sb, demo, bot, it, press) -> str:
    result = await final_edit(it, press)
    assert not bot.recordings.active
    return result


async def say_in(bot, demo, name: str) -> np.ndarray:
    """SPOKEN in alice's registered voice NAME, mono at 16 kHz."""
    voice = await bot.voices.resolve(demo.alice.id, demo.guild.id, name)
    return soxr.resample(mono(await bot.engine.synthesize_all(SPOKEN, voice)), 48_000, 16_000).astype(np.float32)


async def test_a_recorded_voice_is_as_close_to_its_speaker_as_the_same_clip_uploaded(sb, demo, bot):
    from bench.voices import judges  # the bench's two speaker encoders (Resemblyzer, the d-vector)

    wav = espeak_clip()
    await join(sb, demo)
    it, press, recording = await start_recording(sb, demo, bot)
    talk = sb.speak(demo.alice, wav, demo.guild)
    await talk.wait(timeout=60)
    await until(lambda: recording.audio.frames >= len(talk.sent_at) - 2, "alice's frames")
    stop = await sb.click(demo.alice, it, "stop")
    assert await stop.wait_text() == "Stopped."
    result = await registered(sb, demo, bot, it, press)
    assert result.startswith("Registered 'spoken'"), result
    assert not recording.audio.pcm                                # the recording keeps nothing after registration

    upload = sb.attachment("me.wav", through_opus(wav), "audio/wav")
    it = await sb.slash(demo.alice, demo.general, "voice register", name="uploaded", clip=upload)
    await it.wait_response(timeout=10)
    press = await sb.click(demo.alice, it, "confirm")
    result = await final_edit(it, press)
    assert result.startswith("Registered 'uploaded'"), result

    rate = wave.open(io.BytesIO(wav)).getframerate()
    speaker = soxr.resample(mono(wave.open(io.BytesIO(wav)).readframes(10**7), channels=1), rate, 16_000)
    recorded, uploaded = await say_in(bot, demo, "spoken"), await say_in(bot, demo, "uploaded")
    for judge, embed in judges().items():
        target = embed(speaker.astype(np.float32))
        sims = [embedding.similarity(embed(x), target) for x in (recorded, uploaded)]
        print(f"{judge}: similarity to the speaker, recorded {sims[0]:.4f}, uploaded {sims[1]:.4f}")
        assert abs(sims[0] - sims[1]) <= 0.02, (judge, sims)


async def test_nothing_of_a_member_who_did_not_consent_is_decoded(sb, demo, bot):
    bob = await join_with_bob(sb, demo)
    CountingDecoder.made = decoders = []
    bot.recordings.decoder = CountingDecoder
    it, press, recording = await start_recording(sb, demo, bot)
    talks = [sb.speak(bob, voice_wav(4.0, pitch=237.0), demo.guild), sb.speak(demo.alice, voice_wav(1.0), demo.guild)]
    for talk in talks:
        await talk.wait(timeout=20)
    await until(lambda: recording.audio.frames >= len(talks[1].sent_at) - 2, "alice's frames")
    assert bot.speech.received.packets >= len(talks[0].sent_at) + len(talks[1].sent_at) - 4  # bob was heard
    await sb.click(demo.alice, it, "stop")
    result = await registered(sb, demo, bot, it, press)
    assert result.startswith("Not registered: The clip has only"), result   # 1 s: the upload's own check
    assert len(decoders) == 1 and decoders[0].calls == recording.audio.frames <= len(talks[1].sent_at)
    assert not {"transport_failed", "dave_failed", "decode_failed"} & set(bot.speech.received.drops())
    assert not recording.audio.pcm


async def test_leaving_the_channel_ends_it_and_keeps_nothing(sb, demo, bot):
    await join(sb, demo)
    it, press, recording = await start_recording(sb, demo, bot)
    talk = sb.speak(demo.alice, voice_wav(0.6), demo.guild)
    await talk.wait(timeout=10)
    await until(lambda: recording.audio.frames > 0, "alice's frames")
    await sb.user_leaves_voice(demo.alice, demo.guild)
    result = await registered(sb, demo, bot, it, press)
    assert result == "Not registered: You left my voice channel, so the recording ended; nothing was kept."
    assert not recording.audio.pcm and not await bot.voices.visible(demo.alice.id, demo.guild.id)


async def test_stop_ends_it_and_keeps_nothing(sb, demo, bot):
    await join(sb, demo)
    bob = sb.user("bob")
    await sb.user_joins_voice(bob, demo.voice)
    it, press, recording = await start_recording(sb, demo, bot)
    stop = await sb.slash(bob, demo.general, "stop")
    assert (await stop.wait_text()).startswith("Stopped")
    result = await registered(sb, demo, bot, it, press)
    assert result == "Not registered: /stop ended the recording; nothing was kept."
    assert not await bot.voices.visible(demo.alice.id, demo.guild.id)


async def test_the_bot_leaving_ends_it(sb, demo, bot):
    await join(sb, demo)
    it, press, _ = await start_recording(sb, demo, bot)
    leave = await sb.slash(demo.alice, demo.general, "leave")
    assert await leave.wait_text(timeout=20) == "Left the voice channel."
    result = await registered(sb, demo, bot, it, press)
    assert result == "Not registered: I left the voice channel, so the recording ended; nothing was kept."


async def test_a_member_outside_the_bots_channel_or_a_bot_in_none_is_told_why(sb, demo, bot):
    it = await sb.slash(demo.alice, demo.general, "voice record", name="early")
    assert await it.wait_text() == "I'm not in a voice channel here. Use /join, then /voice record in my channel."
    await join(sb, demo)
    bob = sb.user("bob")
    demo.guild.add_member(bob)
    it = await sb.slash(bob, demo.general, "voice record", name="mine")
    assert (await it.wait_text()).startswith("Join my voice channel")
    it = await sb.slash(demo.alice, demo.general, "voice record", name="../bad")
    assert "name" in (await it.wait_text()).lower()
    first, press, _ = await start_recording(sb, demo, bot, name="one")
    it = await sb.slash(demo.alice, demo.general, "voice record", name="two")
    assert await it.wait_text() == "You are being recorded already; press Stop on that recording first."
    await sb.click(demo.alice, first, "stop")
    result = await registered(sb, demo, bot, first, press)
    assert result == ("Not registered: I heard nothing from you in the call (is your microphone muted?); nothing "
                      "was kept.")
