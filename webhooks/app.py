"""The Flask application: Metacontroller's hooks for pools and for each job kind.

``/pools/{customize,sync}`` serve the CompositeController of TrainingPools (the planner);
``/tfjobs/{customize,sync,finalize}`` and ``/mxjobs/...`` the thin job controllers (one
set of routes per kind in ``KINDS``). Routes stay thin: parse, call the pure policy with
the clock's ``now``, serialise. A request we cannot read is answered 400 with a JSON
message (Metacontroller logs it and retries); an invalid job is a normal 200 answer whose
status says what is wrong.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from flask import Flask, Response, request
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import HTTPException

from policy.job.migration import related_rules as migration_related
from policy.job.migration import sync as migration_sync
from policy.job.sync import JobConfig, finalize, related_rules
from policy.job.sync import sync as job_sync
from policy.memo import Memo, Memos, Undecodable
from policy.model.jobs import JobKind
from policy.model.kinds import KINDS
from policy.model.request import MalformedRequest
from policy.pool.sync import sync as pool_sync
from webhooks.config import Settings
from webhooks.hooks import CustomizeRequest, pool_related_resources
from webhooks.lazy import IncrementalReader, SyncRequest, Unreadable
from webhooks.shell import install, note_parent

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
    note_parent(payload.get("parent"))
    try:
        return model.model_validate(payload)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequest(
            f"not a Metacontroller {model.__name__}: {where}: {first['msg']}"
            + (f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else "")
        ) from err


def _body() -> bytes:
    """The request's bytes in one read (werkzeug's get_data reads a large body in chunks)."""
    length = request.content_length
    if length is None:
        return request.get_data(cache=False)
    return request.environ["wsgi.input"].read(length)


def _read(reader: IncrementalReader) -> SyncRequest:
    try:
        req = reader.read(request.path, _body())
    except Unreadable as err:
        raise BadRequest(str(err)) from err
    note_parent(req.parent)
    return req


def _answer(children: list, status: dict, resync: float | None) -> Response:
    body: dict[str, Any] = {"status": status, "children": children}
    if resync is not None:
        body["resyncAfterSeconds"] = resync
    return _json(body)


def create_app(
    settings: Settings | None = None, clock: Clock = utc_now, kinds: Iterable[JobKind] = KINDS
) -> Flask:
    """``clock`` is injectable so a simulator can run the real webhook on simulated time."""
    # The hooks parse quantities with the client's parser, which policy/model/resources.py
    # imports only when first used (a CLI printing its help or refusing a file must not pay
    # for it): the app loads it when it is made, so a worker never imports it inside a
    # request's time limit.
    import kubernetes.utils.quantity  # noqa: F401

    settings = settings or Settings()
    job_config = JobConfig(cluster_domain=settings.cluster_domain)
    app = Flask("dragonet")
    app.config["DRAGONET_SETTINGS"] = settings
    # Objects parsed by earlier syncs, by their bytes (per process; a cache, never a source
    # of truth: see policy/memo.py): one memo per pool, one for the jobs' syncs. They and
    # the reader share one cap in bytes, DRAGONET_MEMORY_CAP_BYTES.
    memo_bytes, reader_bytes = settings.memory_shares()
    memos = Memos(memo_bytes)
    app.config["DRAGONET_MEMOS"] = memos
    app.config["DRAGONET_MEMO"] = memo = memos.jobs
    # A large request is read against the last one of its parent (webhooks/lazy.py).
    app.config["DRAGONET_READER"] = reader = IncrementalReader(limit=reader_bytes)

    def now() -> datetime:
        # Kubernetes timestamps have whole seconds; so does the policy's ``now``.
        return clock().replace(microsecond=0)

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        """Readiness: the app is made (settings and secret read) and a thread answers. Apart
        from /healthz so that the chart can probe the two on their own periods."""
        return _json({"status": "ready"})

    @app.post("/pools/customize")
    def pool_customize() -> Response:
        req = _parse(CustomizeRequest)
        rules = pool_related_resources(req.parent, settings.kubeflow_coexist)
        return _json({"relatedResources": rules})

    app.config["DRAGONET_POOL_MEMOS"] = memos.pools

    def pool_sync_hook() -> Response:
        req = _read(reader)
        started = time.perf_counter()
        meta = req.parent.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        memo = memos.pool(name if isinstance(name, str) else "")
        at = now()
        memo.begin()  # what this pool's last syncs no longer use is dropped
        try:
            decision = pool_sync(req.parent, req.children, req.related, at, memo)
        finally:
            memos.settle(memo)  # the other pools' memos give way first
        log.debug(
            "pool sync %s: %d admissions, %.1f ms",
            (req.parent.get("metadata") or {}).get("name"),
            len(decision.children),
            (time.perf_counter() - started) * 1000,
        )
        return _answer(decision.children, decision.status, decision.resync_after)

    app.add_url_rule("/pools/sync", "pool_sync", pool_sync_hook, methods=["POST"])

    for kind in kinds:
        _job_routes(app, kind, job_config, now, memo, reader)

    @app.post("/migrations/customize")
    def migration_customize() -> Response:
        req = _parse(CustomizeRequest)
        return _json({"relatedResources": migration_related(req.parent)})

    @app.post("/migrations/sync")
    def migration_sync_hook() -> Response:
        req = _read(reader)
        return _answer([], migration_sync(req.parent, req.related), None)

    @app.errorhandler(BadRequest)
    @app.errorhandler(MalformedRequest)
    @app.errorhandler(Undecodable)
    def bad_request(err: Exception) -> Response:
        return _json({"error": str(err)}, 400)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        return _json({"error": err.description}, err.code or 500)

    @app.errorhandler(Exception)
    def internal_error(err: Exception) -> Response:  # a bug: logged with its traceback
        log.exception("unexpected error in %s", request.path)
        return _json({"error": f"internal error: {type(err).__name__}"}, 500)

    # 401, 413, 429, the time limit, /metrics and the request log (webhooks/shell.py).
    app.config["DRAGONET_METRICS"] = install(app, settings)
    return app


def _job_routes(
    app: Flask,
    kind: JobKind,
    config: JobConfig,
    now: Clock,
    memo: Memo,
    reader: IncrementalReader,
) -> None:
    prefix = "/" + kind.kind.lower() + "s"

    def customize() -> Response:
        req = _parse(CustomizeRequest)
        return _json({"relatedResources": related_rules(req.parent, kind)})

    def finalize_answer(req: SyncRequest) -> Response:
        decision, done = finalize(req.parent, req.children, kind)
        return _json({"status": decision.status, "children": [], "finalized": done})

    def sync() -> Response:
        req = _read(reader)
        if req.finalizing:
            return finalize_answer(req)
        decision = job_sync(req.parent, req.children, req.related, now(), config, kind, memo)
        return _answer(decision.children, decision.status, decision.resync_after)

    def finalize_hook() -> Response:
        return finalize_answer(_read(reader))

    name = kind.kind.lower()
    app.add_url_rule(f"{prefix}/customize", f"{name}_customize", customize, methods=["POST"])
    app.add_url_rule(f"{prefix}/sync", f"{name}_sync", sync, methods=["POST"])
    app.add_url_rule(f"{prefix}/finalize", f"{name}_finalize", finalize_hook, methods=["POST"])
