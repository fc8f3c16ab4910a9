"""What is said: an order's words (Discord content -> speakable text, the server's pronunciations) and its refusals."""
