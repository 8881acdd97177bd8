"""kfed's CRDs agree with upstream Kueue's, and every difference is written down.

For each kind, against upstream's generated v1beta2 CRD (Kueue v0.19.2, kept beside the
repository, or v0.17.0's from the Go module cache for the kinds that copy lacks; see
``tests/references.py``):

- every field kfed declares exists upstream with the same type, format, enum and default;
- kfed requires no field that upstream does not;
- every upstream field kfed does not declare is listed in docs/api.md's table of
  unsupported fields (or lies under a part of kfed's schema that keeps unknown fields);
- every entry of that table is really absent from kfed and present upstream.

And docs/api.md mentions every field kfed declares.

Also against the upstream release ``make binaries`` builds for the interop tests (v0.17.0, so
it runs in CI where the reference copy is absent): kfed serves all of it, the same way, and
requires nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import binaries
from manager.api import crdgen
from manager.api.kinds import KUEUE_KINDS
from manager.api.meta import KubeObject
from tests import references

REPO = Path(__file__).resolve().parents[3]
UPSTREAM = references.UPSTREAM_CRDS
API_DOC = REPO / "docs" / "api.md"

NOT_IN_THE_REFERENCE_COPY = frozenset({"Topology", "ProvisioningRequestConfig"})
"""Kinds the v0.19.2 copy beside the checkout lacks. Only these are compared with v0.17.0's
CRDs: the other kinds have fields added after v0.17.0 (concurrentAdmissionPolicy...)."""

KINDS = pytest.mark.parametrize("kind", KUEUE_KINDS, ids=lambda k: k.__name__)


def _flatten(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, node) for every node; lists add ``[]`` and maps ``{}`` to the path."""
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _flatten(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _flatten(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _flatten(schema["additionalProperties"], f"{path}{{}}")


def _shape(node: dict[str, Any]) -> dict[str, Any]:
    """What must agree: type (int-or-string counts as one type), format, enum, default."""
    return {
        "type": "int-or-string" if node.get("x-kubernetes-int-or-string") else node.get("type"),
        "format": node.get("format"),
        "enum": sorted(node["enum"]) if "enum" in node else None,
        "default": node.get("default"),
    }


def _upstream(kind: type[KubeObject]) -> dict[str, dict[str, Any]]:
    path = UPSTREAM / crdgen.file_name(kind)
    if kind.resource.kind in NOT_IN_THE_REFERENCE_COPY:  # v0.17.0's, from the module cache
        path = references.UPSTREAM_MODULE_CRDS / crdgen.file_name(kind)
    if reason := references.missing(path, "upstream's reference CRD"):
        pytest.skip(reason)
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return dict(_flatten(version["schema"]["openAPIV3Schema"]))


def _built_release(kind: type[KubeObject]) -> dict[str, dict[str, Any]]:
    """Upstream's CRD from the release ``make binaries`` builds for the interop tests
    (``e2e/binaries/build-kueue.sh``, v0.17.0): there wherever ``make test`` ran, CI included,
    unlike the reference copy beside the checkout."""
    try:
        source = binaries.kueue_dir("kueue") / "src"
    except binaries.BinariesMissing as err:
        pytest.skip(str(err))
    path = source / "config" / "components" / "crd" / "bases" / crdgen.file_name(kind)
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return dict(_flatten(version["schema"]["openAPIV3Schema"]))


def _ours(kind: type[KubeObject]) -> dict[str, dict[str, Any]]:
    return dict(_flatten(crdgen.openapi_schema(kind)))


def _unsupported() -> dict[str, set[str]]:
    """The table between the unsupported-fields markers in docs/api.md, by kind."""
    text = API_DOC.read_text()
    block = re.search(
        r"<!-- unsupported-fields:begin -->(.*)<!-- unsupported-fields:end -->", text, re.S
    )
    assert block, "docs/api.md lost its unsupported-fields table"
    table: dict[str, set[str]] = {}
    for kind, field in re.findall(r"^\| (\w+) \| `([^`]+)` \|", block.group(1), re.M):
        table.setdefault(kind, set()).add(field)
    return table


def _under(path: str, prefixes: set[str]) -> bool:
    return any(path == p or path.startswith((f"{p}.", f"{p}[]", f"{p}{{}}")) for p in prefixes)


@KINDS
def test_every_kfed_field_matches_upstream(kind: type[KubeObject]) -> None:
    upstream = _upstream(kind)
    mismatches = []
    for path, node in _ours(kind).items():
        if path not in upstream:
            mismatches.append(f"{path}: not an upstream field")
        elif _shape(node) != _shape(upstream[path]):
            mismatches.append(f"{path}: kfed {_shape(node)} != upstream {_shape(upstream[path])}")
    assert not mismatches, "\n".join(mismatches)


@KINDS
def test_a_superset_of_the_built_upstream_release(kind: type[KubeObject]) -> None:
    """Every field of upstream's released CRD is served by kfed with the same type, format,
    enum and default, and kfed requires nothing more (unless kfed keeps unknown fields
    there: the Workload's pod template)."""
    upstream = _built_release(kind)
    ours = _ours(kind)
    kept = {path for path, node in ours.items() if node.get("x-kubernetes-preserve-unknown-fields")}
    problems = []
    for path, node in upstream.items():
        if _under(path, kept) and path not in ours:
            continue
        if path not in ours:
            problems.append(f"{path}: not served by kfed")
        elif _shape(ours[path]) != _shape(node):
            problems.append(f"{path}: kfed {_shape(ours[path])} != upstream {_shape(node)}")
        elif extra := set(ours[path].get("required", [])) - set(node.get("required", [])):
            problems.append(f"{path}: kfed also requires {sorted(extra)}")
    assert not problems, "\n".join(problems)


@KINDS
def test_kfed_requires_nothing_upstream_does_not(kind: type[KubeObject]) -> None:
    """What upstream's schema accepts, kfed's must: no field is required here that is not
    there (found by the interop field corpus: kfed required status.admission.clusterQueue)."""
    upstream = _upstream(kind)
    stricter = {
        path or "<root>": sorted(extra)
        for path, node in _ours(kind).items()
        if path in upstream
        and (extra := set(node.get("required", [])) - set(upstream[path].get("required", [])))
    }
    assert not stricter, f"required by kfed only: {stricter}"


@KINDS
def test_every_upstream_field_is_served_or_documented(kind: type[KubeObject]) -> None:
    upstream = _upstream(kind)
    ours = _ours(kind)
    kept = {path for path, node in ours.items() if node.get("x-kubernetes-preserve-unknown-fields")}
    listed = _unsupported().get(kind.resource.kind, set())
    undocumented = [
        path
        for path in upstream
        if path not in ours and not _under(path, listed) and not _under(path, kept)
    ]
    assert not undocumented, (
        "upstream fields neither served nor listed in docs/api.md:\n" + "\n".join(undocumented)
    )


@KINDS
def test_documented_gaps_are_real(kind: type[KubeObject]) -> None:
    upstream = _upstream(kind)
    ours = _ours(kind)
    for path in _unsupported().get(kind.resource.kind, set()):
        assert path in upstream, f"docs/api.md lists {path}, which upstream does not have"
        assert path not in ours, f"docs/api.md lists {path} as unsupported, but kfed serves it"


OUR_EXTRA_SHORT_NAMES = {"Workload": {"wl"}}
"""Short names kfed serves beyond upstream v0.19.2's (docs/api.md, Presentation): ``wl``, as
upstream's development branch has it."""


@KINDS
def test_short_names_and_selectable_fields_are_upstreams(kind: type[KubeObject]) -> None:
    """Every short name upstream's CRD gives the kind is kfed's too (kfed adds only the ones
    listed above), and a list may select on the same fields (``selectableFields``)."""
    if kind.resource.kind in NOT_IN_THE_REFERENCE_COPY:
        pytest.skip("not in the v0.19.2 copy; test_api_crds pins upstream's short name")
    path = UPSTREAM / crdgen.file_name(kind)
    if reason := references.missing(path, "upstream's reference CRD"):
        pytest.skip(reason)
    theirs = yaml.safe_load(path.read_text())["spec"]
    ours = crdgen.crd(kind)["spec"]
    their_names = set(theirs["names"].get("shortNames", []))
    our_names = set(ours["names"].get("shortNames", []))
    assert their_names <= our_names, f"upstream's short names kfed lacks: {their_names - our_names}"
    assert our_names - their_names == OUR_EXTRA_SHORT_NAMES.get(kind.resource.kind, set())
    (their_version,) = [v for v in theirs["versions"] if v["name"] == "v1beta2"]
    (our_version,) = ours["versions"]
    assert our_version.get("selectableFields", []) == their_version.get("selectableFields", [])


def test_the_unsupported_table_names_only_served_kinds() -> None:
    assert set(_unsupported()) <= {k.resource.kind for k in KUEUE_KINDS}


@KINDS
def test_docs_describe_every_field(kind: type[KubeObject]) -> None:
    text = API_DOC.read_text()
    template = ".spec.podSets[].template"
    missing = []
    for path in _ours(kind):
        if path in ("", ".apiVersion", ".kind", ".metadata") or path.endswith(("{}", "[]")):
            continue
        if ".conditions[]." in path:
            documented = f"`{path.rsplit('.', 1)[-1]}`" in text  # the shared Conditions table
        elif path.startswith(template + "."):
            documented = f"`{path[len(template) :]}`" in text  # the Pod template table
        else:
            documented = f"`{path}`" in text
        if not documented:
            missing.append(path)
    assert not missing, "fields missing from docs/api.md:\n" + "\n".join(missing)
