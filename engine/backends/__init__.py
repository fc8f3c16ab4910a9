"""Synthesis backends (Kokoro, the default; Piper; CosyVoice2 on a GPU; a remote engine server), eSpeak NG, pools."""

# The one registration of a backend: engine.backend's name -> "module:Class", whose `from_settings(EngineSettings)`
# builds it. The factory, the settings' check, and the CLI's help all read this.
BACKENDS = {
    "kokoro": "engine.backends.kokoro.backend:KokoroBackend",
    "piper": "engine.backends.piper.backend:PiperBackend",
    "cosyvoice2": "engine.backends.cosyvoice.backend:CosyVoiceBackend",
    "remote": "engine.backends.remote.backend:RemoteBackend",
}
DEFAULT_BACKEND = "kokoro"


def backend_names() -> str:
    """"kokoro (default), piper, ...": for help texts."""
    return ", ".join(f"{n} (default)" if n == DEFAULT_BACKEND else n for n in BACKENDS)
