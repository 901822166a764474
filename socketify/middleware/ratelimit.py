"""Token-bucket rate limiting on a pluggable `Store`.

Theory of operation. Each key (by default the client address) owns a bucket of `capacity`
tokens that refills at `refill_per_second`; a request takes one token or is answered 429. The
bucket lives in a `socketify.state.stores.Store` whose `take()` refills and takes in one atomic
step. The default store is the cross-worker `SharedStore` (the master's store under
`socketify run`, Redis when SOCKETIFY_STATE_URL is set, a private one otherwise), so N workers
never allow N times the quota.

Headers, with `standard_headers`: `RateLimit-Limit` and `RateLimit-Remaining` on every
response; on 429 also `RateLimit-Reset` and `Retry-After` (seconds until a token is back, at
least 1; 3600 when the bucket never refills). `Retry-After` is sent even without standard
headers. A key function returning "" or None exempts the request.

When the store cannot answer (Redis unreachable: `socketify.core.errors.StateUnavailable`), the
request is answered 503 with `Retry-After`, like every other use of the store: a limit that
cannot be checked is not waived. `fail_open=True` lets such requests through unlimited
instead (the outage is still logged once by the store).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING

from socketify.core.chain import Hooked, hooked
from socketify.core.errors import StateUnavailable
from socketify.core.response import TEXT_PLAIN
from socketify.middleware.proxy import TrustProxy, client_ip_resolver
from socketify.state.shared_store import SharedStore
from socketify.state.stores import Store

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["middleware"]

_NEVER_REFILLS = 3600  # Retry-After when refill_per_second is 0
_instances = itertools.count(1)


def middleware(
    capacity: float = 60,
    refill_per_second: float = 1.0,
    key: Callable[[Request], str | None] | None = None,
    store: Store | None = None,
    *,
    standard_headers: bool = True,
    message: str = "Too Many Requests\n",
    trust_proxy: TrustProxy = False,
    prefix: str | None = None,
    fail_open: bool = False,
) -> Hooked:
    """Allow `capacity` requests in a burst, refilled at `refill_per_second`, per key.

    `key(req)` defaults to the client address (`trust_proxy` as in `socketify.middleware.
    proxy`); `store` defaults to the cross-worker `SharedStore`; `prefix` keeps several
    limiters apart in one store (by default each limiter gets its own, numbered in creation
    order, which is the same in every worker because each one builds the same app);
    `fail_open=True` lets requests through while the store is unavailable (default: 503).
    """
    if capacity < 1:
        raise ValueError("capacity must be at least 1")
    if refill_per_second < 0:
        raise ValueError("refill_per_second must be >= 0")
    key_of = key or _address_key(trust_proxy)
    buckets: Store = store if store is not None else SharedStore()
    if prefix is None:
        prefix = f"ratelimit:{next(_instances)}:"
    if isinstance(buckets, SharedStore) and buckets.namespace:
        # PERF: the same keys, prefixed here once: a SharedStore with no namespace hands
        # `take` straight to its backend.
        prefix = buckets.namespace + prefix
        buckets = buckets.without_namespace()
    limit = str(math.floor(capacity))

    def ratelimit_middleware(req: Request, res: Response) -> bool:
        who = key_of(req)
        if not who:
            return True  # exempt
        try:
            # `buckets.take` looked up per call: a SharedStore rebinds it in each process.
            allowed, remaining, reset = buckets.take(prefix + who, capacity, refill_per_second)
        except StateUnavailable:
            if fail_open:
                return True
            raise
        if standard_headers:
            res.set_header("RateLimit-Limit", limit)
            res.set_header("RateLimit-Remaining", str(max(0, math.floor(remaining))))
        if allowed:
            return True
        wait = str(_NEVER_REFILLS if math.isinf(reset) else max(1, math.ceil(reset)))
        res.set_header("Retry-After", wait)
        if standard_headers:
            res.set_header("RateLimit-Reset", wait)
        res.status(429).send(message, TEXT_PLAIN)
        return False

    return hooked(ratelimit_middleware, name="ratelimit_middleware")


def _address_key(trust_proxy: TrustProxy) -> Callable[[Request], str | None]:
    if trust_proxy is False:
        # PERF: the property read straight from C, no Python function around it.
        remote_ip: Callable[[Request], str] = operator.attrgetter("remote_ip")
        return remote_ip
    resolve = client_ip_resolver(trust_proxy)
    return resolve
