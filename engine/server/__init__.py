"""The engine server: the OpenAI-compatible speech API, its API keys and its registered voices."""
