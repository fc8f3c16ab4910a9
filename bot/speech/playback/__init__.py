"""Playing an utterance: the player, the one voice driver thread, the track's handle, its frame buffer and feed."""
