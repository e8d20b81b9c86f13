"""A tenant reads its own place in line (issue 39): each waiting job's Admission, in the
job's namespace, carries its place in the pool's queue, and its sync copies it into the
job's status, so access to one namespace is enough; and nothing a tenant reads (an
Admission, a job's status) names a job of another namespace.

Through the real webhook (Metacontroller's request fixtures; every Admission and status is
checked against its CRD by ``Hook``) and end to end through the simulator."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.main import main
from policy.model.admission import QueuePlace
from policy.pool.queue_status import rounded
from sim.apiserver import EPOCH
from sim.dump import StateDump
from sim.engine import Scenario, SimConfig, Simulation
from tests import metacontroller as mc
from tests.conftest import Hook
from tests.dumpserver import DumpServer, serve_dump
from tests.kube_schema import validate_custom, validate_job_status, validate_k8s
from tests.kubefake import KUBECONFIG, granted
from tests.simkit import gpu_nodes, job, scenario

JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers of 4 cpu, 8Gi each
ONE_NODE = [mc.node("n-1", cpu="24", memory="64Gi")]  # one job at a time


def _job(name: str, second: int, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    manifest = mc.compat(JOB)
    manifest["spec"]["min-instances"] = 4  # the whole node: one job at a time
    manifest["spec"].update(spec)
    created = f"2026-11-21T09:{second // 60:02d}:{second % 60:02d}Z"
    return mc.tfjob(manifest, name=name, namespace=namespace, created=created)


def _plan(hook: Hook, jobs: list[dict], pool: dict | None = None, **kw: Any) -> dict:
    w = mc.world(jobs[0], ONE_NODE, jobs=jobs, **kw)
    hook.pool_sync(mc.pool_request(w, hook.admissions.values(), parent=pool))
    return hook.last_pool


def _place(hook: Hook, job: dict) -> dict[str, Any] | None:
    adm = hook.admission(job)
    assert adm is not None
    return adm["spec"].get("queue")


def _status(hook: Hook, job: dict) -> dict[str, Any]:
    return hook.render(job)["status"]["scheduling"]


# --- the place in line ------------------------------------------------------------------------


def test_each_waiting_job_reads_its_place_in_its_own_admission_and_status(hook: Hook) -> None:
    """Five jobs of two namespaces, one at a time: the first runs, four wait. Each waiting
    job's Admission (in its namespace) and its status say where it stands in the pool and
    among its namespace's jobs, in the order the pool's status lists them."""
    jobs = [
        _job("a1", 0, "team-a"),
        _job("b1", 1, "team-b"),
        _job("a2", 2, "team-a"),
        _job("b2", 3, "team-b"),
        _job("a3", 4, "team-a"),
    ]
    pool = _plan(hook, jobs)
    listed = [e["job"] for e in pool["status"]["queue"]]
    assert listed == ["team-b/b1", "team-a/a2", "team-b/b2", "team-a/a3"]
    assert _place(hook, jobs[0]) is None  # admitted: no place in line
    expected = {
        "b1": (1, 1, 2),
        "a2": (2, 1, 2),
        "b2": (3, 2, 2),
        "a3": (4, 2, 2),
    }
    for j in jobs[1:]:
        name = j["metadata"]["name"]
        position, mine, of_mine = expected[name]
        want = {
            "position": position,
            "length": 4,
            "positionInNamespace": mine,
            "lengthInNamespace": of_mine,
        }
        assert _place(hook, j) == want, name
        section = _status(hook, j)
        assert section["queue"] == want, name
        assert section["reason"] == "WaitingForCapacity"
    assert "queue" not in _status(hook, jobs[0])


def test_places_past_ten_are_written_as_ranges_of_the_one_two_five_series(hook: Hook) -> None:
    jobs = [_job(f"j{i:02d}", i) for i in range(26)]  # j00 runs, 25 wait
    _plan(hook, jobs)
    tenth, eleventh, twenty_first = jobs[10], jobs[11], jobs[21]
    assert _place(hook, tenth) == {
        "position": 10,
        "length": 21,
        "lengthMax": 50,
        "positionInNamespace": 10,
        "lengthInNamespace": 21,
        "lengthInNamespaceMax": 50,
    }
    assert _place(hook, eleventh)["position"] == 11
    assert _place(hook, eleventh)["positionMax"] == 20
    assert (_place(hook, twenty_first)["position"], _place(hook, twenty_first)["positionMax"]) == (
        21,
        50,
    )
    assert _status(hook, twenty_first)["queue"]["positionMax"] == 50


@pytest.mark.parametrize(
    ("n", "written"),
    [
        (1, (1, None)),
        (10, (10, None)),
        (11, (11, 20)),
        (20, (11, 20)),
        (21, (21, 50)),
        (99, (51, 100)),
        (101, (101, 200)),
        (500, (201, 500)),
        (2**31 - 1, (2_000_000_001, 2**31 - 1)),  # the last range ends at the bound
    ],
)
def test_rounded_is_exact_to_ten_then_the_range_it_falls_in(
    n: int, written: tuple[int, int | None]
) -> None:
    assert rounded(n) == written
    first, last = written
    assert first <= n <= (last or n)


def test_a_job_admitted_ahead_rewrites_only_the_places_that_change(hook: Hook) -> None:
    """The cost the ranges buy down: 40 jobs, one at a time. When the running one finishes
    and the head is admitted, each exact place moves up by one, but a job 21st to 40th
    stays in its range: its Admission is not written again."""
    jobs = [_job(f"j{i:02d}", i) for i in range(41)]
    _plan(hook, jobs)
    before = {k: a["metadata"]["generation"] for k, a in hook.admissions.items()}
    done = mc.tfjob(
        jobs[0],
        status={"conditions": [{"type": "Succeeded", "status": "True", "reason": "x"}]},
    )

    def changed_since(before: dict[str, int]) -> list[int]:
        return sorted(
            int(k.rsplit("-j", 1)[1])
            for k, a in hook.admissions.items()
            if a["metadata"]["generation"] != before.get(k)
        )

    _plan(hook, [done, *jobs[1:]])
    # The sync that admits j01 writes its Admission alone: the places wait for the next
    # sync (which the admitted job's pods bring), so Metacontroller's client budget goes
    # to the admitted job's pods first.
    assert changed_since(before) == [1]
    _plan(hook, [done, *jobs[1:]])
    changed = changed_since(before)
    # j01 is admitted; j02-j10 move up within the first ten, and j11 from 11-20 into
    # them; j12-j20 stay in 11-20, j21 moves into it, j22-j40 stay in 21-50, and so does
    # the length (40 -> 39): 12 writes instead of 40.
    assert changed == [*range(1, 12), 21]
    assert _place(hook, jobs[40]) == {
        "position": 21,
        "positionMax": 50,
        "length": 21,
        "lengthMax": 50,
        "positionInNamespace": 21,
        "positionInNamespaceMax": 50,
        "lengthInNamespace": 21,
        "lengthInNamespaceMax": 50,
    }


def test_a_place_outside_its_bounds_is_refused_not_kept() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        QueuePlace.model_validate(
            {"position": 0, "length": 1, "positionInNamespace": 1, "lengthInNamespace": 1}
        )
    assert QueuePlace.from_json({"position": "first"}) is None


# --- no name of another namespace's job -------------------------------------------------------


def test_jobs_ahead_in_another_namespace_are_counted_not_named(hook: Hook) -> None:
    """b fits the node's free room, but a (admitted in the same sync) claims it."""
    same = [_job("a", 0, "team-a"), _job("b", 1, "team-a")]
    _plan(hook, same)
    said = hook.admission(same[1])["spec"]["message"]
    assert "jobs ahead in the queue (team-a/a) claim the free capacity" in said
    other = [_job("a", 0, "team-b"), _job("b", 1, "team-a")]
    hook2 = Hook()
    _plan(hook2, other)
    said = hook2.admission(other[1])["spec"]["message"]
    assert "jobs ahead in the queue (a job in another namespace) claim" in said
    assert "team-b" not in json.dumps(hook2.admission(other[1]))
    assert "team-b" not in json.dumps(_status(hook2, other[1]))
    # The pool's own status is for admins (cluster-scoped): it names every job.
    assert [e["job"] for e in hook2.last_pool["status"]["queue"]] == ["team-a/b"]


