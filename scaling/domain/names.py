"""What a name or a piece of text must be to survive storage: shared by the policy, the sample
and the action message, so that a value accepted by one is never refused by the next.

A target name becomes a Table PartitionKey after escaping (``table_key``); Azure Table keys hold
at most 1 KiB, and the escaped name must leave room for the row keys' prefixes, so the escaped
name is limited to ``MAX_KEY_CHARS``. Text must be encodable as UTF-8 (a lone surrogate, which
JSON allows, is refused by every Azure SDK when it serialises the entity).
"""

from __future__ import annotations

import re
from urllib.parse import quote

#: Characters an escaped target name may take in a PartitionKey (the service allows 1 KiB).
MAX_KEY_CHARS = 512
#: Characters ``table_key`` leaves as they are; the rest (``/ \ # ?``, ``%``, control and
#: non-ASCII characters) are percent-escaped as UTF-8.
KEY_SAFE = " !$&'()*+,-.:;=@_~[]{}^`|\"<>"
#: Decision ids: the engine's 24 hex digits, optionally with a ``-r<N>`` re-issue suffix.
DECISION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def table_key(name: str) -> str:
    """``name`` as a Table key: reserved and non-ASCII characters are percent-escaped."""
    return quote(name, safe=KEY_SAFE)


def text_problem(value: object, *, max_chars: int, allow_empty: bool = False) -> str | None:
    """Why ``value`` cannot be stored as text (``None`` when it can)."""
    if not isinstance(value, str) or (not value and not allow_empty):
        return f"must be a {'' if allow_empty else 'non-empty '}string, got {value!r:.40}"
    if len(value) > max_chars:
        return f"must be at most {max_chars} characters, got {len(value)}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode text)"
    return None


def target_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a target (``None`` when it can): text, no control characters,
    and short enough that its escaped form fits a Table key."""
    problem = text_problem(name, max_chars=MAX_KEY_CHARS)
    if problem:
        return problem
    assert isinstance(name, str)
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        return "must not contain control characters"
    escaped = len(table_key(name))
    if escaped > MAX_KEY_CHARS:
        return f"is {escaped} characters once escaped for a Table key; at most {MAX_KEY_CHARS} fit"
    return None


def safe_text(value: str) -> str:
    """``value`` with anything UTF-8 cannot carry (lone surrogates) replaced, for error records."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")
