"""The ValidatingAdmissionPolicies that say what RBAC cannot: which fields a node may write.

RBAC sees verbs, resources and names, never fields or the name of an object being created. So
every write by a node's account (``system:serviceaccount:<ns>:nodemanager-<host>``, or its
client certificate's user ``nodemanager:node:<ns>:<host>``, api/nodecert.py) also passes these
policies, one per resource:

- ManagedNodes: only its own; never ``spec`` (not even on create), finalizers,
  ownerReferences or the maintenance annotation (fencing: api/fencing.py); only the labels the
  agent manages, with values that can be true of it, plus
  ``agent.nodemanager.io/*``; a status whose addresses, keys, ports and fingerprints are
  well-formed (the CRD schema says the same: this is the second lock when an older CRD is in
  place).
- Events: only about its own ManagedNode, created or patched.
- Leases: held only as itself (holderIdentity), so never as another node.
- Nodes (with ``rbac --drain``; RBAC already limits it to the Node of its own name): only
  ``spec.unschedulable`` changes (cordon, uncordon); labels, annotations, taints and the rest of
  the spec stay as they were.
- Tokens: only bound to its own binding Secret and at most MAX_TOKEN_SECONDS long, so deleting
  that Secret (``nodemanager revoke``) revokes every token the node ever minted.
- CertificateSigningRequests (with ``rbac --certificate``; cluster-scoped, no quota, pending
  ones live 24 h): at most MAX_CSR_REQUEST bytes of request and no labels or annotations, so
  a node cannot fill etcd with them (the controller keeps one pending request per node).

The node's own name is never passed in: each rule compares the object against the requesting
user name, so one shared policy serves every node.
"""

from __future__ import annotations

from typing import Any

from nodemanager.api.duration import MAX_LEASE_SECONDS
from nodemanager.api.fencing import MAINTENANCE
from nodemanager.api.nodestatus import (
    MAX_CONFIGSETS,
    MAX_CONFLICTS,
    NO_CONTROL_RE2,
    REVISION_RE2,
)
from nodemanager.api.nodeuser import USER_PREFIX
from nodemanager.host.labels import MANAGED_KEYS

GROUP = "common.nodemanager"
SELF_LABEL_PREFIX = "agent.nodemanager.io/"
POLICY = "nodemanager-node-restriction"
EVENTS_POLICY = "nodemanager-node-events"
LEASES_POLICY = "nodemanager-node-leases"
TOKENS_POLICY = "nodemanager-node-tokens"
NODES_POLICY = "nodemanager-node-cordon"
MAX_TOKEN_SECONDS = 30 * 86400
CSRS_POLICY = "nodemanager-node-csrs"
MAX_CSR_REQUEST = 4096  # bytes; controller/csrapprove.py MAX_REQUEST_BYTES
# Leases share one name space in the namespace: a node's liveness Lease is named after it, a
# group Lease after its group, the fleet controller's election Lease is "nodemanager-controller"
# (controller/manager.py LEADER_LEASE). A node or group of that name would hold the election
# Lease and the controller would never lead; the prefix is kept for the project's own Leases.
RESERVED_PREFIX = "nodemanager-"
RESERVED_NAMES = ("nodemanager-controller",)
# os-release(5): ID is lower-case letters, digits, ".", "_" and "-" (upstream's kubernetes.io/os).
OS_ID_RE2 = "^[a-z0-9._-]+$"

ME = "'system:serviceaccount:' + request.namespace + ':nodemanager-'"
# The same node through its client certificate (bootstrap --certificate).
ME_CERT = f"'{USER_PREFIX}' + request.namespace + ':'"
IS_NODE = (
    f"request.userInfo.username.startsWith({ME}) || "
    f"request.userInfo.username.startsWith('{USER_PREFIX}')"
)
# Shared with the CRD schema (crds/managednodes.yaml) and agent/peers.py.
WG_KEY = "^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"
IFNAME = "^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}$"
HEX_SHA1, HEX_SHA256 = "^[0-9a-f]{40}$", "^[0-9a-f]{64}$"


