"""A client of an engine server (OpenAI's speech API), and its registered voices' blob."""
