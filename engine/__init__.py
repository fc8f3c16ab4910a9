"""Synthesis engine: text + voice -> streamed PCM. Knows nothing of Discord."""