def _policy(
    name: str,
    rules: list[dict[str, Any]],
    validations: list[dict[str, str]],
    is_node: str = IS_NODE,
) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "nodemanager"}},
            "spec": {
                "failurePolicy": "Fail",
                # With the API server's defaults spelled out: matchConstraints is atomic, so a
                # server-side apply by another field manager would otherwise conflict with them.
                "matchConstraints": {
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {},
                    "objectSelector": {},
                    "resourceRules": rules,
                },
                "matchConditions": [
                    {
                        "name": "is-a-node-account",
                        "expression": is_node,
                    }
                ],
                "validations": [{**v, "reason": "Forbidden"} for v in validations],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "nodemanager"}},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        },
    ]


def _is_me(name: str) -> str:
    """The requester is the node named ``name`` (a CEL expression), by token or certificate."""
    user = "request.userInfo.username"
    return f"({user} == {ME} + {name} || {user} == {ME_CERT} + {name})"


def _rule(group: str, resources: list[str], operations: list[str]) -> dict[str, Any]:
    return {
        "apiGroups": [group],
        "apiVersions": ["*"],
        "operations": operations,
        "resources": resources,
        "scope": "*",
    }


def _same(field: str, empty: str) -> str:
    """``object.<field>`` equals the old object's (absent counts as ``empty``; create: empty)."""
    new = f"(has(object.{field}) ? object.{field} : {empty})"
    old = f"(request.operation == 'UPDATE' && has(oldObject.{field}) ? oldObject.{field} : {empty})"
    return f"{new} == {old}"


def _annotation_kept(key: str) -> str:
    """The annotation ``key`` is neither added, changed nor removed (create: absent)."""
    new = f"(has(object.metadata.annotations) && '{key}' in object.metadata.annotations)"
    old = (
        "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) && "
        f"'{key}' in oldObject.metadata.annotations)"
    )
    return (
        f"{new} == {old} && (!{new} || "
        f"object.metadata.annotations['{key}'] == oldObject.metadata.annotations['{key}'])"
    )


def _status_rules() -> str:
    """Well-formed status data: what other nodes' templates will render into their files."""
    s = "object.status"
    ips = "(!has(i.{f}) || i.{f}.all(a, isIP(a) && ip(a).family() == {n}))"
    interfaces = (
        f"(!has({s}.interfaces) || {s}.interfaces.all(k, k.matches('{IFNAME}') && "
        f"[{s}.interfaces[k]].all(i, {ips.format(f='ipv4', n=4)} && {ips.format(f='ipv6', n=6)})))"
    )
    wireguard = (
        f"(!has({s}.wireGuard) || {s}.wireGuard.all(w, has(w.name) && w.name.matches('{IFNAME}')"
        f" && has(w.publicKey) && w.publicKey.matches('{WG_KEY}')"
        " && (!has(w.listenPort) || (w.listenPort >= 0 && w.listenPort <= 65535))))"
    )
    ssh = (
        f"(!has({s}.sshHostKeys) || {s}.sshHostKeys.all(h, h.algorithm in [1, 2, 3, 4, 6] && "
        f"((h.fingerprintType == 1 && h.fingerprint.matches('{HEX_SHA1}')) || "
        f"(h.fingerprintType == 2 && h.fingerprint.matches('{HEX_SHA256}')))))"
    )
    return f"!has({s}) || ({interfaces} && {wireguard} && {ssh})"


_TOP_TEXT = ("release", "osPrettyName", "agentVersion")


