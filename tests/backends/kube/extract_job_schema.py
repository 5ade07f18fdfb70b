"""Regenerate ``job-batch-v1.schema.json``, the schema every Job manifest is checked against.

Source: the ``kubernetes-validate`` package (1.37.0, pinned in requirements-dev.txt), whose
``kubernetes-json-schema/v1.37.0-local-strict/`` files are generated from the OpenAPI v3
document of Kubernetes v1.37 (``api/openapi-spec/v3/apis__batch__v1_openapi.json`` in
kubernetes/kubernetes). "strict" means unknown fields are rejected, as the API server does
with ``fieldValidation=Strict``. The package splits the schema into one file per kind plus a
shared ``_definitions.json`` (1.8 MB); this script keeps only the definitions a batch/v1 Job
reaches, so the file in the tests is self-contained and reviewable.

Run: ``.venv/bin/python -m tests.backends.kube.extract_job_schema``
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

VERSION = "v1.37.0-local-strict"
OUT = Path(__file__).with_name("job-batch-v1.schema.json")
#: The kind file refers into _definitions.json; definitions refer to each other locally.
_PREFIXES = ("/api/_definitions.json#/$defs/", "#/$defs/")


def _name(ref: object) -> str | None:
    for prefix in _PREFIXES:
        if isinstance(ref, str) and ref.startswith(prefix):
            return ref[len(prefix) :]
    return None


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        name = _name(node.get("$ref"))
        found = {name} if name else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _rewrite(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (f"#/$defs/{_name(v)}" if k == "$ref" and _name(v) else _rewrite(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite(v) for v in node]
    return node


def extract() -> dict[str, Any]:
    base = resources.files("kubernetes_validate") / "kubernetes-json-schema" / VERSION
    job = json.loads((base / "job-batch-v1.json").read_text())
    definitions = json.loads((base / "_definitions.json").read_text())["$defs"]
    wanted, todo = set(), _refs(job)
    while todo:
        name = todo.pop()
        wanted.add(name)
        todo |= _refs(definitions[name]) - wanted
    schema = _rewrite(job)
    schema["$comment"] = (
        f"batch/v1 Job from kubernetes-validate 1.37.0 ({VERSION}), generated from the Kubernetes v1.37 "
        "OpenAPI v3 spec; regenerate with tests/backends/kube/extract_job_schema.py"
    )
    schema["$defs"] = {name: _rewrite(definitions[name]) for name in sorted(wanted)}
    return schema


if __name__ == "__main__":
    OUT.write_text(json.dumps(extract(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")
