"""Locked down by default (issue 36): TLS and the shared secret on, their Secrets made by
the chart; the monitor's and the reaper's RBAC narrowed to what they call, and what RBAC
cannot say said by ValidatingAdmissionPolicies, whose CEL is evaluated here (cel-python)
against the writes the monitor and the reaper make and the ones they must never make."""

from __future__ import annotations

import copy
import string
from base64 import b64decode
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import celpy
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from policy.model.ttl import finished_at, ttl_seconds
from tests.kube_schema import validate_k8s
from tests.kubefake import granted
from tests.test_chart import _controller, _notes, _render, _webhook

MONITOR = "system:serviceaccount:dragonet:dragonet-monitor"
REAPER = "system:serviceaccount:dragonet:dragonet-reaper"


@pytest.fixture(scope="module")
def docs(helm: str) -> list[dict[str, Any]]:
    return _render(helm, "--set", "monitor.enabled=true")


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


# --- TLS and the shared secret ----------------------------------------------------------------


def test_by_default_the_chart_makes_a_ca_and_a_certificate_for_the_service(docs) -> None:
    secret = _named(docs, "Secret", "dragonet-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: b64decode(v) for k, v in secret["data"].items()}
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    cert.verify_directly_issued_by(ca)  # Metacontroller checks the webhook against ca.crt
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    host = "dragonet-webhook.dragonet"  # the host of every hook URL
    assert host in names.get_values_for_type(x509.DNSName)
    assert f"{host}.svc" in names.get_values_for_type(x509.DNSName)
    key = serialization.load_pem_private_key(data["tls.key"], password=None)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    assert cert.not_valid_after_utc > datetime.now(UTC) + timedelta(days=3000)
    token = b64decode(_named(docs, "Secret", "dragonet-webhook-token")["data"]["token"]).decode()
    assert len(token) == 48 and set(token) <= set(string.ascii_letters + string.digits)
    for s in (secret, _named(docs, "Secret", "dragonet-webhook-token")):
        validate_k8s(s)


def test_by_default_metacontroller_calls_https_with_the_charts_ca_and_token(docs) -> None:
    """The same Secrets, keys and host in the CompositeControllers (Metacontroller's
    endpointConfigs, matched by host: pkg/hooks/endpoint_config.go) and the webhook pod."""
    for which in ("pools", "tfjobs", "mxjobs", "pytorchjobs", "migrations"):
        spec = _controller(docs, which)["spec"]
        assert spec["endpointConfigs"] == [
            {
                "host": "dragonet-webhook.dragonet",
                "caBundle": {
                    "secretRef": {
                        "name": "dragonet-webhook-tls",
                        "namespace": "dragonet",
                        "key": "ca.crt",
                    }
                },
                "authorization": {
                    "type": "Bearer",
                    "secretRef": {
                        "name": "dragonet-webhook-token",
                        "namespace": "dragonet",
                        "key": "token",
                    },
                },
            }
        ]
        for hook in spec["hooks"].values():
            assert hook["webhook"]["url"].startswith("https://dragonet-webhook.dragonet/")
    pod = _webhook(docs)["spec"]["template"]["spec"]
    volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert volumes == {"tls": "dragonet-webhook-tls", "auth": "dragonet-webhook-token"}
    assert [p["port"] for p in _webhook(docs, "Service")["spec"]["ports"]] == [443]


def test_a_secret_of_ones_own_is_used_and_the_chart_makes_none(helm: str) -> None:
    docs = _render(
        helm, "--set", "tls.secretName=from-cert-manager", "--set", "auth.secretName=mine"
    )
    assert [d for d in docs if d["kind"] == "Secret"] == []
    pod = _webhook(docs)["spec"]["template"]["spec"]
    volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert volumes == {"tls": "from-cert-manager", "auth": "mine"}


def test_off_there_is_no_secret_the_hooks_are_http_and_the_notes_say_what_is_exposed(
    helm: str, tmp_path: Path
) -> None:
    off = ("--set", "tls.enabled=false", "--set", "auth.enabled=false")
    docs = _render(helm, *off)
    assert [d for d in docs if d["kind"] == "Secret"] == []
    assert "endpointConfigs" not in _controller(docs, "pools")["spec"]
    notes = " ".join(_notes(helm, tmp_path, *off).split())
    assert "TLS: OFF (tls.enabled=false): every hook request and answer" in notes
    assert "Shared secret: OFF (auth.enabled=false): any pod that reaches the webhook port" in notes
    on = " ".join(_notes(helm, tmp_path / "on").split())
    assert "TLS: on:" in on and "Shared secret: on:" in on


def test_the_notes_say_when_the_monitor_takes_reports_from_anyone(
    helm: str, tmp_path: Path
) -> None:
    notes = " ".join(
        _notes(
            helm, tmp_path, "--set", "monitor.enabled=true", "--set", "monitor.auth=none"
        ).split()
    )
    assert "any pod on a node can report for another tenant's pods" in notes
    default = " ".join(_notes(helm, tmp_path / "d", "--set", "monitor.enabled=true").split())
    assert "takes a report only from the pod it is about" in default


# --- RBAC --------------------------------------------------------------------------------------


def test_the_monitor_may_review_tokens_only_when_it_checks_them(docs, helm: str) -> None:
    role = _named(docs, "ClusterRole", "dragonet-monitor")
    assert ("authentication.k8s.io", "tokenreviews", "create") in granted(role)
    none = _render(helm, "--set", "monitor.enabled=true", "--set", "monitor.auth=none")
    assert not any(
        g == "authentication.k8s.io"
        for g, _, _ in granted(_named(none, "ClusterRole", "dragonet-monitor"))
    )


def test_the_reaper_may_list_and_delete_jobs_and_nothing_else(docs) -> None:
    role = _named(docs, "ClusterRole", "dragonet-reaper")
    assert granted(role) == {
        ("kubeflow.org", p, v)
        for p in ("tfjobs", "mxjobs", "pytorchjobs")
        for v in ("list", "delete")
    }


# --- ValidatingAdmissionPolicies, evaluated ------------------------------------------------


def _cel(expression: str, activation: dict[str, Any]) -> Any:
    """The expression's value; an evaluation error raises (the API server would refuse the
    request: failurePolicy Fail), never counts as admitted."""
    env = celpy.Environment()
    value = env.program(env.compile(expression)).evaluate(activation)
    if isinstance(value, celpy.CELEvalError):
        raise AssertionError(f"{expression}: {value}")
    return value


def _true(value: Any) -> bool:
    """A CEL bool that is true (anything else is a refusal, as in the API server)."""
    return isinstance(value, celpy.celtypes.BoolType) and bool(value)


def admit(
    policy: dict[str, Any],
    user: str,
    operation: str,
    new: dict[str, Any] | None,
    old: dict[str, Any] | None,
    node: str | None = None,
) -> list[str]:
    """The messages of the validations ``policy`` fails for that request, as the API
    server evaluates them ([] = admitted): matchConditions first, then the variables in
    order, then each validation."""
    extra = {"authentication.kubernetes.io/node-name": [node]} if node else {}
    request = {"operation": operation, "userInfo": {"username": user, "extra": extra}}
    activation: dict[str, Any] = {
        "request": celpy.json_to_cel(request),
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
    }
    spec = policy["spec"]
    if not all(_true(_cel(c["expression"], activation)) for c in spec.get("matchConditions", [])):
        return []
    variables: dict[str, Any] = {}
    for v in spec.get("variables", []):
        activation["variables"] = celpy.celtypes.MapType(
            {celpy.celtypes.StringType(k): x for k, x in variables.items()}
        )
        variables[v["name"]] = _cel(v["expression"], activation)
    activation["variables"] = celpy.celtypes.MapType(
        {celpy.celtypes.StringType(k): x for k, x in variables.items()}
    )
    return [
        v["message"] for v in spec["validations"] if not _true(_cel(v["expression"], activation))
    ]


def _job(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": "job1",
            "namespace": "team-a",
            "labels": {"team": "a"},
            "annotations": {"owner": "ann", "dragonet.io/throughput": "{}"},
        },
        "spec": {
            "runPolicy": {"ttlSecondsAfterFinished": 60},
            "tfReplicaSpecs": {"Worker": {"replicas": 2}},
        },
        "status": status,
    }


