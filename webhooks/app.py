"""The Flask application: Metacontroller's customize, sync and finalize hooks for TFJobs.

Routes stay thin: parse, call the pure policy with the clock's ``now``, serialise. A
request we cannot read is answered 400 with a JSON message (Metacontroller logs it and
retries); an invalid TFJob is a normal 200 answer whose status says what is wrong.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from flask import Flask, Response, request
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import HTTPException

from policy.memo import Memo
from policy.model.jobs import TFJOB, JobKind
from policy.snapshot import MalformedRequest, finalize, sync
from webhooks.config import Settings
from webhooks.hooks import CustomizeRequest, SyncRequest, related_resources

Clock = Callable[[], datetime]
M = TypeVar("M", bound=BaseModel)
log = logging.getLogger("dragonet.webhooks")


def utc_now() -> datetime:
    return datetime.now(UTC)


class BadRequest(Exception):
    pass


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status=status, mimetype="application/json", headers=headers)


def _parse(model: type[M]) -> M:
    try:
        payload = orjson.loads(request.get_data(cache=False))
    except orjson.JSONDecodeError as err:
        raise BadRequest(f"request body is not valid JSON: {err}") from err
    if not isinstance(payload, dict):
        raise BadRequest("request body must be a JSON object")
    try:
        return model.model_validate(payload)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequest(
            f"not a Metacontroller {model.__name__}: {where}: {first['msg']}"
            + (f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else "")
        ) from err


def create_app(
    settings: Settings | None = None, clock: Clock = utc_now, kind: JobKind = TFJOB
) -> Flask:
    """``clock`` is injectable so a simulator can run the real webhook on simulated time."""
    settings = settings or Settings()
    policy_config = settings.policy_config()
    prefix = "/" + kind.kind.lower() + "s"
    app = Flask("dragonet")
    app.config["DRAGONET_SETTINGS"] = settings

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.post(f"{prefix}/customize")
    def customize() -> Response:
        _parse(CustomizeRequest)
        return _json({"relatedResources": related_resources(settings, kind)})

    slots = threading.BoundedSemaphore(settings.inflight_limit())
    # Parsed objects and plans of earlier syncs (per process; a cache, never a source of
    # truth: see policy/memo.py).
    memo = Memo()
    app.config["DRAGONET_MEMO"] = memo

    @app.post(f"{prefix}/sync")
    def sync_hook() -> Response:
        if not slots.acquire(blocking=False):
            return _json({"error": "busy: too many syncs in flight"}, 429, {"Retry-After": "1"})
        try:
            return _sync()
        finally:
            slots.release()

    def _sync() -> Response:
        req = _parse(SyncRequest)
        if req.finalizing:
            return _finalize(req)
        started = time.perf_counter()
        # Kubernetes timestamps have whole seconds; so does the plan's ``now``, which lets
        # the many syncs of one related change within a second share one plan.
        now = clock().replace(microsecond=0)
        decision = sync(req.parent, req.children, req.related, now, policy_config, kind, memo)
        body: dict[str, Any] = {"status": decision.status, "children": decision.children}
        if decision.resync_after is not None:
            body["resyncAfterSeconds"] = decision.resync_after
        log.debug(
            "sync %s/%s: %s, %d children, %.1f ms",
            req.parent.get("metadata", {}).get("namespace"),
            req.parent.get("metadata", {}).get("name"),
            decision.status.get("scheduling", {}).get("phase"),
            len(decision.children),
            (time.perf_counter() - started) * 1000,
        )
        return _json(body)

    @app.post(f"{prefix}/finalize")
    def finalize_hook() -> Response:
        return _finalize(_parse(SyncRequest))

    def _finalize(req: SyncRequest) -> Response:
        decision, done = finalize(req.parent, req.children)
        return _json({"status": decision.status, "children": [], "finalized": done})

    @app.errorhandler(BadRequest)
    @app.errorhandler(MalformedRequest)
    def bad_request(err: Exception) -> Response:
        return _json({"error": str(err)}, 400)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        return _json({"error": err.description}, err.code or 500)

    @app.errorhandler(Exception)
    def internal_error(err: Exception) -> Response:  # a bug: logged with its traceback
        log.exception("unexpected error in %s", request.path)
        return _json({"error": f"internal error: {type(err).__name__}"}, 500)

    return app
