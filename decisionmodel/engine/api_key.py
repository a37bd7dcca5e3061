"""What an engine API key must be to travel in ``Authorization: Bearer <key>``.

httpx encodes header values as ASCII (a non-ASCII character raises UnicodeEncodeError, whose
text quotes the character and its position) and h11 refuses control characters (its error
quotes the whole header value). Either would carry key material into a failure, status or
Event, so a key is checked here first and refused as APIKeyInvalid with a message that names
the Secret reference and the fix, never a character or a position.
"""

from __future__ import annotations

from typing import Final

# Printable ASCII: what an HTTP header value can carry without encoding, and what the
# runtime compares as "exact token" (RUNTIME_API.md "Auth"). Surrounding whitespace is stripped
# before the check (a trailing newline from `kubectl create secret --from-file`).
_FIRST_PRINTABLE: Final = 0x20
_LAST_PRINTABLE: Final = 0x7E

KEY_RULE: Final = "printable ASCII (letters, digits, punctuation; no control characters)"


def header_safe(key: str) -> bool:
    """True when ``key`` is non-empty printable ASCII without surrounding whitespace."""
    return (
        bool(key)
        and key == key.strip()
        and all(_FIRST_PRINTABLE <= ord(c) <= _LAST_PRINTABLE for c in key)
    )
