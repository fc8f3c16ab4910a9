"""Synthesis engine: text + voice -> streamed PCM. Knows nothing of Discord."""

import os as _os

# onnxruntime (1.32) starts Microsoft's 1DS telemetry when imported: it writes a device id and an event
# database under ~/.cache/Microsoft/DeveloperTools and queues events for upload. Off before any import.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
