"""Voice conversion parts fitted from a reference clip and their signal processing (envelope, PSOLA, STFT filter)."""
