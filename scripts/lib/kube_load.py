#!/usr/bin/env python3
"""Load for scripts/bench-startup.sh, through one kubeconfig's server and token:

    kube_load.py KUBECONFIG fill N            creates N ConfigMaps in `default` (8 threads)
    kube_load.py KUBECONFIG crd               creates the benchmark's CRD (one CEL rule) and
                                              waits until it is established
    kube_load.py KUBECONFIG apply N RATE      server-side applies N custom resources, paced to
                                              RATE a second from 32 threads; prints one JSON line
                                              {"done", "seconds", "rate", "p50_ms", "p99_ms",
                                              "errors"}

Requests go over HTTP keep-alive (urllib3), as a client library's would.
"""

import json
import ssl
import sys
import threading
import time

import urllib3
import yaml

# The applying clients: enough that the rate asked is not bounded by their latency.
CLIENTS = 32

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.bench.keel.dev"},
    "spec": {
        "group": "bench.keel.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.replicas <= self.maxReplicas", "message": "too many replicas"}
                ],
                "properties": {
                    "replicas": {"type": "integer", "minimum": 0},
                    "maxReplicas": {"type": "integer", "default": 10},
                    "color": {"type": "string", "enum": ["red", "green", "blue"]},
                },
            }}}},
        }],
    },
}


# The servers measured use the self-signed certificates their first start made.
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)


def client(kubeconfig):
    with open(kubeconfig) as f:
        config = yaml.safe_load(f)
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"]["token"]
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    pool = urllib3.PoolManager(maxsize=32, ssl_context=context)
    headers = {"Authorization": f"Bearer {token}"}

    def request(method, path, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        h = dict(headers)
        if data is not None:
            h["Content-Type"] = content_type
        r = pool.request(method, server + path, body=data, headers=h, retries=False)
        return r.status, r.data

    return request


def in_threads(n, work):
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def fill(request, count):
    def work(i):
        for j in range(i, count, 8):
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"fill-{j}"}, "data": {"k": "v" * 64}}
            status, data = request("POST", "/api/v1/namespaces/default/configmaps", body)
            if status not in (201, 409):
                sys.exit(f"fill: {status} {data[:200]}")
    in_threads(8, work)


def crd(request):
    status, data = request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    if status not in (201, 409):
        sys.exit(f"crd: {status} {data[:300]}")
    for _ in range(200):
        status, data = request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.bench.keel.dev")
        conditions = json.loads(data).get("status", {}).get("conditions", [])
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            status, _ = request("GET", "/apis/bench.keel.dev/v1/widgets")
            if status == 200:
                return
        time.sleep(0.05)
    sys.exit("crd: not established")


def apply(request, count, rate):
    latencies, errors = [], []
    lock = threading.Lock()
    start = time.monotonic()

    def work(i):
        for j in range(i, count, CLIENTS):
            due = start + j / rate
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            body = {"apiVersion": "bench.keel.dev/v1", "kind": "Widget",
                    "metadata": {"name": f"w-{j}"},
                    "spec": {"replicas": j % 10, "color": "red"}}
            path = f"/apis/bench.keel.dev/v1/namespaces/default/widgets/w-{j}?fieldManager=bench"
            sent = time.monotonic()
            status, data = request("PATCH", path, body, "application/apply-patch+yaml")
            took = time.monotonic() - sent
            with lock:
                latencies.append(took)
                if status not in (200, 201):
                    errors.append(f"{status} {data[:200]}")
    in_threads(CLIENTS, work)
    seconds = time.monotonic() - start
    latencies.sort()
    quantile = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 2)
    print(json.dumps({"done": len(latencies) - len(errors), "seconds": round(seconds, 3),
                      "rate": round((len(latencies) - len(errors)) / seconds, 1),
                      "p50_ms": quantile(0.5), "p99_ms": quantile(0.99),
                      "errors": len(errors), "first_error": errors[0] if errors else None}))


def main():
    kubeconfig, what = sys.argv[1], sys.argv[2]
    request = client(kubeconfig)
    if what == "fill":
        fill(request, int(sys.argv[3]))
    elif what == "crd":
        crd(request)
    elif what == "apply":
        apply(request, int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
