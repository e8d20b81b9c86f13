"""The guards around every hook route: who may call, how large, how long; what is counted
and logged. ``install`` wraps the routes ``create_app`` made, so the hooks stay thin.

In the order a hook request meets them:

1. **401** without the shared secret (``DRAGONET_SHARED_SECRET[_FILE]``), when one is set:
   ``Authorization: Bearer <secret>``, as Metacontroller's ``endpointConfigs[].authorization``
   sends it. ``/healthz``, ``/readyz`` and ``/metrics`` stay open (the kubelet and Prometheus do not
   hold the secret; the chart's NetworkPolicy decides who reaches the port).
2. **413** for a body over ``DRAGONET_MAX_REQUEST_BYTES``, by its Content-Length, before a
   byte of it is read. A chunked body: ``dragonet serve``'s worker answers 413 as soon as
   it passes the cap, before the app sees it (``webhooks.wire``); here, as a fallback, it
   is cut off at the cap while it is read.
3. **429** with ``Retry-After: 1`` for a sync past the in-flight limit
   (``DRAGONET_MAX_INFLIGHT``): answered at once rather than queued into Metacontroller's
   timeout, and retried by it without error backoff. The slot is taken and given back
   outside the time limit's reach, so a timeout can never leak one. A *large* sync
   (``LARGE_SYNC`` bytes or more: a pool of hundreds of nodes, a second or more of CPU)
   also needs the process's one large slot, else 429 with ``Retry-After: 2``: a process's
   threads share one core, so two large syncs at once each take twice as long, and with
   2-4 pools of 1,000 nodes at once every one ran into the deadline and nothing got
   through (issue 36). One at a time, each finishes in its own time and the others are
   retried (``benchmarks/large_pool.py``).
4. **422** for a request still unanswered ``DRAGONET_REQUEST_TIMEOUT_SECONDS`` after its
   first byte arrived (``webhooks.deadline``; a request still *arriving* then is answered
   408 by the server, ``webhooks.wire``). Why 422: the request is well-formed but asks for
   more work than one request may take, a bound on the request like 413's, so a 4xx. Not
   408 (that says the client was too slow to *send* it, and some clients resend it at
   once), not 429 (Metacontroller retries a 429 after Retry-After without backoff: a
   request that is always too slow would loop hot), not 5xx (the server is fine).
   Metacontroller records any of these as a ``SyncError`` Event on the parent with the JSON
   body, and retries with its exponential backoff.

And one that is not a refusal: while a large request (4 MiB or more: a pool of hundreds of
nodes) is answered the cycle collector is off, and what it leaves is frozen (``Collector``);
nothing here ever collects the whole heap.
"""

from __future__ import annotations

import gc
import hmac
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from flask import Flask, Response, g, request

from webhooks.config import MiB, Settings
from webhooks.deadline import FIRST_BYTE, RequestTimeout, TimeLimit
from webhooks.metrics import CONTENT_TYPE, Metrics

access = logging.getLogger("dragonet.access")
log = logging.getLogger("dragonet.webhooks")
OPEN = frozenset({"static", "healthz", "readyz", "metrics"})  # endpoints that are not hooks


def _json(body: Any, status: int, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status=status, mimetype="application/json", headers=headers)


def note_parent(parent: Any) -> None:
    """Called once a hook has read its request: the parent goes on every log line about it,
    as ``pool`` (a pool's hooks) or ``namespace`` and ``job``. Unreadable metadata is left
    out."""
    meta = parent.get("metadata") if isinstance(parent, Mapping) else None
    if not isinstance(meta, Mapping) or "dragonet_log" not in g:
        return
    about = g.dragonet_log
    if isinstance(meta.get("name"), str):
        about["pool" if request.path.startswith("/pools/") else "job"] = meta["name"]
    if isinstance(meta.get("namespace"), str):
        about["namespace"] = meta["namespace"]