def test_dragon_blocked_behind_a_head_of_another_namespace_does_not_name_it(hook: Hook) -> None:
    """Policy dragon admits no one behind a starving head nothing can help: team-c/r takes
    the node, team-b/head has starved and cannot fit, team-a/small waits behind it."""
    jobs = [_job("r", 0, "team-c"), _job("head", 1, "team-b"), _job("small", 2, "team-a")]
    hook.clock.advance(3600)  # everyone has waited past the starvation time
    _plan(hook, jobs, mc.pool(policy="dragon"))
    spec = hook.admission(jobs[2])["spec"]
    assert spec["reason"] == "BlockedBehindHead"
    assert spec["message"].startswith(
        "waiting behind a job in another namespace, which has waited longest"
    )
    assert "team-b" not in json.dumps(spec) and "team-c" not in json.dumps(spec)
    assert "team-c" not in json.dumps(hook.admission(jobs[1])["spec"])


# --- end to end: nothing a tenant reads names another namespace --------------------------------


def _priority(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _in(spec: Any, namespace: str, priority_class: str | None = None) -> Any:
    spec.manifest["metadata"]["namespace"] = namespace
    if priority_class:
        spec.manifest["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": priority_class}}
    return spec


def tenants_story() -> Scenario:
    """tests/test_live.py's story over two namespaces (dragonet, two 4-GPU nodes):
    team-a/low (priority -100) runs first, team-b/elastic (1-4 workers) next; team-b/high
    (1000) preempts elastic at 60 s (same namespace: named), and elastic preempts
    team-a/low (0 > -100: another namespace); team-a/waiter (3 at once) starves and
    elastic shrinks for it (another namespace); team-a/big waits for its gang, low behind."""
    low = _in(job("low", 4, min_workers=4, max_workers=4, steps=1e6), "team-a", "batch")
    elastic = _in(job("elastic", 4, min_workers=1, max_workers=4, arrival=5, steps=1e6), "team-b")
    high = _in(
        job("high", 4, min_workers=4, max_workers=4, arrival=60, steps=1e6), "team-b", "high"
    )
    waiter = _in(job("waiter", 3, min_workers=3, max_workers=3, arrival=200, steps=1e6), "team-a")
    big = _in(job("big", 4, min_workers=4, max_workers=4, arrival=400, steps=1e6), "team-a")
    base = scenario(gpu_nodes(2), [low, elastic, high, waiter, big])
    return Scenario(
        base.name, base.nodes, base.jobs, (_priority("high", 1000), _priority("batch", -100))
    )