def _merge(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386), as the API server applies the monitor's."""
    out = copy.deepcopy(obj)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def test_the_policies_validate_and_match_only_the_monitors_and_the_reapers_accounts(docs) -> None:
    policies = [d for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in policies) == [
        ("ValidatingAdmissionPolicy", "dragonet-monitor-jobs"),
        ("ValidatingAdmissionPolicy", "dragonet-monitor-migrations"),
        ("ValidatingAdmissionPolicy", "dragonet-reaper-jobs"),
        ("ValidatingAdmissionPolicyBinding", "dragonet-monitor-jobs"),
        ("ValidatingAdmissionPolicyBinding", "dragonet-monitor-migrations"),
        ("ValidatingAdmissionPolicyBinding", "dragonet-reaper-jobs"),
    ]
    for d in policies:
        validate_k8s(d)
        if d["kind"] == "ValidatingAdmissionPolicyBinding":
            assert d["spec"] == {"policyName": d["metadata"]["name"], "validationActions": ["Deny"]}
    # A user (or Metacontroller) is never matched: these policies narrow two accounts only.
    for name in ("dragonet-monitor-jobs", "dragonet-reaper-jobs"):
        policy = _named(docs, "ValidatingAdmissionPolicy", name)
        changed = _job()
        changed["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 9
        assert admit(policy, "alice", "UPDATE", changed, _job()) == []
        assert admit(policy, "alice", "DELETE", None, _job()) == []


def test_the_monitor_may_change_a_jobs_throughput_annotation_and_nothing_else(docs) -> None:
    policy = _named(docs, "ValidatingAdmissionPolicy", "dragonet-monitor-jobs")
    old = _job()
    # What monitor.kube.KubeCluster.annotate_job sends: a merge patch of one annotation.
    written = _merge(old, {"metadata": {"annotations": {"dragonet.io/throughput": '{"v":1}'}}})
    assert admit(policy, MONITOR, "UPDATE", written, old) == []
    fresh = copy.deepcopy(old)
    del fresh["metadata"]["annotations"]
    first = _merge(fresh, {"metadata": {"annotations": {"dragonet.io/throughput": "{}"}}})
    assert admit(policy, MONITOR, "UPDATE", first, fresh) == []
    forged = [
        _merge(old, {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 64}}}}),
        _merge(old, {"metadata": {"labels": {"team": "b"}}}),
        _merge(old, {"metadata": {"annotations": {"owner": "mallory"}}}),
        _merge(old, {"metadata": {"annotations": {"owner": None}}}),
        _merge(
            old, {"metadata": {"annotations": {"dragonet.io/checkpoint-interval-seconds": "1"}}}
        ),
        _merge(old, {"metadata": {"finalizers": ["hold"]}}),
    ]
    for new in forged:
        assert admit(policy, MONITOR, "UPDATE", new, old), new