def _text_rules() -> str:
    """Every free-text string a node writes holds no control character, line or paragraph
    separator (api/nodestatus.py's one rule, as the CRD schema says it), and lists are bounded.
    Times are left to the schema's pattern: CEL reads a date-time field as a timestamp."""
    s = "object.status"

    def text(field: str) -> str:
        return f"(!has({field}) || {field}.matches(r'{NO_CONTROL_RE2}'))"

    configset = " && ".join(
        [
            *(text(f"c.{f}") for f in ("name", "resourceVersion", "error")),
            f"(!has(c.revision) || c.revision.matches(r'{REVISION_RE2}'))",
            f"(!has(c.conflicts) || (size(c.conflicts) <= {MAX_CONFLICTS} && "
            f"c.conflicts.all(x, x.matches(r'{NO_CONTROL_RE2}'))))",
        ]
    )
    condition = " && ".join(text(f"c.{f}") for f in ("type", "reason", "message"))
    return (
        f"!has({s}) || ({' && '.join(text(f'{s}.{f}') for f in _TOP_TEXT)} && "
        f"(!has({s}.configsets) || ({s}.configsets.size() <= {MAX_CONFIGSETS} && "
        f"{s}.configsets.all(c, {configset}))) && "
        f"(!has({s}.conditions) || {s}.conditions.all(c, {condition})))"
    )


def managednode_policy() -> list[dict[str, Any]]:
    managed = "[" + ", ".join(f"'{k}'" for k in MANAGED_KEYS) + "]"
    own = f"(k in {managed} || k.startsWith('{SELF_LABEL_PREFIX}'))"
    labels = "(has(object.metadata.labels) ? object.metadata.labels : {})"
    old_labels = (
        "(request.operation == 'UPDATE' && has(oldObject.metadata.labels)"
        " ? oldObject.metadata.labels : {})"
    )
    return _policy(
        POLICY,
        [_rule(GROUP, ["managednodes", "managednodes/status"], ["CREATE", "UPDATE"])],
        [
            {
                "expression": _is_me("object.metadata.name"),
                "message": "a node may only write the ManagedNode named after it",
            },
            {
                "expression": _same("spec", "{}"),
                "message": "spec is set by administrators, not by nodes",
            },
            {
                "expression": _same("metadata.finalizers", "[]")
                + " && "
                + _same("metadata.ownerReferences", "[]"),
                "message": "finalizers and ownerReferences are set by administrators, not by nodes",
            },
            {
                "expression": _annotation_kept(MAINTENANCE),
                "message": f"the annotation {MAINTENANCE} is set by administrators, not by nodes",
            },
            {
                "expression": f"{labels}.all(k, {own} || (k in {old_labels} && "
                f"{old_labels}[k] == {labels}[k]))",
                "message": "a node may only set its managed labels and labels under "
                f"{SELF_LABEL_PREFIX}",
            },
            {
                "expression": f"{old_labels}.all(k, {own} || (k in {labels} && "
                f"{labels}[k] == {old_labels}[k]))",
                "message": "a node may not remove or change labels set by administrators",
            },
            {
                "expression": f"!('kubernetes.io/hostname' in {labels}) || "
                f"{labels}['kubernetes.io/hostname'] == object.metadata.name",
                "message": "label kubernetes.io/hostname must be the node's own name",
            },
            {
                "expression": f"!('kubernetes.io/os' in {labels}) || "
                f"{labels}['kubernetes.io/os'].matches('{OS_ID_RE2}')",
                "message": "label kubernetes.io/os must be an os-release ID (a-z, 0-9, '.', '_', "
                "'-')",
            },
            {
                "expression": _text_rules(),
                "message": "status text holds a control character or line separator, a revision "
                "is not a ControllerRevision name, or a list is longer than allowed",
            },
            {
                "expression": _status_rules(),
                "message": "status holds a malformed address, interface name, WireGuard key, "
                "port or SSHFP fingerprint",
            },
        ],
    )


