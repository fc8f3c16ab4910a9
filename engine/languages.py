"""Language codes: the base code of a tag ("en_US" -> "en")."""

from __future__ import annotations

import re

_TAG = re.compile(r"[a-z]{2,3}")


def base(tag: str) -> str:
    """The base language code of a tag such as "en_US", "fr-FR" or "cmn"; "" when it is not one."""
    first = re.split(r"[-_]", (tag or "").strip().lower(), maxsplit=1)[0]
    return first if _TAG.fullmatch(first) else ""
