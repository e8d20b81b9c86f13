"""The reaper as it is deployed: ``reaper.kube.KubeJobs``, the official client for real,
against a small in-memory API server at the HTTP layer (there is no cluster here); the
calls it makes are exactly what the chart's ClusterRole grants; its process's settings and
errors; its Deployment."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes.client.rest import RESTResponse

from policy.model.kinds import MXJOB, TFJOB
from reaper.config import ReaperSettings
from reaper.kube import KubeJobs
from reaper.loop import reap_once
from tests.controller_cli import assert_exits_2_with_one_line, run_module
from tests.kubefake import answer, granted, route, use_kubeconfig
from tests.test_chart import _render, _validate_all, restricted_violations
from tests.test_ttl import T0, finished
from webhooks.env import unknown_variable
from webhooks.kubeapi import ApiError


class FakeApiServer:
    """TFJobs and MXJobs as lists and deletes of ``kubeflow.org/v1``; pages of ``limit``
    with a ``continue`` token, as the API server serves a large list."""

    def __init__(self) -> None:
        self.jobs: dict[str, list[dict[str, Any]]] = {"tfjobs": [], "mxjobs": [], "pytorchjobs": []}
        self.used: set[tuple[str, str, str]] = set()
        self.pages: list[tuple[str, int]] = []  # (resource, items served)
        self.deleted_with: list[dict[str, Any]] = []
        self.fail: int | None = None

    def request(self, method: str, url: str, headers=None, body=None, **_: Any) -> RESTResponse:
        parts = urlsplit(url)
        segments = parts.path.strip("/").split("/")
        if segments[:3] != ["apis", "kubeflow.org", "v1"]:
            return answer(404, {"kind": "Status", "reason": "NotFound"})
        if self.fail:
            return answer(self.fail, {"kind": "Status", "message": "injected"})
        if method == "GET" and len(segments) == 4:
            resource = segments[3]
            self.used.add(("kubeflow.org", resource, "list"))
            query = parse_qs(parts.query)
            limit = int(query["limit"][0])
            start = int(query.get("continue", ["0"])[0])
            items = self.jobs[resource][start : start + limit]
            more = start + limit < len(self.jobs[resource])
            self.pages.append((resource, len(items)))
            meta = {"continue": str(start + limit)} if more else {}
            return answer(200, {"kind": "List", "metadata": meta, "items": items})
        if method == "DELETE" and len(segments) == 7 and segments[3] == "namespaces":
            namespace, resource, name = segments[4], segments[5], segments[6]
            self.used.add(("kubeflow.org", resource, "delete"))
            options = json.loads(body) if isinstance(body, (str, bytes)) else body
            self.deleted_with.append(options)
            for obj in self.jobs[resource]:
                meta = obj["metadata"]
                if (meta["namespace"], meta["name"]) == (namespace, name):
                    if options["preconditions"]["uid"] != meta["uid"]:
                        return answer(409, {"kind": "Status", "reason": "Conflict"})
                    self.jobs[resource].remove(obj)
                    return answer(200, {"kind": "Status", "status": "Success"})
            return answer(404, {"kind": "Status", "reason": "NotFound"})
        return answer(405, {"kind": "Status", "reason": "MethodNotAllowed"})


def _listed(obj: dict[str, Any]) -> dict[str, Any]:
    """A job as a list serves it: without apiVersion and kind."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


@pytest.fixture
def api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[KubeJobs, FakeApiServer]]:
    use_kubeconfig(tmp_path, monkeypatch)
    jobs = KubeJobs(timeout_seconds=1, page_size=2)
    server = FakeApiServer()
    route(jobs._api.client, server.request, monkeypatch)
    yield jobs, server


def test_every_job_is_listed_page_by_page_with_its_kind(api) -> None:
    jobs, server = api
    server.jobs["tfjobs"] = [_listed(finished(60, name=f"j{i}")) for i in range(5)]
    listed = list(jobs.list(TFJOB))
    assert [j["metadata"]["name"] for j in listed] == ["j0", "j1", "j2", "j3", "j4"]
    assert {(j["apiVersion"], j["kind"]) for j in listed} == {("kubeflow.org/v1", "TFJob")}
    assert server.pages == [("tfjobs", 2), ("tfjobs", 2), ("tfjobs", 1)]


def test_a_job_is_deleted_only_by_its_uid_in_the_background(api) -> None:
    jobs, server = api
    server.jobs["mxjobs"] = [_listed(finished(0, name="mx"))]
    assert jobs.delete(MXJOB, "team", "mx", "not-its-uid") is False  # a newer job: kept
    assert len(server.jobs["mxjobs"]) == 1
    assert jobs.delete(MXJOB, "team", "mx", "uid-mx") is True
    assert server.jobs["mxjobs"] == []
    assert server.deleted_with[-1]["preconditions"] == {"uid": "uid-mx"}
    assert server.deleted_with[-1]["propagationPolicy"] == "Background"
    assert jobs.delete(MXJOB, "team", "mx", "uid-mx") is False  # already gone: fine


