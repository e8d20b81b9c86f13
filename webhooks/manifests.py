"""Reading the files users hand the CLI: job manifests and cluster (nodes) files.

A nodes file holds real ``v1`` Node objects (one per document, or a ``List``), or the
short form ``nodes: [{name, cpu, memory, gpu, pods, labels, taints}]`` for examples.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ShortNode(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    cpu: str | int = "8"
    memory: str = "32Gi"
    gpu: int = 0
    pods: int = 110
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, str]] = Field(default_factory=list)
    unschedulable: bool = False

    def to_node(self) -> dict[str, Any]:
        allocatable: dict[str, Any] = {
            "cpu": str(self.cpu),
            "memory": self.memory,
            "pods": str(self.pods),
        }
        if self.gpu:
            allocatable["nvidia.com/gpu"] = str(self.gpu)
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = self.taints
        if self.unschedulable:
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {"kubernetes.io/hostname": self.name, **self.labels},
            },
            "spec": spec,
            "status": {
                "allocatable": allocatable,
                "capacity": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }


class ManifestError(ValueError):
    """A file the CLI cannot use; the message names the file and the line."""


def not_utf8(path: str | Path, err: UnicodeDecodeError) -> str:
    """A file that is not UTF-8 text, named, with where its first bad byte is."""
    return (
        f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
        "save it as UTF-8"
    )


STDIN = "-"


def read_text(path: str | Path) -> str:
    """A file's text (``-``: standard input's); one that is not UTF-8 is a
    ``ManifestError`` naming it."""
    try:
        if str(path) == STDIN:
            raw = getattr(sys.stdin, "buffer", None)  # a text stream without bytes: as read
            return raw.read().decode("utf-8") if raw is not None else sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ManifestError(not_utf8(shown(path), err)) from None


def shown(path: str | Path) -> str | Path:
    """A path as messages name it: standard input as ``<stdin>``."""
    return "<stdin>" if str(path) == STDIN else path


def located_documents(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """Every object in a YAML file with the line it starts on, ``List`` items flattened.

    Malformed YAML raises ``ManifestError`` naming the file and line, never a traceback."""
    return located_in(io.StringIO(read_text(path)), shown(path))


def located_in(fh: Any, path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """``located_documents`` of an open stream (stdin), named ``path`` in messages."""
    out: list[tuple[int, dict[str, Any]]] = []
    loader = yaml.SafeLoader(fh)
    try:
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1 if node is not None else 0
            doc = loader.construct_document(node) if node is not None else None
            if not doc:
                continue
            if not isinstance(doc, dict):
                raise ManifestError(f"{path}:{line}: every YAML document must be a mapping")
            kind = doc.get("kind")
            if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
                out.extend((line, item) for item in doc["items"] or [])
            else:
                out.append((line, doc))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ManifestError(f"{where}: not valid YAML: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise ManifestError(f"{path}: not valid YAML: {err}") from None
    finally:
        loader.dispose()
    return out


def load_documents(path: str | Path) -> list[dict[str, Any]]:
    """Every object in a YAML file, with ``List`` objects flattened."""
    return [doc for _, doc in located_documents(path)]


LEGACY_TFJOB = "tensorflow.org"
# What a job file is read for: the kinds Dragonet runs (``policy.model.kinds.KINDS``), the
# legacy TfJob, and anything of the training operators' API groups (an XGBoostJob is refused
# with a reason, not skipped). Anything else in a bundle (a ConfigMap, a Service) is skipped
# with a line by the commands that read bundles.
LEGACY_KINDS = ("TfJob",)
JOB_GROUPS = ("kubeflow.org", LEGACY_TFJOB, "fioravanzo.org")


def skipped_line(path: str | Path, line: int | str, doc: Mapping[str, Any]) -> str | None:
    """One line for an object that is no training job, which a bundle may hold; None for
    a job of any version or of a training operator's group."""
    from policy.model.kinds import BY_KIND, kinds_text

    kind = doc.get("kind")
    group = str(doc.get("apiVersion", "")).partition("/")[0]
    if kind in LEGACY_KINDS or (isinstance(kind, str) and kind in BY_KIND) or group in JOB_GROUPS:
        return None
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    what = f"{kind} {name}" if name else f"kind {kind!r}"
    return f"{path}:{line}: skipped {what}: not a {kinds_text()}"


def check_fields(path: str | Path, line: int | str, doc: Mapping[str, Any]) -> None:
    """An object of one of our CRDs (a TFJob, an MXJob, a TrainingPool) with a field its CRD
    does not declare or a value of the wrong type is refused as ``kubectl apply`` with strict
    field validation would be: the file, the field's line and path, what is wrong."""
    from policy.model.apischema import path_text
    from policy.model.crdcheck import line_of, problem_of

    problem = problem_of(doc)
    if problem is None:
        return
    where, what = problem
    at = line
    if isinstance(line, int) and str(path) != STDIN:
        with contextlib.suppress(OSError, ManifestError, yaml.YAMLError):
            at = line_of(read_text(path), line, where)
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    what_obj = f"{doc.get('kind')} {name}" if isinstance(name, str) else str(doc.get("kind"))
    field = f"{path_text(where)}: " if where else ""
    raise ManifestError(f"{path}:{at}: {what_obj}: {field}{what}")


