"""Pattern entries of the pronunciation dictionary: a safe subset of regular expressions, checked, compiled, and
applied within a time budget per message."""

from __future__ import annotations

import re
import re._constants as sre  # the standard library's own parse of a pattern: what it is made of
import re._parser as sre_parse
from dataclasses import dataclass

import regex  # the same syntax as re, with a timeout per call

from bot.errors import UserError

MAX_PATTERN_CHARS = 100
MAX_UNBOUNDED = 3  # repeats without an upper bound in one pattern (each adjacent pair can cost n^2)
BUDGET_S = 0.05  # the most the patterns may take on one message; the rest are not applied past it
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}
_REFUSED = {
    sre.GROUPREF: "backreferences (\\1, (?P=name)) are not allowed",
    sre.GROUPREF_EXISTS: "conditionals ((?(1)...)) are not allowed",
    sre.ASSERT: "lookarounds ((?=...), (?<=...)) are not allowed",
    sre.ASSERT_NOT: "lookarounds ((?!...), (?<!...)) are not allowed",
}


@dataclass(frozen=True)
class Pattern:
    """A checked pattern entry: its source as typed, what is said instead, and its compiled form."""

    source: str
    say_as: str
    compiled: regex.Pattern[str]


def check_pattern(source: str) -> str:
    """`source` if it is a pattern of the safe subset, else a UserError saying why not."""
    if not source or len(source) > MAX_PATTERN_CHARS:
        raise UserError(f"A pattern has 1 to {MAX_PATTERN_CHARS} characters.")
    try:
        parsed = sre_parse.parse(source)
    except (re.error, RecursionError, OverflowError) as exc:
        raise UserError(f"That pattern does not compile: {exc}.") from None
    unbounded = _walk(parsed, in_repeat=False)
    if unbounded > MAX_UNBOUNDED:
        raise UserError(f"That pattern has {unbounded} open-ended repeats (+, *, {{n,}}); at most {MAX_UNBOUNDED} "
                        "keep it fast.")
    if parsed.getwidth()[0] == 0:
        raise UserError("That pattern can match empty text; it must match at least one character.")
    return source


def _walk(items: sre_parse.SubPattern | list, *, in_repeat: bool) -> int:
    """Refuse what could backtrack without bound; the number of open-ended repeats found."""
    count = 0
    for op, arg in items:
        if op in _REFUSED:
            raise UserError(f"That pattern is refused: {_REFUSED[op]}.")
        if op in _REPEATS:
            if in_repeat:
                raise UserError("That pattern is refused: a repeat inside a repeat, like (a+)+, can take forever.")
            low, high, body = arg
            count += high == sre.MAXREPEAT
            count += _walk(body, in_repeat=True)
        elif op is sre.BRANCH:
            if in_repeat:
                raise UserError("That pattern is refused: a choice inside a repeat, like (a|ab)*, can take forever; "
                                "use a character class like [ab]* instead.")
            count += sum(_walk(branch, in_repeat=in_repeat) for branch in arg[1])
        elif op in (sre.SUBPATTERN, sre.ATOMIC_GROUP):
            count += _walk(arg[-1] if op is sre.SUBPATTERN else arg, in_repeat=in_repeat)
    return count


def compile_pattern(source: str, say_as: str) -> Pattern:
    """A stored or newly checked entry, compiled case-insensitively (as whole words are matched)."""
    return Pattern(source, say_as, regex.compile(check_pattern(source), regex.IGNORECASE | regex.V0))


def spans(pattern: Pattern, text: str, timeout: float) -> list[tuple[int, int]]:
    """Where `pattern` matches in `text`, or TimeoutError past `timeout` seconds."""
    return [m.span() for m in pattern.compiled.finditer(text, timeout=max(timeout, 0.0))]
