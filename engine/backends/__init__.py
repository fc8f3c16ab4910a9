"""Synthesis backends: Piper (the default), eSpeak NG, CosyVoice2 on a GPU, a remote engine server; their pools."""
