"""Registered voices on a single-speaker backend: reference clips, embeddings, and voice matching fitted from the clip (envelope, PSOLA, STFT filter)."""