def events_policy() -> list[dict[str, Any]]:
    def about_me(obj: str) -> str:
        regarding = (
            f"(has({obj}.involvedObject) ? {obj}.involvedObject : "
            f"(has({obj}.regarding) ? {obj}.regarding : {{'kind': '', 'name': ''}}))"
        )
        return (
            f"[{regarding}].all(r, has(r.kind) && r.kind == 'ManagedNode' && has(r.name) && "
            f"{_is_me('r.name')})"
        )

    return _policy(
        EVENTS_POLICY,
        [
            _rule("", ["events"], ["CREATE", "UPDATE"]),
            _rule("events.k8s.io", ["events"], ["CREATE", "UPDATE"]),
        ],
        [
            {
                "expression": about_me("object")
                + f" && (request.operation != 'UPDATE' || {about_me('oldObject')})",
                "message": "a node may only record Events about its own ManagedNode",
            }
        ],
    )


def leases_policy() -> list[dict[str, Any]]:
    reserved = "[" + ", ".join(f"'{n}'" for n in RESERVED_NAMES) + "]"
    return _policy(
        LEASES_POLICY,
        [_rule("coordination.k8s.io", ["leases"], ["CREATE", "UPDATE"])],
        [
            {
                # Group Leases (lock_group, upgrade group) have any name: what a node must not do
                # is hold a Lease as another node, such as another node's liveness Lease.
                "expression": "!has(object.spec.holderIdentity) || object.spec.holderIdentity == ''"
                f" || {_is_me('object.spec.holderIdentity')}",
                "message": "a node may only hold Leases as itself",
            },
            {
                "expression": "!has(object.spec.leaseDurationSeconds) || "
                f"object.spec.leaseDurationSeconds <= {MAX_LEASE_SECONDS}",
                "message": f"a node's Lease lasts at most {MAX_LEASE_SECONDS} s",
            },
            {
                "expression": f"!(object.metadata.name in {reserved}) && "
                f"(!object.metadata.name.startsWith('{RESERVED_PREFIX}') || "
                f"{_is_me('object.metadata.name')})",
                "message": f"Lease names starting {RESERVED_PREFIX} are reserved for the project "
                "(the controller's election Lease)",
            },
        ],
    )


# Nodes are cluster-scoped: the request has no namespace, so any namespace's node account.
NODE_ACCOUNT = "^system:serviceaccount:[^:]+:nodemanager-"
NODE_CERT = f"^{USER_PREFIX}[^:]+:[^:]+$"
NODE_FIELDS = (
    "metadata.labels", "metadata.annotations", "metadata.finalizers", "metadata.ownerReferences",
    "spec.taints", "spec.podCIDR", "spec.podCIDRs", "spec.providerID",
)  # fmt: skip


def _own_node(account: str, before_name: str) -> str:
    user = "request.userInfo.username"
    return (
        f"({user}.matches('{account}') && {user}.endsWith('{before_name}' + object.metadata.name))"
    )


def nodes_policy() -> list[dict[str, Any]]:
    unchanged = " && ".join(
        f"(has(object.{f}) == has(oldObject.{f}) && (!has(object.{f}) || "
        f"object.{f} == oldObject.{f}))"
        for f in NODE_FIELDS
    )
    return _policy(
        NODES_POLICY,
        [_rule("", ["nodes"], ["CREATE", "UPDATE", "DELETE"])],
        [
            {
                "expression": "request.operation == 'UPDATE' && "
                f"({_own_node(NODE_ACCOUNT, ':nodemanager-')} || {_own_node(NODE_CERT, ':')})",
                "message": "a node may only update the Kubernetes Node of its own name",
            },
            {
                "expression": f"request.operation != 'UPDATE' || ({unchanged})",
                "message": "a node may only change spec.unschedulable of its Kubernetes Node",
            },
        ],
        is_node=f"request.userInfo.username.matches('{NODE_ACCOUNT}') || "
        f"request.userInfo.username.matches('{NODE_CERT}')",
    )


