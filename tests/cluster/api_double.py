"""ApiServerDouble: a recording HTTP test double of the few Kubernetes API endpoints that the
node lifecycle uses. Not an API server: it knows Nodes, Pods on a Node, evictions, and nothing else.

It serves real HTTP on 127.0.0.1, so the official client's requests, paths, content types and
error handling are exercised; each request is recorded for assertions. State is plain JSON as
the API server would return it. Behaviours a test needs are switches:
- `blocked_by_pdb`: pod keys whose eviction is refused with 429 (as a PodDisruptionBudget does);
- `failures`: (method, path) -> (status, Status message), an API error injected once per call;
- `register_after_reads`: a Node that appears only after that many reads of it (a joining kubelet);
- `terminate_on_eviction`: False plays a Node whose kubelet is gone: an evicted pod gets its
  deletionTimestamp and stays, as nobody stops its containers;
- `rights`: bearer token -> the (verb, group, resource, subresource) it may use, answered through
  SelfSubjectAccessReviews; a token not listed does not authenticate (401);
- `services`: "namespace/name" -> Service, for reads (the kube-dns Service);
- `tls`: a server-side SSL context: the double then serves HTTPS with its certificate.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Json = dict[str, Any]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str | None
    authorization: str | None
    body: Any


def node(name: str, labels: dict[str, str], ready: str = "True", taints: list[Json] | None = None) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels), "resourceVersion": "1"},
        "spec": {"taints": list(taints or [])},
        "status": {
            "nodeInfo": {"kubeletVersion": "v1.30.14"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "KubeletReady" if ready == "True" else "KubeletNotReady",
                    "message": "kubelet is posting ready status"
                    if ready == "True"
                    else "container runtime network not ready",
                },
            ],
        },
    }


def pod(namespace: str, name: str, node_name: str, owner_kind: str | None = None, phase: str = "Running") -> Json:
    metadata: Json = {"namespace": namespace, "name": name}
    if owner_kind:
        metadata["ownerReferences"] = [{"kind": owner_kind, "name": f"{name}-owner", "controller": True}]
    return {"metadata": metadata, "spec": {"nodeName": node_name}, "status": {"phase": phase}}


def status(code: int, message: str, reason: str = "") -> Json:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass
class ApiServerDouble:
    nodes: dict[str, Json] = field(default_factory=dict)
    pods: list[Json] = field(default_factory=list)
    blocked_by_pdb: set[str] = field(default_factory=set)
    failures: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    register_after_reads: dict[str, tuple[int, Json]] = field(default_factory=dict)
    rights: dict[str, set[tuple[str, str, str, str]]] = field(default_factory=dict)
    services: dict[str, Json] = field(default_factory=dict)
    terminate_on_eviction: bool = True
    tls: ssl.SSLContext | None = None
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls is not None else 'http'}://{host}:{port}"

    def __enter__(self) -> ApiServerDouble:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def calls(self, method: str, path_pattern: str = ".*") -> list[Request]:
        return [r for r in self.requests if r.method == method and re.fullmatch(path_pattern, r.path)]

    # ------------------------------------------------------------ the endpoints

    def handle(self, request: Request) -> tuple[int, Json]:
        with self._lock:
            self.requests.append(request)
            injected = self.failures.get((request.method, request.path))
            if injected:
                code, message = injected
                return code, status(code, message, "InternalError")
            for pattern, endpoint in self._routes():
                match = re.fullmatch(pattern, f"{request.method} {request.path}")
                if match:
                    return endpoint(request, *match.groups())
            return 404, status(404, f"the double does not serve {request.method} {request.path}", "NotFound")

    def _routes(self) -> list[tuple[str, Any]]:
        return [
            (r"GET /api/v1/nodes/([^/]+)", self._read_node),
            (r"PATCH /api/v1/nodes/([^/]+)", self._patch_node),
            (r"DELETE /api/v1/nodes/([^/]+)", self._delete_node),
            (r"GET /api/v1/pods", self._list_pods),
            (r"GET /api/v1/namespaces/([^/]+)/services/([^/]+)", self._read_service),
            (r"POST /api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction", self._evict),
            (r"POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews", self._review_access),
        ]

    def _review_access(self, request: Request) -> tuple[int, Json]:
        token = (request.authorization or "").removeprefix("Bearer ")
        if token not in self.rights:
            return 401, status(401, "Unauthorized", "Unauthorized")
        attributes = request.body["spec"]["resourceAttributes"]
        asked = (
            attributes["verb"],
            attributes.get("group", ""),
            attributes["resource"],
            attributes.get("subresource", ""),
        )
        return 201, {**request.body, "status": {"allowed": asked in self.rights[token]}}

    def _read_node(self, _: Request, name: str) -> tuple[int, Json]:
        if name in self.register_after_reads:
            reads_left, registered = self.register_after_reads[name]
            if reads_left <= 0:
                self.nodes[name] = registered
                del self.register_after_reads[name]
            else:
                self.register_after_reads[name] = (reads_left - 1, registered)
        if name not in self.nodes:
            return 404, status(404, f'nodes "{name}" not found', "NotFound")
        return 200, self.nodes[name]

    def _read_service(self, _: Request, namespace: str, name: str) -> tuple[int, Json]:
        service = self.services.get(f"{namespace}/{name}")
        if service is None:
            return 404, status(404, f'services "{name}" not found', "NotFound")
        return 200, service

    def _patch_node(self, request: Request, name: str) -> tuple[int, Json]:
        if request.content_type != "application/merge-patch+json":
            return 415, status(415, f"the double only takes merge patches, not {request.content_type}")
        current = self.nodes.get(name)
        if current is None:
            return 404, status(404, f'nodes "{name}" not found', "NotFound")
        wanted_version = (request.body.get("metadata") or {}).get("resourceVersion")
        if wanted_version is not None and wanted_version != current["metadata"]["resourceVersion"]:
            return 409, status(409, "the object has been modified; please apply your changes to the latest version")
        spec = request.body.get("spec") or {}
        for key, value in spec.items():
            current["spec"][key] = value
        current["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
        return 200, current

    def _delete_node(self, _: Request, name: str) -> tuple[int, Json]:
        if self.nodes.pop(name, None) is None:
            return 404, status(404, f'nodes "{name}" not found', "NotFound")
        return 200, status(200, "deleted")

    def _list_pods(self, request: Request) -> tuple[int, Json]:
        selector = request.query.get("fieldSelector", [""])[0]
        node_name = selector.removeprefix("spec.nodeName=")
        items = [p for p in self.pods if p["spec"]["nodeName"] == node_name]
        return 200, {"kind": "PodList", "apiVersion": "v1", "items": items}

    def _evict(self, request: Request, namespace: str, name: str) -> tuple[int, Json]:
        key = f"{namespace}/{name}"
        if key in self.blocked_by_pdb:
            return 429, status(
                429, "Cannot evict pod as it would violate the pod's disruption budget.", "TooManyRequests"
            )
        matching = [p for p in self.pods if f"{p['metadata']['namespace']}/{p['metadata']['name']}" == key]
        if not matching:
            return 404, status(404, f'pods "{name}" not found', "NotFound")
        if self.terminate_on_eviction:
            self.pods.remove(matching[0])
        else:
            matching[0]["metadata"]["deletionTimestamp"] = "2026-11-30T16:00:00Z"
        return 201, status(201, "evicted")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                request = Request(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    self.headers.get("Content-Type"),
                    self.headers.get("Authorization"),
                    json.loads(raw) if raw else None,
                )
                code, document = double.handle(request)
                payload = json.dumps(document).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PATCH = do_DELETE = do_POST = _serve

            def log_message(self, *_: object) -> None:
                pass

        return Handler
