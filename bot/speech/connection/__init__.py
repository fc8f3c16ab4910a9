"""A guild's voice connection: discord.py's VoiceClient observed, its state, DAVE, the driver's sink."""
