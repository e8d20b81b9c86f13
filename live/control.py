"""``kubectl dragonet suspend|resume|delete JOB`` and ``hold|drain|release POOL``: the
plugin's writes, each one request made as kubectl and kueuectl make it.

* ``suspend`` / ``resume``: a JSON merge patch of the job's ``spec.runPolicy.suspend``
  (Kubeflow's field; ``kubectl patch --type=merge`` and kueuectl's ``stop workload`` do the
  same). A suspended job's own sync deletes its pods and its pool plans it no more; a
  resumed one joins its pool's queue again, at the back.
* ``delete``: a DELETE with kubectl's default cascade (``propagationPolicy: Background``)
  and the uid the job was read with as a precondition, so a job created again under the
  same name since is not the one deleted.
* ``hold`` / ``drain`` / ``release``: a merge patch of the pool's ``spec.stopPolicy``
  (``Hold``, ``HoldAndDrain``, ``None``), as ``kueuectl stop clusterqueue
  [--keep-already-running]`` and ``kueuectl resume clusterqueue`` patch a ClusterQueue's
  (``policy/pool/stop.py`` says what the pool then does).

Each command reads the object first: a job or pool that is not there, already in the state
asked for, or (``suspend``) finished, is said in one line, and nothing is written.
``--dry-run=client`` stops there; ``--dry-run=server`` sends the write with ``dryRun=All``,
so the API server checks it (permission, schema) and stores nothing. A write the API
server answers but does not keep (a CRD installed before the field, which prunes it) is
said as such. Every failure is one line and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from live.kube import Kube

JOB_VERBS = ("suspend", "resume", "delete")
POOL_VERBS = ("hold", "drain", "release")
COMMANDS = (*JOB_VERBS, *POOL_VERBS)
MERGE_PATCH = "application/merge-patch+json"

HELP = {
    "suspend": "suspend a job: its pods go, it leaves the queue (spec.runPolicy.suspend)",
    "resume": "resume a suspended job: it joins its pool's queue again, at the back",
    "delete": "delete a job (its pods and Admission go with it)",
    "hold": "hold a pool: it admits no new job; admitted jobs run to completion",
    "drain": "drain a pool: it admits no new job and preempts every admitted one",
    "release": "release a held or drained pool: it admits its queue again",
}
EXAMPLES = {
    "suspend": "  kubectl dragonet suspend job3 -n team-a\n  kubectl dragonet suspend mxjob/mx1",
    "resume": "  kubectl dragonet resume job3 -n team-a",
    "delete": "  kubectl dragonet delete tfjob/job3\n"
    "  kubectl dragonet delete job3 --dry-run=server",
    "hold": "  kubectl dragonet hold gpu",
    "drain": "  kubectl dragonet drain gpu --dry-run=server",
    "release": "  kubectl dragonet release gpu",
}
# The pool's spec.stopPolicy each pool verb writes, and what it says it did.
STOP = {"hold": "Hold", "drain": "HoldAndDrain", "release": "None"}
DONE = {
    "suspend": "suspended",
    "resume": "resumed",
    "hold": "held",
    "drain": "drained",
    "release": "released",
}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from live.commands import request_timeout

    for name in COMMANDS:
        p = sub.add_parser(
            name,
            help=f"(live cluster) {HELP[name]}",
            description=f"{HELP[name][0].upper()}{HELP[name][1:]}, in the current kubeconfig "
            "context.",
            epilog="examples:\n" + EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name in JOB_VERBS:
            p.add_argument("job", help="the job: NAME, tfjob/NAME or mxjob/NAME")
            p.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
        else:  # pools are cluster-scoped: no -n to ignore
            p.add_argument("pool", help="the TrainingPool")
        p.add_argument(
            "--dry-run",
            default="none",
            choices=["none", "client", "server"],
            help="client: only say what would be done; server: the API server checks the "
            "write and keeps nothing (as kubectl's --dry-run)",
        )
        p.add_argument("--context", help="the kubeconfig context to use")
        p.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG)")
        p.add_argument(
            "--request-timeout",
            type=request_timeout,
            default=10.0,
            metavar="DURATION",
            help="give up on a request after this long, as kubectl takes it (default 10s)",
        )


def run(args: argparse.Namespace) -> int:
    from live.commands import program
    from live.kube import Kube, LiveError

    try:
        kube = Kube(args.kubeconfig, args.context, args.request_timeout)
        verb = _job_verb if args.command in JOB_VERBS else _pool_verb
        said = verb(kube, args)
    except LiveError as err:
        print(f"{program()} {args.command}: {err}", file=sys.stderr)
        return 1
    print(said)
    return 0


@dataclass(frozen=True)
class _Target:
    """The object a verb writes, as it was read."""

    path: str
    shown: str  # kubectl's name for it: tfjob.kubeflow.org/job3
    obj: Mapping[str, Any]


def _dry(args: argparse.Namespace) -> dict[str, str]:
    return {"dryRun": "All"} if args.dry_run == "server" else {}


def _suffix(args: argparse.Namespace) -> str:
    return {"client": " (dry run)", "server": " (server dry run)"}.get(args.dry_run, "")


def _job_verb(kube: Kube, args: argparse.Namespace) -> str:
    from live.kube import LiveError

    target = _job(kube, args.job, args.namespace or kube.namespace)
    spec = target.obj.get("spec") if isinstance(target.obj.get("spec"), Mapping) else {}
    run_policy = spec.get("runPolicy") if isinstance(spec.get("runPolicy"), Mapping) else {}
    suspended = run_policy.get("suspend") is True or spec.get("suspend") is True
    verb = args.command
    if verb == "delete":
        return _delete(kube, args, target)
    if verb == "suspend":
        ended = _ended(target.obj)
        if ended:
            raise LiveError(f"{target.shown} has {ended}: there is nothing to suspend")
        if suspended:
            return f"{target.shown} is already suspended (no change)"
        patch: dict[str, Any] = {"spec": {"runPolicy": {"suspend": True}}}
    else:
        if not suspended:
            return f"{target.shown} is not suspended (no change)"
        patch = {"spec": {"runPolicy": {"suspend": False}}}
        if spec.get("suspend") is True:  # DRAGON's top-level run-policy layout
            patch["spec"]["suspend"] = False
    if args.dry_run != "client":
        kept = kube.send("PATCH", target.path, patch, MERGE_PATCH, **_dry(args))
        now = ((kept.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True
        if now != (verb == "suspend"):
            raise LiveError(
                f"{target.shown}: the API server did not keep spec.runPolicy.suspend (its "
                f"{target.obj.get('kind')} CRD predates the field: install the current one)"
            )
    return f"{target.shown} {DONE[verb]}{_suffix(args)}"


def _delete(kube: Kube, args: argparse.Namespace, target: _Target) -> str:
    uid = (target.obj.get("metadata") or {}).get("uid")
    options: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Background",
    }
    if uid:
        options["preconditions"] = {"uid": uid}
    if args.dry_run != "client":
        kube.send("DELETE", target.path, options, **_dry(args))
    resource, _, name = target.shown.partition("/")
    return f'{resource} "{name}" deleted{_suffix(args)}'


def _pool_verb(kube: Kube, args: argparse.Namespace) -> str:
    from live.kube import POOLS, LiveError, NotFound

    path = f"{POOLS}/{args.pool}"
    shown = f"trainingpool.dragonet.io/{args.pool}"
    try:
        pool = kube.get(path)
    except NotFound:
        from live.commands import installed

        if installed(kube):
            raise NotFound(f"no TrainingPool {args.pool!r} (kubectl get trainingpools)") from None
        raise NotFound(
            "Dragonet is not installed here: the API server has no TrainingPools "
            "(trainingpools.dragonet.io)"
        ) from None
    wanted = STOP[args.command]
    have = (pool.get("spec") or {}).get("stopPolicy") or "None"
    if have == wanted:
        return f"{shown} is already {DONE[args.command]} (spec.stopPolicy {wanted}; no change)"
    if args.dry_run != "client":
        patch = {"spec": {"stopPolicy": wanted}}
        kept = kube.send("PATCH", path, patch, MERGE_PATCH, **_dry(args))
        if ((kept.get("spec") or {}).get("stopPolicy") or "None") != wanted:
            raise LiveError(
                f"{shown}: the API server did not keep spec.stopPolicy (its TrainingPool CRD "
                "predates the field: install the current one, crd/trainingpools.dragonet.io.yaml)"
            )
    return f"{shown} {DONE[args.command]}{_effect(args.command, pool)}{_suffix(args)}"


def _effect(verb: str, pool: Mapping[str, Any]) -> str:
    """What the pool does now, from the counts of its status."""
    status = pool.get("status") if isinstance(pool.get("status"), Mapping) else {}
    admitted, queued = status.get("admitted"), status.get("queued")
    if verb == "drain" and isinstance(admitted, int):
        return f": it admits no job, and its {admitted} admitted job(s) are preempted"
    if verb == "hold" and isinstance(admitted, int):
        return f": it admits no job; its {admitted} admitted job(s) run to completion"
    if verb == "release" and isinstance(queued, int):
        return f": it admits its {queued} queued job(s) again"
    return ""


def _ended(job: Mapping[str, Any]) -> str:
    """``succeeded`` or ``failed`` for a job whose status says it ended, else ""."""
    status = job.get("status") if isinstance(job.get("status"), Mapping) else {}
    for c in status.get("conditions") or ():
        ended = isinstance(c, Mapping) and c.get("status") == "True"
        if ended and c.get("type") in ("Succeeded", "Failed"):
            return str(c["type"]).lower()
    return ""


def _job(kube: Kube, given: str, namespace: str) -> _Target:
    """The job ``given`` names (``NAME``: of the first kind that has it, in ``KINDS``' order;
    ``tfjob/NAME``, ``tfjobs.kubeflow.org/NAME``... as kubectl names it) in ``namespace``,
    as read now."""
    from live.kube import LiveError, NotFound, job_path, one_of
    from policy.model.kinds import KINDS

    kinds_by_word = {k.kind.lower(): k for k in KINDS}
    names = one_of([k.kind for k in KINDS])
    word, _, name = given.rpartition("/")
    resource, _, group = word.lower().partition(".")
    word = resource.removesuffix("s") if group in ("", "kubeflow.org") else word
    if (word and word not in kinds_by_word) or not name:
        raise LiveError(
            f"{given}: not a {names} (give NAME, tfjob/NAME, mxjob/NAME or "
            "tfjobs.kubeflow.org/NAME)"
        )
    kinds = [kinds_by_word[word]] if word else list(KINDS)
    served = False
    for kind in kinds:
        plural = kind.plural
        path = job_path(plural, namespace, name)
        try:
            obj = kube.get(path)
        except NotFound:
            served = served or _served(kube, plural)
            continue
        obj = {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
        return _Target(path, f"{kind.kind.lower()}.kubeflow.org/{name}", obj)
    said = one_of([k.kind for k in kinds])
    if not served:
        crds = ", ".join(f"{k.plural}.kubeflow.org" for k in kinds)
        raise NotFound(f"the API server has no {said}s ({crds}): the CRDs are not installed")
    raise NotFound(f"no {said} {name!r} in namespace {namespace}")


def _served(kube: Kube, plural: str) -> bool:
    from live.kube import NotFound

    try:
        kube.get(f"/apis/kubeflow.org/v1/{plural}", limit=1)
    except NotFound:
        return False
    return True
