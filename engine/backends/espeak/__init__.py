"""eSpeak NG: every language it knows, a process per segment, read as it writes."""
