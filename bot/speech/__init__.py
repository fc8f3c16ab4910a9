"""Speech in voice channels: text cleanup, per-guild speakers, streaming audio sources."""