def test_an_api_error_is_an_api_error_and_the_pass_goes_on(api) -> None:
    jobs, server = api
    server.fail = 500
    with pytest.raises(ApiError, match="500"):
        list(jobs.list(TFJOB))
    done = reap_once(jobs, T0)
    assert (done.deleted, done.failed) == ((), 3)  # no kind could be listed


def test_a_pass_over_the_api_deletes_the_expired_jobs(api) -> None:
    jobs, server = api
    server.jobs["tfjobs"] = [
        _listed(finished(60, name="old")),
        _listed(finished(600, name="young")),
        _listed(finished(None, name="no-ttl")),
    ]
    done = reap_once(jobs, T0 + timedelta(seconds=61))
    assert done.deleted == ("TFJob team/old",)
    assert [j["metadata"]["name"] for j in server.jobs["tfjobs"]] == ["young", "no-ttl"]
    assert done.next_at == T0 + timedelta(seconds=600)


def test_the_charts_cluster_role_grants_exactly_what_the_reaper_calls(api, helm: str) -> None:
    jobs, server = api
    server.jobs["tfjobs"] = [_listed(finished(0, name="a"))]
    server.jobs["mxjobs"] = [_listed(finished(0, name="b"))]
    server.jobs["pytorchjobs"] = [_listed(finished(0, name="c"))]
    reap_once(jobs, T0 + timedelta(seconds=1))
    role = next(
        d
        for d in _render(helm)
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dragonet-reaper"
    )
    assert granted(role) == server.used


# --- the chart -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def reaper_docs(helm: str) -> list[dict[str, Any]]:
    return _render(
        helm,
        "--set",
        "reaper.intervalSeconds=12",
        "--set",
        "reaper.logLevel=debug",
        "--set",
        "reaper.serviceAccount.name=reaper-sa",
    )


def _reaper(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [
        d
        for d in docs
        if d["kind"] == kind
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == "reaper"
    ]
    return found


def test_the_reaper_is_on_by_default_and_its_objects_validate(reaper_docs) -> None:
    _validate_all(reaper_docs)
    pod = _reaper(reaper_docs, "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["dragonet-reaper"]
    assert (
        pod["serviceAccountName"]
        == "reaper-sa"
        == _reaper(reaper_docs, "ServiceAccount")["metadata"]["name"]
    )
    binding = _reaper(reaper_docs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "reaper-sa", "namespace": "dragonet"}
    ]
    assert restricted_violations(pod) == []
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_reaper_reads_the_environment_the_chart_sets(
    reaper_docs, monkeypatch: pytest.MonkeyPatch
) -> None:
    [container] = _reaper(reaper_docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    for e in container["env"]:
        monkeypatch.setenv(e["name"], e["value"])
    assert unknown_variable(os.environ, ReaperSettings, "dragonet-reaper") is None
    settings = ReaperSettings()
    assert (settings.interval_seconds, settings.log_level) == (12, "debug")


def test_the_reaper_can_be_turned_off(helm: str) -> None:
    docs = _render(helm, "--set", "reaper.enabled=false")
    assert not [d for d in docs if "reaper" in d["metadata"]["name"]]


# --- the process ---------------------------------------------------------------------


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_module("reaper", tmp_path, *args, **env)


def test_help_says_what_it_does(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--help")
    assert proc.returncode == 0 and "ttlSecondsAfterFinished" in proc.stdout


def test_a_bad_setting_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _run(tmp_path, DRAGONET_REAPER_INTERVAL_SECONDS="0")
    assert_exits_2_with_one_line(proc, "dragonet-reaper: setting interval_seconds: Input should be")


def test_without_any_api_configuration_it_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _run(tmp_path, KUBECONFIG=str(tmp_path / "missing"))
    assert_exits_2_with_one_line(proc, "dragonet-reaper: no Kubernetes API configuration:")


def test_a_misspelt_setting_exits_2_naming_the_setting_it_meant(tmp_path: Path) -> None:
    proc = _run(tmp_path, DRAGONET_REAPER_INTERVAL_SECOND="5")
    assert_exits_2_with_one_line(
        proc,
        "dragonet-reaper: DRAGONET_REAPER_INTERVAL_SECOND: not a setting of dragonet-reaper "
        "(did you mean DRAGONET_REAPER_INTERVAL_SECONDS?",
    )


def test_an_argument_it_does_not_take_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--interval", "5")
    assert_exits_2_with_one_line(proc, "dragonet-reaper: takes no arguments (got '--interval')")