def test_the_monitor_may_create_and_delete_only_its_own_nodes_requests(docs) -> None:
    from monitor.kube import PodInfo, migration

    policy = _named(docs, "ValidatingAdmissionPolicy", "dragonet-monitor-migrations")
    here = PodInfo("w", "team-a", "uid-w", "node-1", {"training.kubeflow.org/job-name": "j"})
    mine = migration(here, "Converged", "monitor/node-1")  # as the monitor of node-1 writes it
    assert admit(policy, MONITOR, "CREATE", mine, None, node="node-1") == []
    assert admit(policy, MONITOR, "DELETE", None, mine, node="node-1") == []
    # Where the API server does not name the caller's node: any monitor's request.
    assert admit(policy, MONITOR, "CREATE", mine, None) == []
    assert admit(policy, MONITOR, "CREATE", mine, None, node="node-2")  # another node's monitor
    there = migration(PodInfo("w", "team-a", "uid-w", "node-2", {}), "Overloaded", "monitor/node-1")
    assert admit(policy, MONITOR, "CREATE", there, None, node="node-1")  # a pod elsewhere
    users = copy.deepcopy(mine)
    users["spec"]["requestedBy"] = "alice"
    assert admit(policy, MONITOR, "DELETE", None, users, node="node-1")  # a user's request
    del users["spec"]["requestedBy"]
    assert admit(policy, MONITOR, "CREATE", users, None)


@pytest.mark.parametrize(
    ("status", "spec_ttl"),
    [
        ({}, 60),
        ({"conditions": [{"type": "Running", "status": "True"}]}, 60),
        ({"conditions": [{"type": "Succeeded", "status": "False"}]}, 60),
        ({"conditions": [{"type": "Succeeded", "status": "True"}]}, 60),
        ({"conditions": [{"type": "Failed", "status": "True"}]}, 60),
        ({"conditions": [{"type": "Succeeded", "status": "True"}]}, None),
        (
            {
                "conditions": [
                    {"type": "Created", "status": "True"},
                    {"type": "Failed", "status": "True"},
                ]
            },
            0,
        ),
    ],
)
def test_the_reaper_may_delete_only_an_ended_job_with_a_ttl(docs, status, spec_ttl) -> None:
    """The policy admits exactly the deletes policy.model.ttl could ask for (an ended job
    with a TTL; the time is the reaper's to judge: CEL has no clock)."""
    policy = _named(docs, "ValidatingAdmissionPolicy", "dragonet-reaper-jobs")
    job = _job(**status)
    for c in job["status"].get("conditions", []):
        c["lastTransitionTime"] = "2026-11-25T12:00:00Z"
    if spec_ttl is None:
        del job["spec"]["runPolicy"]["ttlSecondsAfterFinished"]
    else:
        job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = spec_ttl
    may = finished_at(job["status"]) is not None and ttl_seconds(job["spec"]) is not None
    assert (admit(policy, REAPER, "DELETE", None, job) == []) is may
    # tf-operator v1.0's layout: the TTL at the top of the spec.
    if spec_ttl is not None:
        top = copy.deepcopy(job)
        top["spec"]["ttlSecondsAfterFinished"] = top["spec"].pop("runPolicy")[
            "ttlSecondsAfterFinished"
        ]
        assert (admit(policy, REAPER, "DELETE", None, top) == []) is may


