"""The monitor's HTTP API, on the node's address (port 8081, as the original):

* ``POST /monitor`` ``{"pod": <name>, "value": <number>}`` (optionally ``"namespace"``),
  what DRAGON's preemptible tasks send, with ``Authorization: Bearer <token>``: the
  reporting pod's own projected ServiceAccount token for audience ``dragonet-monitor``
  (monitor/auth.py; unless ``DRAGONET_MONITOR_AUTH=none``). Answered 200 with what was
  judged (the pod's category, whether the node is overloaded, a request made), or a JSON
  error: 401 without a valid token for the monitor's audience, 403 for a token of another
  pod (or of none), 400 for a
  body that is not such an object (unknown fields too), 413 over
  ``DRAGONET_MONITOR_MAX_BODY_BYTES``, 415 for a body that is not ``application/json``,
  404 for a pod not on this node, 429 when ``max_pods`` are tracked, 503 when the API
  cannot say which pod it is (or review the token). Never a 500 for anything a client
  sends.
* ``POST /throughput`` ``{"pod": <name>, "stepsPerSecond": <number>}`` (optionally
  ``"batch"``, the global batch, ``"step"`` and ``"totalSteps"``, how far the job is,
  both or neither, and ``"namespace"``): a job's speed (docs/speedup.md),
  answered 200 with what became of it (``taken``, ``written``, ``unchanged``, ``gone``,
  ``error``), or the same errors as ``/monitor``; 400 also for a pod of no TFJob or MXJob.
* ``GET /healthz`` (alive), ``GET /readyz`` (the pool's loads are read and fresh),
  ``GET /metrics`` (Prometheus).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Annotated, Any, TypeVar

import orjson
from flask import Flask, Response, g, request
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError
from werkzeug.exceptions import HTTPException

from monitor.auth import Authenticator, Caller, Refused
from monitor.metrics import CONTENT_TYPE
from monitor.service import Monitor, ReportError
from policy.model.batch import GradStats
from policy.model.bounds import OutOfBounds
from policy.model.throughput import MAX_BATCH, MAX_STEPS, MAX_STEPS_PER_S, Progress, grad_stats

access = logging.getLogger("dragonet.monitor.access")

# A pod name is a DNS subdomain; a namespace a DNS label.
_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pod: Annotated[str, Field(min_length=1, max_length=253, pattern=_SUBDOMAIN)]
    value: StrictInt | StrictFloat
    namespace: Annotated[str, Field(min_length=1, max_length=63, pattern=_LABEL)] | None = None


class SpeedReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pod: Annotated[str, Field(min_length=1, max_length=253, pattern=_SUBDOMAIN)]
    stepsPerSecond: StrictInt | StrictFloat
    batch: Annotated[int, Field(ge=1, le=MAX_BATCH, strict=True)] | None = None
    step: Annotated[int, Field(ge=0, le=MAX_STEPS, strict=True)] | None = None
    totalSteps: Annotated[int, Field(ge=1, le=MAX_STEPS, strict=True)] | None = None
    # Pollux's agent's gradient statistics (docs/speedup.md): both or neither.
    gradSqr: StrictInt | StrictFloat | None = None
    gradVar: StrictInt | StrictFloat | None = None
    namespace: Annotated[str, Field(min_length=1, max_length=63, pattern=_LABEL)] | None = None

    def progress(self) -> Progress | None:
        if self.step is None or self.totalSteps is None:
            return None
        return Progress(min(self.step, self.totalSteps), self.totalSteps)

    def grad(self) -> GradStats | None:
        """The gradient statistics (``OutOfBounds`` naming the field when not believable)."""
        if self.gradSqr is None and self.gradVar is None:
            return None
        if self.gradSqr is None or self.gradVar is None:
            raise OutOfBounds(
                "gradSqr and gradVar: give both (the gradient's statistics) or neither"
            )
        return grad_stats({"sqr": self.gradSqr, "var": self.gradVar}, "grad")


def _json(body: Any, status: int, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status=status, mimetype="application/json", headers=headers)


def _error(status: int, message: str, retry_after: int | None = None) -> Response:
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return _json({"error": message}, status, headers)


_SHAPES = {
    "/monitor": '{"pod": <name>, "value": <number>}',
    "/throughput": '{"pod": <name>, "stepsPerSecond": <number>, "batch": <integer>, '
    '"step": <integer>, "totalSteps": <integer>, "gradSqr": <number>, "gradVar": <number>}',
}


def _first_problem(err: ValidationError, shape: str = _SHAPES["/monitor"]) -> str:
    e = err.errors()[0]
    where = str(e["loc"][0]) if e["loc"] else "body"
    if e["type"] == "extra_forbidden":
        return f"{where}: unknown field (a report is {shape})"
    if e["type"] == "missing":
        return f"{where}: required"
    if where in ("value", "stepsPerSecond"):
        return f"{where}: must be a number"
    return f"{where}: {e['msg']}"


M = TypeVar("M", bound=BaseModel)


def _given(model: type[M], shape: str, max_bytes: int) -> M | Response:
    """The request's body as ``model``, or the error that answers it: a report is one JSON
    object ``shape``, sent as ``application/json``, of at most ``max_bytes``."""
    length = request.content_length
    if length is not None and length > max_bytes:
        return _error(413, f"body of {length} bytes is over {max_bytes} bytes")
    if request.mimetype != "application/json":
        return _error(415, "a report must be sent as Content-Type: application/json")
    raw = request.stream.read(max_bytes + 1)  # a chunked body has no length
    if len(raw) > max_bytes:
        return _error(413, f"body is over {max_bytes} bytes")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        return _error(400, f"body is not JSON: {err}")
    if not isinstance(body, dict):
        return _error(400, f"body must be a JSON object {shape}")
    try:
        return model.model_validate(body)
    except ValidationError as err:
        return _error(400, _first_problem(err, shape))


def _caller(auth: Authenticator | None) -> Caller | Response | None:
    """The pod the request's token is bound to (None when reports are not authenticated),
    or the 401/403/503 that answers the request."""
    if auth is None:
        return None
    try:
        return auth.caller(request.headers.get("Authorization"))
    except Refused as err:
        headers = None
        if err.status == 401:
            headers = {"WWW-Authenticate": f'Bearer realm="{auth.audience}"'}
        elif err.status == 503:  # the API could not review it: ask again soon
            headers = {"Retry-After": "5"}
        elif err.status == 429:  # the reviews' budget is spent for now
            headers = {"Retry-After": "1"}
        return _json({"error": str(err)}, err.status, headers)


def create_app(monitor: Monitor) -> Flask:
    app = Flask("dragonet-monitor")
    settings = monitor.settings
    auth = None
    if settings.auth == "token":
        auth = Authenticator(
            monitor.cluster,
            settings.token_audience,
            cache_seconds=settings.token_cache_seconds,
            max_entries=4 * settings.max_pods,
            reviews_per_second=settings.token_reviews_per_second,
        )
    app.extensions["dragonet.auth"] = auth

    @app.before_request
    def started() -> None:
        g.started = time.perf_counter()

    @app.post("/monitor")
    def report() -> Response:
        caller = _caller(auth)
        if isinstance(caller, Response):
            return caller
        given = _given(Report, _SHAPES["/monitor"], settings.max_body_bytes)
        if isinstance(given, Response):
            return given
        if not math.isfinite(given.value):
            return _error(400, "value: must be a finite number")
        try:
            outcome = monitor.report(
                given.pod, given.namespace, float(given.value), caller, request.remote_addr
            )
        except ReportError as err:
            return _error(err.status, str(err), err.retry_after)
        return _json(outcome.body(), 200)

    @app.post("/throughput")
    def throughput() -> Response:
        caller = _caller(auth)
        if isinstance(caller, Response):
            return caller
        given = _given(SpeedReport, _SHAPES["/throughput"], settings.max_body_bytes)
        if isinstance(given, Response):
            return given
        speed = float(given.stepsPerSecond)
        if not (math.isfinite(speed) and 0 < speed <= MAX_STEPS_PER_S):
            return _error(
                400, f"stepsPerSecond: must be a number above 0, at most {MAX_STEPS_PER_S:g}"
            )
        if (given.step is None) != (given.totalSteps is None):
            return _error(400, "step and totalSteps: give both (how far the job is) or neither")
        try:
            grad = given.grad()
        except OutOfBounds as err:
            return _error(
                400, str(err).replace("grad.sqr", "gradSqr").replace("grad.var", "gradVar")
            )
        try:
            outcome = monitor.speed(
                given.pod,
                given.namespace,
                speed,
                given.batch,
                given.progress(),
                caller,
                request.remote_addr,
                grad,
            )
        except ReportError as err:
            return _error(err.status, str(err), err.retry_after)
        return _json(outcome.body(), 200)

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"}, 200)

    @app.get("/readyz")
    def readyz() -> Response:
        problem = monitor.readiness()
        if problem:
            return _error(503, problem)
        return _json({"status": "ready", "tracked": monitor.tracked()}, 200)

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(monitor.metrics.expose(), content_type=CONTENT_TYPE)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        code = err.code or 500
        if code == 413:
            return _error(413, f"body is over {settings.max_body_bytes} bytes")
        return _error(code, f"{request.method} {request.path}: {err.name}")

    @app.errorhandler(Exception)
    def bug(err: Exception) -> Response:
        access.exception("bug while answering %s %s", request.method, request.path)
        return _error(500, "internal error (logged)")

    @app.after_request
    def record(response: Response) -> Response:
        if request.path in ("/monitor", "/throughput"):
            monitor.metrics.reports.labels(str(response.status_code)).inc()
        seconds = time.perf_counter() - g.get("started", time.perf_counter())
        extra = {"status": response.status_code, "latency_ms": round(seconds * 1000, 1)}
        if response.status_code != 200 and response.is_json:
            extra["error"] = (response.get_json(silent=True) or {}).get("error")
        level = (
            logging.DEBUG if request.path in ("/healthz", "/readyz", "/metrics") else logging.INFO
        )
        access.log(
            level, "%s %s %d", request.method, request.path, response.status_code, extra=extra
        )
        return response

    return app
