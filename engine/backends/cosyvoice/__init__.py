"""CosyVoice2-0.5B on a GPU: zero-shot cloning from a reference clip and its transcript."""