def test_no_policy_where_the_cluster_cannot_run_them_or_they_are_turned_off(helm: str) -> None:
    for extra in (("--kube-version", "1.29.0"), ("--set", "rbac.admissionPolicies=false")):
        docs = _render(helm, "--set", "monitor.enabled=true", *extra)
        assert not [d for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")]


# --- the chart's certificate and token, served by the real webhook -------------------------


def _https(port: int, ca: bytes, request: bytes, host: str = "dragonet-webhook.dragonet") -> bytes:
    """One request over TLS to 127.0.0.1:port, checking the certificate as Metacontroller
    does: against the chart's CA, for the hook URLs' host."""
    import socket
    import ssl

    context = ssl.create_default_context(cadata=ca.decode())
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # Metacontroller's floor
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as s,
    ):
        s.sendall(request)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def test_the_webhook_serves_the_charts_certificate_and_takes_only_the_charts_token(
    docs, tmp_path: Path
) -> None:
    """`dragonet serve` with the files the chart mounts, from the Secrets the chart makes:
    the certificate verifies against ca.crt for dragonet-webhook.dragonet (what
    Metacontroller's endpointConfigs caBundle checks), and a hook request is answered with
    the chart's token and refused without it."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    import orjson

    from tests.conftest import load_fixture

    tls = {
        k: b64decode(v) for k, v in _named(docs, "Secret", "dragonet-webhook-tls")["data"].items()
    }
    token = b64decode(_named(docs, "Secret", "dragonet-webhook-token")["data"]["token"])
    env_of = {
        e["name"]: e.get("value")
        for e in _webhook(docs)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    files = {
        env_of["DRAGONET_TLS_CERT_FILE"]: tls["tls.crt"],
        env_of["DRAGONET_TLS_KEY_FILE"]: tls["tls.key"],
        env_of["DRAGONET_SHARED_SECRET_FILE"]: token,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAGONET_")}
    for path, content in files.items():  # the chart's mount paths, under tmp_path
        local = tmp_path / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(content)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env.update(
        DRAGONET_HOST="127.0.0.1",
        DRAGONET_PORT=str(port),
        DRAGONET_WORKERS="1",
        DRAGONET_THREADS="2",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
        DRAGONET_TLS_CERT_FILE=str(tmp_path / env_of["DRAGONET_TLS_CERT_FILE"].lstrip("/")),
        DRAGONET_TLS_KEY_FILE=str(tmp_path / env_of["DRAGONET_TLS_KEY_FILE"].lstrip("/")),
        DRAGONET_SHARED_SECRET_FILE=str(
            tmp_path / env_of["DRAGONET_SHARED_SECRET_FILE"].lstrip("/")
        ),
    )
    log = tmp_path / "server.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    body = orjson.dumps(load_fixture("job-sync-job1-admitted.json"))

    def sync(bearer: bytes) -> bytes:
        head = (
            b"POST /tfjobs/sync HTTP/1.1\r\nHost: dragonet-webhook.dragonet\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\n"
            b"Authorization: Bearer " + bearer + b"\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        return _https(port, tls["ca.crt"], head + body)

    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"dragonet serve exited: {log.read_text()[-2000:]}")
            try:
                health = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                if _https(port, tls["ca.crt"], health).startswith(b"HTTP/1.1 200"):
                    break
            except (ConnectionError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"no TLS answer in 60 s: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        assert sync(token).split(b"\r\n", 1)[0] == b"HTTP/1.1 200 OK"
        import ssl

        with pytest.raises(ssl.SSLCertVerificationError):  # the names are checked
            _https(port, tls["ca.crt"], health, host="elsewhere.example")
        assert sync(b"not-the-token").split(b" ", 2)[1] == b"401"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
