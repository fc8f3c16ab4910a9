"""Voice conversion parts fitted from a reference clip (spectral envelope, aperiodicity, speaking rate)."""