TENANT_KINDS = ("Admission.dragonet.io/v1alpha1", "TFJob.kubeflow.org/v1")


class TenantProbe:
    """Every Admission and job status the run writes, checked as it is written: nothing in
    a namespace names the other namespace (its jobs' keys all begin with it)."""

    def __init__(self, sim: Simulation, namespaces: tuple[str, ...]) -> None:
        self.namespaces = namespaces
        self.leaks: list[tuple[float, str, str]] = []
        self.seen: set[str] = set()
        self.sim = sim
        sim.api.watchers.append(self._on_change)

    def _on_change(self, tkey: str, old: Any, new: Any) -> None:
        if tkey not in TENANT_KINDS or new is None:
            return
        mine = new["metadata"]["namespace"]
        said = json.dumps(new.get("spec") if tkey.startswith("Admission") else new.get("status"))
        for other in self.namespaces:
            if other != mine and other in said:
                self.leaks.append((self.sim.now, f"{mine}/{new['metadata']['name']}", said))
        if "another namespace" in said:
            self.seen.add(tkey.split(".")[0])


AT = 450.0  # simulated seconds: the moment the dump shows
NOW = EPOCH + timedelta(seconds=AT)


@pytest.fixture(scope="module")
def tenants_run() -> tuple[Simulation, TenantProbe, dict[str, Any]]:
    sim = Simulation(tenants_story(), SimConfig(policy="dragonet", max_time_s=AT + 60))
    probe = TenantProbe(sim, ("team-a", "team-b"))
    dump = StateDump(sim.api, lambda: sim.now, AT)
    sim.run()
    taken, when = dump.result()
    assert when == AT
    return sim, probe, taken


