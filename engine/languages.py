"""Language codes: the base code of a tag ("en_US" -> "en") and the language a Piper voice's .onnx.json names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TAG = re.compile(r"[a-z]{2,3}")


def base(tag: str) -> str:
    """The base language code of a tag such as "en_US", "fr-FR" or "cmn"; "" when it is not one."""
    first = re.split(r"[-_]", (tag or "").strip().lower(), maxsplit=1)[0]
    return first if _TAG.fullmatch(first) else ""


def piper_languages(config: Mapping[str, Any]) -> tuple[str, ...]:
    """What a Piper voice speaks, from its .onnx.json: language.code (or .family), else the eSpeak voice it
    phonemizes with; ("en",) when the file names neither (Piper's own default)."""
    language = config.get("language")
    if isinstance(language, Mapping):
        for key in ("code", "family"):
            code = base(str(language.get(key) or ""))
            if code:
                return (code,)
    espeak = config.get("espeak")
    if isinstance(espeak, Mapping):
        code = base(str(espeak.get("voice") or ""))
        if code:
            return (code,)
    return ("en",)
