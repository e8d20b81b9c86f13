"""The webhook's own schema checks (policy/model/apischema.py) against their sources.

The shipped schemas are what ``scripts/trim_schemas.py`` makes of kubernetes-validate's
and of ``crd/``; ``check_template`` accepts a template exactly when kubernetes-validate
accepts a Pod made of it (it may refuse more: int32 and int64 ranges, times that are no
RFC 3339, fractions where an integer belongs, which the API server refuses too); and
whatever a status holds, ``writable_status`` leaves what its CRD accepts.
"""

from __future__ import annotations

import copy
import importlib.util
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.model.apischema import check_template, writable_status
from tests.conftest import Hook
from tests.fuzz_requests import SPECIAL, bases, paths
from tests.kube_schema import validate_job_status, validate_k8s
from tests.test_fuzz import EXAMPLES, _junk

ROOT = Path(__file__).resolve().parent.parent
BASES = bases()


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("trim_schemas", ROOT / "scripts/trim_schemas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_schemas_are_what_the_script_makes_of_their_sources() -> None:
    """After a change to crd/ or to K8S_VERSION: .venv/bin/python scripts/trim_schemas.py"""
    script = _script()
    for name, make in script.FILES.items():
        shipped = (ROOT / "policy/model/schema" / name).read_text()
        assert shipped == script.render(make()), f"{name} is stale: run scripts/trim_schemas.py"


def _templates() -> list[dict[str, Any]]:
    out = []
    for path in ("/tfjobs/sync", "/mxjobs/sync"):
        spec = BASES[path]["parent"]["spec"]
        for replica in spec.get("tfReplicaSpecs", spec.get("mxReplicaSpecs", {})).values():
            out.append(replica["template"])
    return out


TEMPLATES = _templates()


def _as_pod(template: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod"}
    if isinstance(template, dict):
        pod.update({k: v for k, v in template.items()})
    else:
        pod["spec"] = template
    return pod


def _mutated(rng: random.Random, junk: Any) -> Any:
    template = copy.deepcopy(rng.choice(TEMPLATES))
    wrapper = {"t": template}
    where = rng.choice(list(paths(wrapper))[1:])
    target: Any = wrapper
    for key in where[:-1]:
        target = target[key]
    value = rng.choice(SPECIAL) if rng.random() < 0.4 else junk
    if isinstance(target[where[-1]], dict) and rng.random() < 0.3:
        target[where[-1]][rng.choice(("command", "x", "name", "ports", "labels"))] = value
    else:
        target[where[-1]] = value
    return wrapper["t"]


def _accepted_by_kubernetes_validate(template: Any) -> bool:
    if not isinstance(template, dict):
        return False
    if set(template) - {"metadata", "spec"}:  # a PodTemplateSpec has no other field
        return False
    try:
        validate_k8s(_as_pod(template))
    except AssertionError:
        return False
    return True


@settings(
    max_examples=max(EXAMPLES // 4, 100), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(seed=st.integers(0, 2**32 - 1), junk=_junk())
def test_a_template_passes_the_check_only_if_kubernetes_validate_accepts_its_pods(
    seed: int, junk: Any
) -> None:
    template = _mutated(random.Random(seed), junk)
    problem = check_template(template)
    accepted = _accepted_by_kubernetes_validate(template)
    if problem is None:
        assert accepted, template
    if not accepted:
        assert problem is not None, template


def test_the_checked_templates_of_the_tests_jobs_pass() -> None:
    assert [check_template(t) for t in TEMPLATES] == [None] * len(TEMPLATES)


def test_a_status_as_the_webhook_writes_it_is_kept_whole() -> None:
    hook = Hook()
    for path, kind in (("/tfjobs/sync", "TFJob"), ("/mxjobs/sync", "MXJob")):
        status = hook.job_sync(BASES[path])["status"]
        assert writable_status(kind, status) == status


@pytest.mark.slow
@settings(
    max_examples=max(EXAMPLES // 4, 100), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(seed=st.integers(0, 2**32 - 1), junk=_junk(), kind=st.sampled_from(["TFJob", "MXJob"]))
def test_whatever_a_status_holds_what_is_kept_of_it_is_valid(
    seed: int, junk: Any, kind: str
) -> None:
    rng = random.Random(seed)
    status = copy.deepcopy(Hook().job_sync(BASES["/tfjobs/sync"])["status"])
    wrapper = {"s": status}
    where = rng.choice(list(paths(wrapper))[1:])
    target: Any = wrapper
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = rng.choice(SPECIAL) if rng.random() < 0.4 else junk
    kept = writable_status(kind, wrapper["s"] if isinstance(wrapper["s"], dict) else {})
    validate_job_status(kind, kept)