def test_no_admission_or_job_status_names_a_job_of_another_namespace(tenants_run) -> None:
    sim, probe, _ = tenants_run
    assert probe.leaks == []
    assert probe.seen == {"Admission", "TFJob"}  # the unnamed words were written
    low = sim.api.get("TFJob.kubeflow.org/v1", "team-a/low")["status"]["scheduling"]
    last = low["service"]["lastPreemption"]
    assert last["by"] == "a higher-priority job in another namespace"
    assert last["reason"] == "a job in another namespace has higher priority (0 > -100)"
    elastic = sim.api.get("TFJob.kubeflow.org/v1", "team-b/elastic")["status"]["scheduling"]
    assert "to make room for a job in another namespace, which" in elastic["lastScale"]["reason"]
    # A job of its own namespace is named: high preempted elastic in team-b.
    assert elastic["service"]["lastPreemption"]["by"] == "team-b/high"


def test_the_place_in_line_is_in_each_waiting_jobs_status_end_to_end(tenants_run) -> None:
    sim, _, _ = tenants_run
    status = {
        name: sim.api.get("TFJob.kubeflow.org/v1", f"team-a/{name}")["status"]
        for name in ("big", "low")
    }
    for s in status.values():
        validate_job_status("TFJob", s)
    assert status["big"]["scheduling"]["queue"] == {
        "position": 1,
        "length": 2,
        "positionInNamespace": 1,
        "lengthInNamespace": 2,
    }
    assert status["low"]["scheduling"]["queue"]["position"] == 2
    for adm in sim.api.list("Admission.dragonet.io/v1alpha1"):
        validate_custom(adm)


# --- the plugin shows what the caller may read -----------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def server(tenants_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DumpServer:
    """The dump, served; the kubeconfig's context is team-a's (``--kubeconfig`` of
    ``tenant_config``)."""
    return serve_dump(tenants_run[2], tmp_path, monkeypatch, NOW)


@pytest.fixture
def tenant_config(tmp_path: Path) -> str:
    config = yaml.safe_load(KUBECONFIG)
    config["contexts"][0]["context"]["namespace"] = "team-a"
    path = tmp_path / "tenant"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> list[list[str]]:
    import re

    return [re.split(r"\s{3,}", line.strip()) for line in out.splitlines()[1:] if line.strip()]


def test_a_tenant_without_the_pools_reads_its_places_from_its_jobs(
    server, capsys, tenant_config
) -> None:
    """A Role in team-a alone: TrainingPools (cluster-scoped) answer 403, so ``queue``
    shows the places its jobs' statuses hold, and says where they come from."""
    server.namespaces = {"team-a"}
    for argv in ([], ["-n", "team-a"], ["-A"]):  # -A: it may not list every namespace
        code, out, err = run(capsys, "queue", "--kubeconfig", tenant_config, *argv)
        assert code == 0, err
        assert "no permission to read TrainingPools" in err and "namespace team-a" in err
        rows = _rows(out)
        assert out.splitlines()[0].split() == [
            "POOL", "POSITION", "OF", "IN", "NAMESPACE", "JOB", "KIND", "WAITED", "REASON",
        ]  # fmt: skip
        assert [r[:5] for r in rows] == [
            ["default", "1", "2", "1", "team-a/big"],
            ["default", "2", "2", "2", "team-a/low"],
        ], argv
        assert "team-b" not in out + err
    code, out, _ = run(capsys, "queue", "--kubeconfig", tenant_config, "-o", "wide")
    assert code == 0 and "waiting:" in out and "team-b" not in out
    code, out, _ = run(capsys, "queue", "--kubeconfig", tenant_config, "-o", "json")
    listed = json.loads(out)
    assert listed["kind"] == "List"
    [big, low] = listed["items"]
    assert big["place"] == {
        "position": 1,
        "length": 2,
        "positionInNamespace": 1,
        "lengthInNamespace": 2,
    }
    assert low["waitedSeconds"] == 450


def test_a_tenant_asking_for_another_namespace_gets_one_line(server, capsys, tenant_config) -> None:
    server.namespaces = {"team-a"}
    code, out, err = run(capsys, "queue", "--kubeconfig", tenant_config, "-n", "team-b")
    assert code == 1 and out == ""
    assert err.startswith("dragonet queue: no permission: tfjobs is forbidden")
    assert len(err.splitlines()) == 1