def tokens_policy() -> list[dict[str, Any]]:
    ref = "object.spec.boundObjectRef"
    return _policy(
        TOKENS_POLICY,
        [_rule("", ["serviceaccounts/token"], ["CREATE"])],
        [
            {
                "expression": f"has({ref}) && {ref}.kind == 'Secret' && has({ref}.name) && "
                f"request.userInfo.username == 'system:serviceaccount:' + request.namespace + "
                f"':' + {ref}.name",
                "message": "a node's token must be bound to its own binding Secret (revocable)",
            },
            {
                "expression": f"has(object.spec.expirationSeconds) && "
                f"object.spec.expirationSeconds <= {MAX_TOKEN_SECONDS}",
                "message": f"a node's token may live at most {MAX_TOKEN_SECONDS // 86400} days",
            },
        ],
    )


def csrs_policy() -> list[dict[str, Any]]:
    return _policy(
        CSRS_POLICY,
        [_rule("certificates.k8s.io", ["certificatesigningrequests"], ["CREATE"])],
        [
            {
                "expression": f"size(object.spec.request) <= {MAX_CSR_REQUEST}",
                "message": f"a node's certificate request is at most {MAX_CSR_REQUEST} bytes",
            },
            {
                "expression": "!has(object.metadata.labels) && !has(object.metadata.annotations)",
                "message": "a node's certificate request carries no labels or annotations",
            },
        ],
        # Cluster-scoped: no request namespace, so any namespace's node account.
        is_node=f"request.userInfo.username.matches('{NODE_ACCOUNT}') || "
        f"request.userInfo.username.matches('{NODE_CERT}')",
    )


def admission_policies() -> list[dict[str, Any]]:
    return [
        *managednode_policy(),
        *events_policy(),
        *leases_policy(),
        *tokens_policy(),
        *nodes_policy(),
        *csrs_policy(),
    ]


def cluster_scoped(prefix: str, namespace: str, hostname: str) -> str:
    """The name of a node's cluster-scoped object: ``<prefix>-<namespace>.<host>``.

    Named after the namespace too, since two namespaces may each have a node of this name; and
    a dot between them, since a namespace (a DNS label) has none: with a dash, node ``web`` of
    ``prod-eu`` and node ``eu-web`` of ``prod`` shared four names (issue 37)."""
    return f"{prefix}-{namespace}.{hostname}"


KEEP_LABEL = "nodemanager.io/keep"


def namespace_guard(namespace: str, hostname: str) -> list[dict[str, Any]]:
    """One node's guard of its Namespace: DELETE of the Namespace ``namespace`` is refused
    while it carries ``KEEP_LABEL`` and any node's guard exists.

    Each node's `rbac` output holds the Namespace (so that it applies on a fresh cluster) and
    this guard, after the Namespace: `kubectl delete -f` of that output asks to delete the
    Namespace first, while every guard (its own too) still stands, and is refused; then it
    deletes this node's guard and objects. A shared guard could not do it: the first delete
    would remove it for everyone, and policies cannot guard policies (the API server exempts
    admission objects from admission). Removing the label lets an administrator delete it."""
    name = cluster_scoped("nodemanager-guard", namespace, hostname)
    labels = {"app.kubernetes.io/name": "nodemanager"}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {},
                    "objectSelector": {},
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["DELETE"],
                            "resources": ["namespaces"],
                            "resourceNames": [namespace],
                            "scope": "*",
                        }
                    ],
                },
                "validations": [
                    {
                        "expression": f"!has(oldObject.metadata.labels) || "
                        f"!('{KEEP_LABEL}' in oldObject.metadata.labels)",
                        "message": f"namespace {namespace} holds nodemanager's nodes and is kept "
                        "when one node's `rbac` output is deleted; to delete it: "
                        f"kubectl label namespace {namespace} {KEEP_LABEL}-",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {},
                    "objectSelector": {},
                },
            },
        },
    ]