class Collector:
    """The cycle collector around large hook requests (a pool of hundreds of nodes).

    What such a request leaves alive (its pool's memo: ~300,000 objects at 1,000 nodes)
    never needs the collector to be freed, yet CPython's would walk each of them in
    young collections while the request runs (3 of them, 10-14 % of a cold sync at 1,000
    nodes) and again in older ones later. So, for a request of ``big`` bytes or more: the
    young generation is collected first (what smaller requests left, their garbage
    included), the collector stays off while it is answered, then one young collection
    frees the cycles it left (werkzeug's router leaves 8 objects a request) and what is
    alive is frozen (``gc.freeze``: moved to the permanent generation, which no collection
    walks; still freed by reference counting as usual, e.g. when the memos forget it).
    Smaller requests are left to the collector.

    That young collection walks only what the request itself left; nothing ever walks the
    whole heap here. So what is frozen must be freed by reference counting when it is let
    go: the memos and the request reader (most of what is frozen) hold no reference cycle,
    a memo keeps no exception's traceback (policy/memo.py; an invalid job's frames once
    tied it into one: 4,995 objects of mixed traffic nothing freed, issue 36), checked by
    tests/test_memory_cap.py. What is frozen and turns into cyclic garbage later is never
    freed: the request context's own cycles (werkzeug's router, 8 objects, 648 bytes),
    alive until just after this runs; at most ~13 MB over the 20,000 requests after
    which gunicorn replaces a worker (``max_requests``). (A full collection of
    everything frozen, which this once ran after every 1,000 large requests, took
    4.0-4.6 s on the heap eight pools of 1,000 nodes leave, and 20.6 s on the campaign's
    4.8 GB heap: benchmarks/README.md.)

    The young collection walks everything the request left alive (~200,000 objects at
    1,000 nodes: 0.07-0.08 s, ~12 % of a cold sync's CPU) and finds nothing to free in a
    pool's sync, so it need not delay the answer: where the server says it sends the
    answer first (``AFTER_SEND`` in the WSGI environ, ``dragonet serve``), ``leave`` only
    notes it and the collection and the freeze run in ``settle``, which the server calls
    once the answer is sent. Until then the collector stays off.

    Re-entrant across threads: the collector is off from the first large request in
    flight until the last one ends and is settled, and back on only if it was on before.
    """

    def __init__(self, big: int = 4 * MiB) -> None:
        self.big = big
        self._lock = threading.Lock()
        self._inflight = 0
        self._pending = False  # a large request ended and is not settled yet
        self._was_enabled = False

    def enter(self, length: int | None) -> bool:
        """Called as a request starts; True if it is large (then call ``leave`` after)."""
        if length is None or length < self.big:
            return False
        with self._lock:
            if self._inflight == 0 and not self._pending:  # (pending: off since then)
                self._was_enabled = gc.isenabled()
                if self._was_enabled:
                    gc.collect(0)
                gc.disable()
            self._inflight += 1
        return True

    def leave(self, deferred: bool = False) -> None:
        """Called as a large request ends. ``deferred``: the server calls ``settle`` once
        its answer is sent; else it is settled now."""
        with self._lock:
            self._inflight -= 1
            self._pending = True
        if not deferred:
            self.settle()

    def settle(self) -> None:
        """Once no large request is in flight: the cycles the large requests left are
        collected, what is alive is frozen, the collector is back on. Cheap otherwise."""
        with self._lock:
            if self._inflight or not self._pending:
                return
            self._pending = False
            if self._was_enabled:
                gc.collect(0)  # what the large requests left: their cycles go
            gc.freeze()
            if self._was_enabled:
                gc.enable()


COLLECTOR = Collector()  # one per process, as the collector is

# In the WSGI environ, from a server that sends the answer before it calls what the request
# appends to this list (``webhooks.wire``): the large request's ``Collector.settle``.
AFTER_SEND = "dragonet.after_send"

# A sync request this large or larger waits for no other large one in its process (see 3.).
LARGE_SYNC = 4 * MiB