def test_with_the_pools_but_not_the_jobs_of_other_namespaces_their_names_are_left_out(
    server, capsys, tenant_config
) -> None:
    """The pool's status names every job; the caller may read the pools but list jobs only
    in team-a: the other namespace's rows keep their place and lose their name."""
    server.namespaces = None
    server.forbidden = set()
    # A ClusterRole for the pools, and a Role in team-a for its jobs.
    allowed = server.request

    def tenant_with_pools(method: str, url: str, **kw: Any):
        from urllib.parse import urlsplit

        path = urlsplit(url).path
        if "/kubeflow.org/" in path and "/namespaces/team-a/" not in path:
            server.namespaces = {"team-a"}
            try:
                return allowed(method, url, **kw)
            finally:
                server.namespaces = None
        return allowed(method, url, **kw)

    server.request = tenant_with_pools  # type: ignore[method-assign]
    code, out, err = run(capsys, "queue", "--kubeconfig", tenant_config)
    assert code == 0 and err == ""
    rows = _rows(out)
    assert [(r[1], r[2]) for r in rows] == [("1", "team-a/big"), ("2", "team-a/low")]
    assert "team-b" not in out
    code, out, err = run(capsys, "queue", "--kubeconfig", tenant_config, "-o", "wide")
    assert code == 0 and err == "" and "team-b" not in out


def test_with_cluster_access_the_pools_full_queue_is_shown(server, capsys) -> None:
    code, out, err = run(capsys, "queue", "-A")
    assert code == 0 and err == ""
    assert [r[2] for r in _rows(out)] == ["team-a/big", "team-a/low"]


def test_explain_reads_the_place_from_the_jobs_status_without_the_pool(
    server, capsys, tenant_config
) -> None:
    server.namespaces = {"team-a"}
    code, out, err = run(capsys, "explain", "low", "--kubeconfig", tenant_config)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        "TFJob team-a/low in TrainingPool default: Queued (WaitingForCapacity), position 2 "
        "of 2 in the queue, waited 7m30s"
    )
    [preempted] = [x for x in lines if x.startswith("Preempted:")]
    assert "by a higher-priority job in another namespace (a job in another namespace " in (
        preempted
    )
    assert "team-b" not in out
    server.namespaces = None  # an admin
    code, out, _ = run(capsys, "explain", "elastic", "-n", "team-b")
    assert code == 0 and "to make room for a job in another namespace" in out


def test_explain_all_namespaces_searches_the_tenants_own_namespace_and_says_so(
    server, capsys, tenant_config
) -> None:
    """A Role in team-a may not list jobs across namespaces: ``explain -A`` looks where it
    may (the context's namespace) and says so, instead of failing on the 403."""
    server.namespaces = {"team-a"}
    code, out, err = run(capsys, "explain", "low", "-A", "--kubeconfig", tenant_config)
    assert code == 0, err
    assert out.splitlines()[0].startswith("TFJob team-a/low in TrainingPool default: Queued")
    assert err == (
        "(no permission to list TFJobs, MXJobs or PyTorchJobs in every namespace: looked in "
        "namespace "
        "team-a, the context's)\n"
    )
    code, out, err = run(capsys, "explain", "elastic", "-A", "--kubeconfig", tenant_config)
    assert code == 1 and out == "" and "Traceback" not in err
    assert err.splitlines()[-1] == (
        "dragonet explain: no TFJob, MXJob or PyTorchJob 'elastic' in namespace team-a"
    )
    assert "team-b" not in err


def test_explain_shows_the_pools_event_on_the_jobs_admission_to_its_tenant(
    server, capsys, tenant_config
) -> None:
    """The recorder writes "left out" on the Admission, in the job's namespace (the pool's
    own Event, in default, names no other namespace's object): ``explain`` shows it."""
    server.namespaces = {"team-a"}
    server.items.append(
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "tfjob-low.left-out", "namespace": "team-a"},
            "eventTime": "2026-01-01T00:07:00.000000Z",
            "type": "Warning",
            "reason": "ObjectLeftOut",
            "note": "Admission tfjob-low is left out of pool default's plan: spec.pods: bad",
            "regarding": {
                "apiVersion": "dragonet.io/v1alpha1",
                "kind": "Admission",
                "name": "tfjob-low",
                "namespace": "team-a",
            },
            "reportingController": "dragonet.io/recorder",
            "action": "Plan",
        }
    )
    code, out, err = run(capsys, "explain", "low", "--kubeconfig", tenant_config)
    assert code == 0, err
    events = out.split("Events:\n", 1)[1]
    assert "ObjectLeftOut" in events
    assert "Admission tfjob-low is left out of pool default's plan: spec.pods: bad" in events