def load_pool(path: str | Path) -> dict[str, Any]:
    """The one TrainingPool of a file, checked against its CRD."""
    located = [(line, d) for line, d in located_documents(path) if d.get("kind") == "TrainingPool"]
    if len(located) != 1:
        raise ManifestError(f"{path}: expected one TrainingPool, found {len(located)}")
    line, pool = located[0]
    check_fields(path, line, pool)
    return pool


def refuse_unsupported(path: str | Path, line: int | str, doc: Mapping[str, Any]) -> None:
    """A job manifest Dragonet cannot run yet is refused with what to do, not skipped."""
    from policy.model.kinds import KINDS, kind_of, kinds_text

    kind, api = doc.get("kind"), str(doc.get("apiVersion", ""))
    if kind_of(doc) is not None:
        meta = doc.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            raise ManifestError(f"{path}:{line}: metadata.name: a {kind} needs a name")
        if not isinstance(meta.get("namespace", ""), str):
            raise ManifestError(f"{path}:{line}: metadata.namespace: must be a string")
        check_fields(path, line, doc)
        return
    where = f"{path}:{line}: kind {kind!r} (apiVersion {api!r})"
    right = next(
        (k.kind for k in KINDS if isinstance(kind, str) and k.singular == kind.lower()), ""
    )
    if right and api == "kubeflow.org/v1":
        raise ManifestError(
            f'{where}: kubeflow.org/v1 has no kind {kind!r} (did you mean "{right}"? kinds '
            "are case-sensitive)"
        )
    if kind == "TfJob" or (kind == "TFJob" and api.startswith(LEGACY_TFJOB)):
        raise ManifestError(
            f"{where}: the legacy tf-operator TfJob is not supported as it is; convert it "
            f"to a kubeflow.org/v1 TFJob with 'dragonet convert {path} > new.yaml'"
        )
    if kind == "MXJob":
        raise ManifestError(
            f"{where}: the legacy MXNet-operator MXJob is not supported as it is; convert it "
            f"to a kubeflow.org/v1 MXJob with 'dragonet convert {path} > new.yaml'"
        )
    raise ManifestError(
        f"{where}: not a training job (expected apiVersion kubeflow.org/v1, kind {kinds_text()})"
    )


