"""Settings files: the loader shared by the bot and the engine server."""