def _stories(page: Path) -> dict[str, str]:
    import re

    found = re.search(r'id="stories">(.*?)</script>', page.read_text(), re.S)
    assert found is not None
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_view_live_as_a_tenant_draws_its_namespaces_jobs_and_says_what_it_left_out(
    server, capsys, tenant_config, tmp_path: Path
) -> None:
    """No permission to list across namespaces, nor Nodes and TrainingPools: the page of
    the context's namespace's jobs, and one line saying what is not on it."""
    server.namespaces = {"team-a"}
    page = tmp_path / "team-a.html"
    code, out, err = run(
        capsys, "view", "--live", "--kubeconfig", tenant_config, "--html", str(page)
    )
    assert code == 0 and out == "", err
    assert err.splitlines() == [
        "(no permission to list nodes, trainingpools: the page shows namespace team-a without "
        "them)",
        f"wrote {page} ({page.stat().st_size / 2**20:.1f} MiB): 3 jobs on 0 nodes",
    ]
    assert set(_stories(page)) == {f"TFJob/team-a/{n}" for n in ("low", "waiter", "big")}
    text = page.read_text()
    assert "namespace team-a (no permission to list nodes, trainingpools: left out)" in text
    assert "team-b" not in json.dumps(_stories(page))
    # Another namespace's: one line naming the permission, as kubectl's.
    code, out, err = run(
        capsys, "view", "--live", "-n", "team-b", "--kubeconfig", tenant_config,
        "--html", str(tmp_path / "b.html"),
    )  # fmt: skip
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert err == (
        "dragonet view: no permission to list TFJobs, MXJobs or PyTorchJobs in namespace "
        "team-b (list on tfjobs, mxjobs and pytorchjobs of kubeflow.org: "
        "examples/rbac/kubectl-dragonet-tenant.yaml)\n"
    )


def test_view_live_serves_a_tenant_its_namespace(server, capsys, tenant_config) -> None:
    """``--serve`` reads first, as ``--html`` does, and says what the page leaves out."""
    import argparse

    from cli.view import live_server

    server.namespaces = {"team-a"}
    args = argparse.Namespace(
        kubeconfig=tenant_config,
        context=None,
        request_timeout=10.0,
        namespace=None,
        all_namespaces=False,
        refresh=None,
        address=None,
        port=0,
    )
    http, _ = live_server(args)
    http.server_close()
    assert capsys.readouterr().err == (
        "(no permission to list nodes, trainingpools: the page shows namespace team-a without "
        "them)\n"
    )


def test_the_tenant_role_grants_every_read_queue_explain_and_view_make(
    server, capsys, tenant_config, tmp_path: Path
) -> None:
    """examples/rbac/kubectl-dragonet-tenant.yaml, checked against the requests made."""
    role = yaml.safe_load((ROOT / "examples/rbac/kubectl-dragonet-tenant.yaml").read_text())
    validate_k8s(role)
    server.namespaces = {"team-a"}
    for argv in (
        ["queue", "-o", "wide"],
        ["queue"],
        ["explain", "big"],
        ["explain", "big", "-A"],
        ["view", "--live", "--html", str(tmp_path / "page.html")],
    ):
        assert run(capsys, *argv, "--kubeconfig", tenant_config)[0] == 0, argv
    needed = set()
    for path in server.calls:
        segs = path.strip("/").split("/")
        group = "" if segs[0] == "api" else segs[1]
        rest = segs[2:] if segs[0] == "api" else segs[3:]
        if rest[:1] != ["namespaces"]:
            continue  # refused with 403, and fallen back from
        rest = rest[2:]
        needed.add((group, rest[0], "get" if len(rest) > 1 else "list"))
    assert needed <= granted(role), needed - granted(role)
    assert {v for _, _, v in granted(role)} == {"get", "list"}
