"""Built-in kinds through the generic path (kube/plain.py): the requests the agent makes at rest
reach a real HTTP server as the typed client sent them, and the typed CoreV1Api / AppsV1Api
modules (about 280 model classes, 25 MB of RSS) are never loaded."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nodemanager.kube.plain import _query_name

TYPED = ["kubernetes.client.api.core_v1_api", "kubernetes.client.api.apps_v1_api"]

# In a fresh process: every built-in-kind call the agent makes while it runs.
CALLS = """
import json, sys
from nodemanager.kube.client import ClientFactory
from nodemanager.kube import policycheck, tokens, watches
from nodemanager.kube.nodes import NodeClient
from nodemanager.kube.rollouts import RolloutClient

clients = ClientFactory(sys.argv[1])
api = clients.get()
BOUND = ("b", "u1")
node = NodeClient(clients, "ns", "host-1")
out = {
    "secret": node.secret_value("creds", "password"),
    "absent": node.secret_value("missing", "password"),
    "token": [str(v) for v in tokens.request_token(api, "ns", "nodemanager-host-1", 600, BOUND)],
    "revisions": RolloutClient(clients, "ns").revisions("web", "nodemanager.io/configset"),
    "lists": [watches.SECRETS.lister(api)(namespace="ns", label_selector="a=b")["items"],
              watches.CONFIGMAPS.lister(api)(namespace="ns")["items"]],
}
node.events.record({"kind": "ManagedNode", "name": "host-1"}, "Applied", "ok")
node.events.record({"kind": "ManagedNode", "name": "host-1"}, "Applied", "again")
policycheck._event(api, "ns", "host-1")
policycheck._token(api, "ns", "host-1")
out["typed"] = sorted(m for m in sys.modules if m in %r)
print(json.dumps(out))
"""


class Handler(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.seen.append(
            {
                "method": self.command,
                "path": self.path,
                "type": self.headers.get("Content-Type"),
                "body": body,
            }
        )
        path = self.path.split("?")[0]
        status, answer = 200, {"metadata": {"resourceVersion": "7"}, "items": []}
        if "missing" in path:
            status, answer = 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
        elif path.endswith("/secrets/creds"):
            answer = {"data": {"password": "c2VjcmV0"}}  # "secret"
        elif path.endswith("/token"):
            answer = {"status": {"token": "t0k", "expirationTimestamp": "2026-11-27T09:00:00Z"}}
        elif path.endswith("/controllerrevisions"):
            answer = {"items": [{"metadata": {"name": "web-1"}, "revision": 1}]}
        elif self.command == "PATCH":
            answer = {"count": 1}
        elif self.command == "POST":
            status, answer = 201, body
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Handler.seen = []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_agent_calls_reach_the_server_without_the_typed_modules(server, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-c", CALLS % (TYPED,), str(kubeconfig)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["typed"] == []
    assert out["secret"] == "secret" and out["absent"] is None
    assert out["token"] == ["t0k", "2026-11-27 09:00:00+00:00"]
    assert out["revisions"] == [{"metadata": {"name": "web-1"}, "revision": 1}]
    assert out["lists"] == [[], []]

    requests = {(r["method"], r["path"]): r for r in Handler.seen}
    assert ("GET", "/api/v1/namespaces/ns/secrets?labelSelector=a%3Db") in requests
    assert ("GET", "/api/v1/namespaces/ns/configmaps") in requests
    revisions = "/apis/apps/v1/namespaces/ns/controllerrevisions"
    assert ("GET", f"{revisions}?labelSelector=nodemanager.io/configset%3Dweb") in requests
    token = requests["POST", "/api/v1/namespaces/ns/serviceaccounts/nodemanager-host-1/token"]
    assert token["body"]["spec"] == {
        "audiences": [],
        "expirationSeconds": 600,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": "b", "uid": "u1"},
    }
    # The recorder's create, then its patch of the same Event (count and message move).
    events = [r for r in Handler.seen if "/events" in r["path"] and "dryRun" not in r["path"]]
    assert [r["method"] for r in events] == ["POST", "PATCH"]
    assert events[0]["body"]["involvedObject"]["name"] == "host-1"
    assert events[1]["type"] == "application/strategic-merge-patch+json"
    assert events[1]["body"]["count"] == 2 and events[1]["body"]["message"] == "again"
    # The policy self-test's probes are dry runs.
    dry = [r["path"] for r in Handler.seen if r["path"].endswith("?dryRun=All")]
    assert dry == [
        "/api/v1/namespaces/ns/events?dryRun=All",
        "/api/v1/namespaces/ns/serviceaccounts/nodemanager-host-1/token?dryRun=All",
    ]


def test_query_names_are_the_urls():
    assert _query_name("label_selector") == "labelSelector"
    assert _query_name("allow_watch_bookmarks") == "allowWatchBookmarks"
    assert _query_name("_continue") == "continue"
    assert _query_name("watch") == "watch"