def install(app: Flask, settings: Settings, time_limit: TimeLimit | None = None) -> Metrics:
    """Guard every hook route of ``app`` and add ``/metrics``. ``time_limit`` is for tests
    (a limit that does not end the process)."""
    secret = settings.hook_secret()
    cap = settings.max_request_bytes
    limit = time_limit or TimeLimit(settings.request_timeout_seconds)
    metrics = Metrics()
    slots = threading.BoundedSemaphore(settings.inflight_limit())
    large = threading.Lock()  # held by the one large sync in flight
    app.config["MAX_CONTENT_LENGTH"] = cap  # a chunked body is cut off here while read
    hooks = {endpoint for endpoint in app.view_functions if endpoint not in OPEN}
    syncs = {e for e in hooks if e.endswith("_sync")}  # customize and finalize are cheap
    for endpoint in hooks:
        app.view_functions[endpoint] = _bounded(app.view_functions[endpoint], limit)

    @app.get("/metrics")
    def metrics_route() -> Response:
        return Response(metrics.expose(), mimetype=None, content_type=CONTENT_TYPE)

    @app.before_request
    def guard() -> Response | None:
        req = request._get_current_object()  # type: ignore[attr-defined]  # once, not per use
        if req.endpoint not in hooks:
            return None
        g.dragonet_started = time.perf_counter()
        g.dragonet_log = {"hook": req.path}
        if secret is not None and not _authorized(req.headers.get("Authorization"), secret):
            return _json(
                {"error": "unauthorized: this webhook requires Authorization: Bearer <secret>"},
                401,
                {"WWW-Authenticate": 'Bearer realm="dragonet"'},
            )
        length = req.content_length
        if length is not None and length > cap:
            return _json(
                {
                    "error": f"request body of {length} bytes is over the webhook's limit of "
                    f"{cap} bytes (DRAGONET_MAX_REQUEST_BYTES)"
                },
                413,
            )
        if req.endpoint in syncs:
            if not slots.acquire(blocking=False):
                return _json({"error": "busy: too many syncs in flight"}, 429, {"Retry-After": "1"})
            g.dragonet_slot = True
            if length is not None and length >= LARGE_SYNC:
                if not large.acquire(blocking=False):
                    return _json(
                        {"error": "busy: another large sync is in flight in this process"},
                        429,
                        {"Retry-After": "2"},
                    )
                g.dragonet_large = True
        collector = COLLECTOR
        if collector.enter(length):
            g.dragonet_collector = collector
        return None

    @app.teardown_request
    def give_back(_: BaseException | None) -> None:
        if g.pop("dragonet_large", False):
            large.release()
        if g.pop("dragonet_slot", False):
            slots.release()
        collector = g.pop("dragonet_collector", None)
        if collector is not None:
            after_send = request.environ.get(AFTER_SEND)
            collector.leave(deferred=after_send is not None)
            if after_send is not None:
                after_send.append(collector.settle)

    @app.after_request
    def record(response: Response) -> Response:
        started = g.get("dragonet_started")
        if started is None:
            return response
        seconds = time.perf_counter() - started
        req = request._get_current_object()  # type: ignore[attr-defined]  # once, not per use
        hook = req.url_rule.rule if req.url_rule is not None else req.path
        code = response.status_code
        size = response.calculate_content_length()
        metrics.hook_answer(hook, code, seconds, req.content_length, size)
        level = logging.INFO if code < 500 else logging.ERROR
        if not access.isEnabledFor(level):
            return response  # (what follows only builds the log line)
        extra: dict[str, Any] = {
            "status": code,
            "latency_ms": round(seconds * 1000, 1),
            "request_bytes": req.content_length,
            "response_bytes": size,
            "remote": req.remote_addr,
        }
        if code != 200 and response.is_json:
            extra["error"] = (response.get_json(silent=True) or {}).get("error")
        access.log(level, "%s %s %d", req.method, req.path, code, extra=extra)
        return response

    return metrics


def _authorized(header: str | None, secret: bytes) -> bool:
    scheme, _, token = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), secret)


def _bounded(view: Callable[..., Any], limit: TimeLimit) -> Callable[..., Any]:
    def run(**kwargs: Any) -> Any:
        try:
            # From the request's first byte when the server says when that was: the time
            # it took to arrive and to wait for a thread is part of the limit.
            with limit.guard(g.get("dragonet_log"), request.environ.get(FIRST_BYTE)):
                return view(**kwargs)
        except RequestTimeout:
            about = g.get("dragonet_log") or {}
            parent = "/".join(about[k] for k in ("namespace", "job", "pool") if k in about)
            return _json(
                {
                    "error": f"{request.path}{' for ' + parent if parent else ''} took longer "
                    f"than the webhook's limit of {limit.limit:g} s "
                    "(DRAGONET_REQUEST_TIMEOUT_SECONDS); it was stopped"
                },
                422,
            )

    run.__name__ = getattr(view, "__name__", "hook")
    return run
