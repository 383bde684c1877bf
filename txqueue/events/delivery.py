"""HTTP delivery: one POST per attempt, reported as an `Attempt`, never as an exception.

Each deliverer owns one ``httpx`` client, so connections to a destination are reused across
attempts. Redirects are not followed (a 3xx is a permanent failure, as it is not a receipt),
and proxies and ``.netrc`` credentials from the environment are ignored unless
``trust_env=True`` (a webhook sender must not hand a user's credentials to arbitrary hosts).

Connections are opened by the destination guard (`txqueue.events.guarded`): each new one
resolves the host again and is refused unless every address is public, or the call allows
private destinations (``allow_private``, per call or per deliverer). A refusal is PERMANENT.
With ``trust_env=True`` and a proxy in the environment the proxy connects instead, unguarded.

``timeout`` (default 30 s) is an attempt's total deadline: connecting, sending, waiting for
the response headers and reading the body all end by it, however slowly the peer trickles
bytes (httpx's own timeouts bound each read alone). Both deliverers open connections through
a network backend whose every read, write and TLS handshake gets only the time left before
the deadline (`attempts.time_left`); the async one also cancels the request at the deadline.
Not bounded: resolving the host name (a blocking lookup), and, with ``trust_env=True``, a
proxy's connection in the sync deliverer. An attempt past its deadline is a timeout. Once
the status line and headers have arrived, the status decides the outcome. The body is then
read only to free the connection for reuse and to quote it in the error, within the time
left and at most 64 KiB; at most 1 KiB of it is quoted, cut with a marker, every control
character shown as an escape (`txqueue.core.text.printable`), so the attempt log holds one
short printable line whatever the receiver sent. Timeouts and connection failures are
TRANSIENT with no status. A request httpx cannot send (unsupported scheme, invalid URL or
header) is PERMANENT.
"""

from __future__ import annotations

from txqueue.events._async_delivery import AsyncHttpDeliverer
from txqueue.events._sync_delivery import HttpDeliverer
from txqueue.events.attempts import Attempt

__all__ = ["AsyncHttpDeliverer", "Attempt", "HttpDeliverer"]