def load_jobs(
    path: str | Path, skipped: list[str] | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """The TFJobs and MXJobs of a job file with their lines; an empty file is refused.
    Another kind is refused too, unless ``skipped`` is given: then it is left out and a
    line saying so is added there (a file with no job left is still refused)."""
    docs = located_documents(path)
    path = shown(path)
    if not docs:
        raise ManifestError(f"{path}: no objects in this file (empty?)")
    if skipped is not None:
        lines = {line: said for line, doc in docs if (said := skipped_line(path, line, doc))}
        skipped.extend(lines.values())
        docs = [(line, doc) for line, doc in docs if line not in lines]
        if not docs:
            from policy.model.kinds import kinds_text

            raise ManifestError(f"{path}: no {kinds_text()} in this file")
    for line, doc in docs:
        refuse_unsupported(path, line, doc)
    return docs


# The short form's fields, in the words a message uses for what each must be.
SHORT_NODE_FIELDS = {
    "name": "the node's name",
    "cpu": "cores, e.g. 8 or 500m (default 8)",
    "memory": "a quantity, e.g. 32Gi (default 32Gi)",
    "gpu": "a whole number of nvidia.com/gpu (default 0)",
    "pods": "a whole number of pods it may run (default 110)",
    "labels": "a mapping of label to value",
    "taints": "a list of {key, value, effect}",
    "unschedulable": "true or false (default false)",
}


def short_node_lines(path: str | Path) -> dict[int, list[int]]:
    """For each document of a file holding a ``nodes:`` list, the line each item starts on,
    keyed by the document's first line (as ``located_documents`` numbers it)."""
    roots = list(yaml.compose_all(read_text(path), Loader=yaml.SafeLoader))
    found: dict[int, list[int]] = {}
    for root in roots:
        if not isinstance(root, yaml.MappingNode):
            continue
        for key, value in root.value:
            if key.value == "nodes" and isinstance(value, yaml.SequenceNode):
                found[root.start_mark.line + 1] = [i.start_mark.line + 1 for i in value.value]
    return found


def short_node(where: str, raw: Any) -> dict[str, Any]:
    """One node of the short form as a v1 Node; every problem of it in one line naming each
    unknown field with the known ones, or what a field must be."""
    known = ", ".join(SHORT_NODE_FIELDS)
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{where}: each node must be a mapping of {known}")
    unknown = [str(k) for k in raw if k not in SHORT_NODE_FIELDS]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise ManifestError(
            f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {names} (known: {known})"
        )
    try:
        return ShortNode.model_validate(raw).to_node()
    except ValidationError as err:
        said = []
        for e in err.errors():
            field = str(e["loc"][0]) if e["loc"] else "?"
            if e["type"] == "missing":
                said.append(f"{field}: required ({SHORT_NODE_FIELDS.get(field, field)})")
            else:
                got = raw.get(field)
                said.append(f"{field}: must be {SHORT_NODE_FIELDS.get(field, field)}, not {got!r}")
        raise ManifestError(f"{where}: {'; '.join(dict.fromkeys(said))}") from None


def short_nodes(path: str | Path, line: int, items: Any, lines: list[int]) -> list[dict[str, Any]]:
    """The ``nodes:`` list of a document that starts on ``line``; each problem is named by
    the line its node starts on (``lines``: from ``short_node_lines``)."""
    if not isinstance(items, list):
        raise ManifestError(f"{path}:{line}: nodes: must be a list of nodes")
    located = [
        (where, short_node(where, raw))
        for i, raw in enumerate(items)
        for where in [f"{path}:{lines[i] if i < len(lines) else line}: nodes[{i}]"]
    ]
    return checked_nodes(located)


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# A short-form node's problems named by its own fields, not the Node's it becomes.
_SHORT_WORDS = {
    "status.capacity['cpu']": "cpu",
    "status.capacity['memory']": "memory",
    "status.capacity['pods']": "pods",
    "status.capacity['nvidia.com/gpu']": "gpu",
    "spec.taints": "taints",
}


def node_problem(node: Mapping[str, Any]) -> str | None:
    """What the API server would refuse in a Node, or what would make the pool drop it
    in silence: a name, quantities that parse and are not negative, taints with a key and
    one of the three effects (a misspelt effect would otherwise taint nothing)."""
    from policy.model.resources import to_milli

    meta = node.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return "metadata.name: a Node needs a name"
    status = node.get("status") or {}
    for part in ("capacity", "allocatable"):
        amounts = status.get(part) if isinstance(status, Mapping) else None
        if amounts is None:
            continue
        if not isinstance(amounts, Mapping):
            return f"status.{part}: must be a map of resource name to quantity"
        for name, value in amounts.items():
            try:
                to_milli(value)
            except (ValueError, TypeError, ArithmeticError):
                return (
                    f"status.{part}[{name!r}]: {value!r} is not a quantity the API server "
                    'takes (a non-negative number, or one with a suffix such as "500m", '
                    '"64Gi", "64G")'
                )
    taints = (node.get("spec") or {}).get("taints") or []
    if not isinstance(taints, list):
        return "spec.taints: must be a list of {key, value, effect}"
    for i, taint in enumerate(taints):
        if not isinstance(taint, Mapping) or not taint.get("key"):
            return f"spec.taints[{i}].key: required"
        effect = taint.get("effect")
        if effect not in TAINT_EFFECTS:
            close = difflib.get_close_matches(str(effect), TAINT_EFFECTS, n=1)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            return (
                f"spec.taints[{i}].effect: {effect!r} is not a taint effect "
                f"({hint}one of {', '.join(TAINT_EFFECTS)})"
            )
    return None


def load_nodes(path: str | Path) -> list[dict[str, Any]]:
    """The nodes of a cluster file; an empty or unreadable one is refused, and so is a node
    the API server would refuse or a name given twice (the second would replace the first)."""
    nodes: list[tuple[str, dict[str, Any]]] = []
    docs = located_documents(path)
    if not docs:
        raise ManifestError(f"{path}: no nodes in this file (empty?)")
    item_lines: dict[int, list[int]] | None = None
    for line, doc in docs:
        if "nodes" in doc and "kind" not in doc:
            if item_lines is None:
                item_lines = short_node_lines(path)
            lines = item_lines.get(line, [])
            for i, node in enumerate(short_nodes(path, line, doc["nodes"] or [], lines)):
                nodes.append((f"{path}:{lines[i] if i < len(lines) else line}: nodes[{i}]", node))
        elif doc.get("kind") == "Node":
            nodes.append((f"{path}:{line}: Node", doc))
        else:
            raise ManifestError(f"{path}:{line}: expected Node objects or a 'nodes:' list")
    if not nodes:
        raise ManifestError(f"{path}: no nodes in this file")
    return checked_nodes(nodes)


def checked_nodes(nodes: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Nodes with where each was written: one the API server would refuse, or a name given
    twice (the second would replace the first), is refused there."""
    seen: dict[str, str] = {}
    for where, node in nodes:
        problem = node_problem(node)
        if problem is not None:
            if not where.endswith(": Node"):  # the short form: in the words of its fields
                for long, short in _SHORT_WORDS.items():
                    problem = problem.replace(long, short)
            raise ManifestError(f"{where}: {problem}")
        name = node["metadata"]["name"]
        if name in seen:
            raise ManifestError(f"{where}: a second node named {name!r} (the first: {seen[name]})")
        seen[name] = where
    return [node for _, node in nodes]
