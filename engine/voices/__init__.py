"""Registered voices on a single-speaker backend: reference clips, embeddings, voice matching fitted from the clip."""
