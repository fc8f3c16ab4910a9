"""The Discord side: client, settings, storage and the path from text to a voice channel."""
