"""Who is calling: a report is taken only from the pod it is about.

A training pod sends a **pod-bound ServiceAccount token** for the monitor's audience
(``DRAGONET_MONITOR_TOKEN_AUDIENCE``, ``dragonet-monitor``), from a projected
``serviceAccountToken`` volume, as ``Authorization: Bearer <token>``. The monitor asks the
API server's TokenReview API (``authentication.k8s.io/v1``, with that audience) whether the
token is valid; a pod-bound token's review carries the pod in ``user.extra``
(``authentication.kubernetes.io/pod-name`` and ``pod-uid``) and its namespace in the user
name (``system:serviceaccount:<namespace>:<account>``). ``monitor.service`` then takes the
report only if it names that pod and the pod of that name on this node has that uid.

A token for another audience (the pod's API token, say) is refused, so a token a pod
gives the monitor cannot be replayed against the API server, nor the API token of a pod
against the monitor. Answers are kept ``cache_seconds`` (refusals ``refusal_seconds``) in
a bounded cache keyed by the token's SHA-256, so a pod reporting every few seconds costs
one review a minute, and the raw tokens are not kept. Reviews not in the cache are made at
most ``reviews_per_second`` on average (a burst of twice that): a pod sending a new made-up
token with every request gets 429 once they are spent, instead of flooding the API server
through the monitor's account; pods whose answers are cached keep reporting.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cachetools import TLRUCache

POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
_SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class Caller:
    """The pod a valid token is bound to."""

    namespace: str
    pod: str
    uid: str
    account: str

    def __str__(self) -> str:
        return f"pod {self.namespace}/{self.pod}"


class Refused(Exception):
    """A caller the monitor does not take reports from: ``status`` 401 (no valid token
    for this audience) or 403 (a valid token, not a pod's), 503 (the API cannot say)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class TokenReviewer(Protocol):
    def review_token(self, token: str, audience: str) -> Mapping[str, Any]:
        """The TokenReview's ``status`` for ``token`` and ``audience``; ApiError when the
        API cannot be asked."""


def caller_of(status: Mapping[str, Any], audience: str) -> Caller:
    """The pod a TokenReview's status names, or Refused saying why not."""
    if status.get("authenticated") is not True:
        why = status.get("error") or "not authenticated"
        raise Refused(401, f"the token is not valid for audience {audience!r}: {why}")
    # An audience-aware API server returns the audiences it checked (TokenReview's own
    # advice); an empty list means the token is only the API server's own.
    if audience not in (status.get("audiences") or []):
        raise Refused(401, f"the token is not valid for audience {audience!r}")
    user = status.get("user") or {}
    username = str(user.get("username") or "")
    extra = user.get("extra") or {}
    names, uids = extra.get(POD_NAME) or [], extra.get(POD_UID) or []
    parts = username[len(_SA_PREFIX) :].split(":") if username.startswith(_SA_PREFIX) else []
    if len(parts) != 2 or len(names) != 1 or len(uids) != 1:
        raise Refused(
            403,
            f"the token of {username or 'an unknown user'} is bound to no pod: send the "
            "pod's own projected ServiceAccount token (docs/monitor.md)",
        )
    return Caller(namespace=parts[0], pod=str(names[0]), uid=str(uids[0]), account=parts[1])


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class Authenticator:
    """Tokens to callers, through TokenReview, with a bounded cache of answers."""

    def __init__(
        self,
        reviewer: TokenReviewer,
        audience: str,
        cache_seconds: float = 60.0,
        refusal_seconds: float = 5.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
        reviews_per_second: float = 20.0,
    ) -> None:
        self._reviewer, self.audience = reviewer, audience
        self._ttl = {True: cache_seconds, False: refusal_seconds}
        self._cache: TLRUCache[str, Caller | tuple[int, str]] = TLRUCache(
            maxsize=max_entries,
            ttu=lambda _k, v, now: now + self._ttl[isinstance(v, Caller)],
            timer=clock,
        )
        self._lock = threading.Lock()
        self.reviews = 0  # TokenReviews made (the cache's misses)
        self._clock, self._rate = clock, reviews_per_second
        self._burst = max(1.0, 2 * reviews_per_second)
        self._allowance, self._last = self._burst, clock()

    def caller(self, header: str | None) -> Caller:
        """The pod whose token the ``Authorization`` header carries, or Refused."""
        token = bearer(header)
        if token is None:
            raise Refused(
                401,
                "a report needs the reporting pod's ServiceAccount token for audience "
                f"{self.audience!r}: Authorization: Bearer <token> (docs/monitor.md)",
            )
        key = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            known = self._cache.get(key)
        if known is None:
            if not self._may_review():
                raise Refused(429, "too many new tokens to review: try again in a second")
            known = self._review(token)
            with self._lock:
                self._cache[key] = known
        if not isinstance(known, Caller):
            raise Refused(*known)  # a fresh one: a kept exception would keep its traceback
        return known

    def _may_review(self) -> bool:
        """Take one review from the budget (a token bucket), if any is left."""
        with self._lock:
            now = self._clock()
            elapsed, self._last = now - self._last, now
            self._allowance = min(self._burst, self._allowance + elapsed * self._rate)
            if self._allowance < 1:
                return False
            self._allowance -= 1
            return True

    def _review(self, token: str) -> Caller | tuple[int, str]:
        from monitor.kube import ApiError

        self.reviews += 1
        try:
            status = self._reviewer.review_token(token, self.audience)
        except ApiError as err:  # not cached: the next report asks again
            raise Refused(503, f"cannot review the token with the Kubernetes API: {err}") from err
        try:
            return caller_of(status, self.audience)
        except Refused as refused:
            return (refused.status, str(refused))
