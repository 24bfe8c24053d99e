"""The paths the catch-all /v1 relay may forward: below /v1, and nothing that could climb out.

The server hands the route a path already percent-decoded once. A dot segment in it ("..", ".",
"..;x") would be resolved by httpx or by the upstream and leave /v1, with the proxy's key; a "%"
left after decoding is a second encoding aimed at a server that decodes again; a backslash is a
separator to some servers; an empty segment makes "//host". All are refused. What is left is
percent-encoded again, segment by segment, so an encoded "?" or "#" stays part of the path.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from ..errors import ProxyError

_FORBIDDEN = re.compile(r"[\\%\x00-\x1f\x7f]")
_SAFE = "!$&'()*+,;=:@-._~"  # RFC 3986 pchar, less "%": kept as it is in a segment


def relay_path(path: str, method: str = "GET") -> str:
    """`path` (decoded, below /v1/) as a relative path to send upstream; ProxyError 400 if it may leave /v1."""
    segments = path.split("/")
    reason = None
    if _FORBIDDEN.search(path):
        reason = "it holds a backslash, a control character or a percent sign left after decoding"
    elif any(seg.split(";", 1)[0] in (".", "..") for seg in segments):
        reason = "it holds a dot segment"
    elif not segments[0] or "" in segments[1:-1]:
        reason = "it holds an empty segment"
    if reason:
        shown = path[:200].encode("unicode_escape").decode("ascii")
        raise ProxyError(400, "invalid_path", f"{method} /v1/{shown}: this path is not relayed: {reason}.")
    return "/".join(quote(seg, safe=_SAFE) for seg in segments)
