"""Two field managers apply to the same new ConfigMap at once, many times over: both applies
must succeed (the one whose create loses the race goes on as an update, as kube-apiserver's
does) and the object must end with both managers' fields. Prints "ok" or what went wrong.

The API server is the one in $KUBECONFIG (server URL, CA data and bearer token)."""

import base64
import json
import os
import ssl
import sys
import tempfile
import threading
import urllib.error
import urllib.request

import yaml

ROUNDS = 25


def connection():
    with open(os.environ["KUBECONFIG"]) as f:
        config = yaml.safe_load(f)
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    ca = tempfile.NamedTemporaryFile(delete=False, suffix=".crt")
    ca.write(base64.b64decode(cluster["certificate-authority-data"]))
    ca.close()
    return cluster["server"], user["token"], ssl.create_default_context(cafile=ca.name)


SERVER, TOKEN, TLS = connection()


def request(method, path, body=None, content_type="application/json"):
    req = urllib.request.Request(
        SERVER + path,
        data=body,
        method=method,
        headers={"Authorization": "Bearer " + TOKEN, "Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(req, context=TLS) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def main():
    failures = []
    for i in range(ROUNDS):
        name = f"race-{i}"
        path = f"/api/v1/namespaces/default/configmaps/{name}"
        answers = [None, None]
        start = threading.Barrier(2)

        def apply(j):
            body = json.dumps(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                 "data": {f"k{j}": "v"}}
            ).encode()
            start.wait()
            answers[j] = request("PATCH", f"{path}?fieldManager=m{j}", body,
                                 "application/apply-patch+yaml")

        threads = [threading.Thread(target=apply, args=(j,)) for j in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(code for code, _ in answers)
        if codes != [200, 201]:
            failures.append(f"{name}: {[(c, a.get('message')) for c, a in answers]}")
            continue
        _, obj = request("GET", path)
        managers = sorted(e["manager"] for e in obj["metadata"].get("managedFields", []))
        if obj.get("data") != {"k0": "v", "k1": "v"} or managers != ["m0", "m1"]:
            failures.append(f"{name}: data {obj.get('data')}, managers {managers}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("ok")


main()
