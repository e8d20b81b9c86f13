"""The webhook's memo (policy/memo.py) saves work and never changes an answer."""

from __future__ import annotations

import orjson

from policy.config import PolicyConfig
from policy.snapshot import sync
from tests.conftest import NOW, Hook, load_fixture, versioned

FIXTURES = [
    "sync-job1-cannot-fit.json",
    "sync-job1-one-big-node.json",
    "sync-job1-spill.json",
    "sync-two-jobs-for-job-a.json",
    "sync-two-jobs-for-job-b.json",
]


def test_answers_with_the_memo_equal_answers_without_it() -> None:
    hook = Hook()
    for _ in range(2):  # the second pass answers from the memo
        for name in FIXTURES:
            request = versioned(load_fixture(name))
            with_memo = hook.sync(request)
            plain = sync(
                request["parent"], request["children"], request["related"], NOW, PolicyConfig()
            )
            expected = {"status": plain.status, "children": plain.children}
            if plain.resync_after is not None:
                expected["resyncAfterSeconds"] = plain.resync_after
            assert orjson.loads(orjson.dumps(expected)) == with_memo
    assert hook.app.config["DRAGONET_MEMO"].hits > 0


def test_two_jobs_synced_on_one_snapshot_share_one_plan() -> None:
    hook = Hook()
    memo = hook.app.config["DRAGONET_MEMO"]
    hook.sync(versioned(load_fixture("sync-two-jobs-for-job-a.json")))

    def plans() -> int:
        return sum(1 for k in memo.entries if isinstance(k, tuple) and k[0] == "plan")

    assert plans() == 1
    hook.sync(versioned(load_fixture("sync-two-jobs-for-job-b.json")))
    assert plans() == 1


def test_an_object_rewritten_with_a_new_resource_version_is_parsed_again() -> None:
    hook = Hook()
    request = versioned(load_fixture("sync-job1-cannot-fit.json"))
    waiting = hook.sync(request)
    assert waiting["children"] == []
    # The node grows (a new resourceVersion, as the API server would give it): job1 fits now.
    for node in request["related"]["Node.v1"].values():
        node["status"]["allocatable"]["cpu"] = "64"
        node["status"]["allocatable"]["memory"] = "256Gi"
    admitted = hook.sync(versioned(request))
    assert any(c["kind"] == "Pod" for c in admitted["children"])
