"""`spec.notifies[]`: annotate other objects after a ConfigSet applied.

As upstream: after a ConfigSet applied cleanly, ``nodemanager.io/notify-<configset>`` is set to
its generation on each target (so a target changes once per ConfigSet change). Ours, opt-in
(``--notify-on-change``): ``notified-at`` / ``notified-by`` each time it changed this host.

Any kind the API server serves can be a target, so the kind is resolved through discovery (the
dynamic client, built once per credential). The annotations say which node applied which
ConfigSet version and when; a controller or a person watching the target sees it change. The
node's account needs `patch` on the targets: `nodemanager rbac` cannot know them, the admin
grants it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping

from kubernetes import dynamic
from kubernetes.client.exceptions import ApiException

from nodemanager.kube.client import FIELD_MANAGER, ClientFactory
from nodemanager.kube.errors import translate

log = logging.getLogger(__name__)
NOTIFIED_AT = "nodemanager.io/notified-at"
NOTIFIED_BY = "nodemanager.io/notified-by"
_NAME_MAX = 63  # an annotation key's name part


def notify_key(configset: str) -> str:
    """Upstream's key, ``nodemanager.io/notify-<configset>`` (its value: the generation).

    A ConfigSet name may be longer than a key's 63-character name part (upstream's patch then
    fails); such a name is cut and ends with 8 hex digits of its sha256, so it stays unique."""
    name = f"notify-{configset}"
    if len(name) > _NAME_MAX:
        digest = hashlib.sha256(configset.encode()).hexdigest()[:8]
        name = f"{name[: _NAME_MAX - 9].rstrip('-.')}-{digest}"
    return f"nodemanager.io/{name}"


class Notifier:
    def __init__(self, clients: ClientFactory):
        self.clients = clients
        self._dynamic: tuple[object, dynamic.DynamicClient] | None = None

    def _client(self) -> dynamic.DynamicClient:
        api = self.clients.get()
        if (
            self._dynamic is None or self._dynamic[0] is not api
        ):  # credentials rotated: discover again
            self._dynamic = (api, dynamic.DynamicClient(api))
        return self._dynamic[1]

    def annotate(
        self,
        api_version: str,
        kind: str,
        name: str | None,
        namespace: str | None,
        annotations: Mapping[str, str],
    ) -> None:
        """Merge ``annotations`` into the target's metadata; without ``name``, into every object
        of that kind in the namespace (upstream's rule; the account then needs `list` too).
        Raises KubeError, or LookupError for a kind the server does not serve."""
        try:
            resource = self._client().resources.get(api_version=api_version, kind=kind)
        except (
            dynamic.exceptions.ResourceNotFoundError,
            dynamic.exceptions.ResourceNotUniqueError,
        ) as e:
            raise LookupError(f"{api_version} {kind} is not served by the API server") from e
        where = namespace if resource.namespaced else None
        try:
            names = (
                [name]
                if name
                else [item.metadata.name for item in resource.get(namespace=where).items]
            )
            for each in names:
                resource.patch(
                    body={"metadata": {"annotations": dict(annotations)}},
                    name=each,
                    namespace=where,
                    content_type="application/merge-patch+json",
                    field_manager=FIELD_MANAGER,
                )
        except ApiException as e:  # the dynamic client's errors are ApiExceptions too
            raise translate(e) from e
