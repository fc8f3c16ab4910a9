"""VoiceStore.voice_for: how a speech request's voice name becomes a Voice, per tenant and backend."""

from __future__ import annotations

import pytest

from engine.base import BackendInfo
from engine.server.voice_store import VoiceBackendMismatch, VoiceNotFound, VoiceStore

SINGLE = BackendInfo(name="piper", version="1", sample_rate=22_050, clones=True, voices=("default",))
MULTI = BackendInfo(name="multi", version="1", sample_rate=22_050, clones=False, voices=("default", "a", "b"))
VID = "v0123456789abcdef"


def test_default_and_backend_voices_keep_speed_and_pitch() -> None:
    store = VoiceStore()
    voice = store.voice_for("", "t", SINGLE, speed=1.5, pitch=2.0)
    assert (voice.name, voice.speed, voice.pitch, voice.profile) == ("default", 1.5, 2.0, None)
    assert store.voice_for("a", "t", MULTI, speed=1.0, pitch=0.0).name == "a"


def test_openai_names_are_the_default_voice_or_a_speaker() -> None:
    store = VoiceStore()
    assert store.voice_for("Alloy", "t", SINGLE, speed=1.0, pitch=0.0).name == "default"
    assert store.voice_for("alloy", "t", MULTI, speed=1.0, pitch=0.0).name == "a"
    assert store.voice_for("ash", "t", MULTI, speed=1.0, pitch=0.0).name == "b"
    assert store.voice_for("ballad", "t", MULTI, speed=1.0, pitch=0.0).name == "a"


def test_a_registered_voice_is_seen_by_its_tenant_on_its_backend_only() -> None:
    store = VoiceStore()
    store.add(VID, "mine", backend="piper", backend_version="1", features=b"f", owner="t1")
    voice = store.voice_for(VID, "t1", SINGLE, speed=1.0, pitch=0.0)
    assert voice.name == "default" and voice.profile is not None and voice.profile.features == b"f"
    with pytest.raises(VoiceNotFound):
        store.voice_for(VID, "t2", SINGLE, speed=1.0, pitch=0.0)
    with pytest.raises(VoiceBackendMismatch):
        store.voice_for(VID, "t1", MULTI, speed=1.0, pitch=0.0)
    store.set_public(VID)
    assert store.voice_for(VID, "t2", SINGLE, speed=1.0, pitch=0.0).profile is not None


def test_unknown_names_are_not_found() -> None:
    with pytest.raises(VoiceNotFound):
        VoiceStore().voice_for("nobody", "t", SINGLE, speed=1.0, pitch=0.0)
