"""CustomResourceDefinitions with the Python kubernetes client, as controller authors use it:
a CRD created with ApiextensionsV1Api and waited for until Established; its namespaced
objects created, read, listed, merge-patched, replaced, watched and deleted with
CustomObjectsApi, their status and scale subresources read and patched, a schema error
answered 422 with upstream's message; the dynamic client finding the kind by apiVersion and
kind; utils.create_from_yaml with a multi-document file of CRDs, and with apply=True of
custom resources. Run by
tests/python_crds.rs with KUBECONFIG in the environment; prints "ok"."""

import json
import os
import sys
import tempfile
import time

from kubernetes import client, config, dynamic, utils, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
api_client = client.ApiClient()
ext = client.ApiextensionsV1Api(api_client)
co = client.CustomObjectsApi(api_client)
ns = "default"
group, version, plural = "example.com", "v1", "widgets"

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["color"],
            "properties": {
                "color": {"type": "string", "enum": ["red", "green", "blue"]},
                "replicas": {"type": "integer", "minimum": 0, "default": 1},
            },
        },
        "status": {
            "type": "object",
            "properties": {"ready": {"type": "boolean"}, "replicas": {"type": "integer"}},
        },
    },
}


def crd(plural, kind, group="example.com"):
    """A namespaced CRD of one version with the status and scale subresources."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "status": {},
                        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
                    },
                    "schema": {"openAPIV3Schema": SCHEMA},
                }
            ],
        },
    }


def wait_established(name):
    for _ in range(200):
        got = ext.read_custom_resource_definition(name)
        conditions = {c.type: c.status for c in (got.status.conditions or [])} if got.status else {}
        if conditions.get("Established") == "True":
            return got
        time.sleep(0.1)
    sys.exit(f"{name} was not established")


def widget(name, color, replicas=None):
    spec = {"color": color}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": f"{group}/{version}", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


# The CRD through ApiextensionsV1Api, as a typed model; Established at once.
created = ext.create_custom_resource_definition(client.V1CustomResourceDefinition.from_dict(crd(plural, "Widget")))
assert created.metadata.name == "widgets.example.com", created.metadata
established = wait_established("widgets.example.com")
assert established.status.accepted_names.kind == "Widget", established.status
assert established.status.stored_versions == ["v1"], established.status

# Create, get (defaulted), list.
w1 = co.create_namespaced_custom_object(group, version, ns, plural, widget("w1", "red"))
assert w1["spec"] == {"color": "red", "replicas": 1}, w1
assert w1["metadata"]["generation"] == 1 and w1["metadata"]["uid"], w1
got = co.get_namespaced_custom_object(group, version, ns, plural, "w1")
assert got["metadata"]["resourceVersion"] == w1["metadata"]["resourceVersion"], got
co.create_namespaced_custom_object(group, version, ns, plural, widget("w2", "blue", 2))
listed = co.list_namespaced_custom_object(group, version, ns, plural)
assert listed["kind"] == "WidgetList" and listed["apiVersion"] == "example.com/v1", listed
assert [i["metadata"]["name"] for i in listed["items"]] == ["w1", "w2"], listed
assert len(co.list_cluster_custom_object(group, version, plural)["items"]) == 2
rv = listed["metadata"]["resourceVersion"]

# A merge patch, then a replace with the resourceVersion; a stale one conflicts.
patched = co.patch_namespaced_custom_object(group, version, ns, plural, "w1", {"spec": {"color": "green"}})
assert patched["spec"] == {"color": "green", "replicas": 1}, patched
assert patched["metadata"]["generation"] == 2, patched
patched["spec"]["replicas"] = 4
replaced = co.replace_namespaced_custom_object(group, version, ns, plural, "w1", patched)
assert replaced["spec"]["replicas"] == 4 and replaced["metadata"]["generation"] == 3, replaced
try:
    co.replace_namespaced_custom_object(group, version, ns, plural, "w1", patched)
    sys.exit("a replace with a stale resourceVersion succeeded")
except ApiException as e:
    assert e.status == 409 and json.loads(e.body)["reason"] == "Conflict", e.body

# A watch from the list's resourceVersion sees the changes since: MODIFIED w1.
w = watch.Watch()
events = []
for event in w.stream(
    co.list_namespaced_custom_object, group, version, ns, plural, resource_version=rv, timeout_seconds=10
):
    events.append((event["type"], event["object"]["metadata"]["name"]))
    if len(events) == 2:
        w.stop()
assert events == [("MODIFIED", "w1"), ("MODIFIED", "w1")], events
# And a new object as ADDED.
w = watch.Watch()
stream = w.stream(
    co.list_namespaced_custom_object,
    group,
    version,
    ns,
    plural,
    resource_version=replaced["metadata"]["resourceVersion"],
    timeout_seconds=10,
)
co.create_namespaced_custom_object(group, version, ns, plural, widget("w3", "red"))
event = next(stream)
w.stop()
assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "w3"), event
assert event["object"]["spec"]["replicas"] == 1, event

# The status subresource: a patch of it changes only the status, and the generation stays.
status = co.patch_namespaced_custom_object_status(
    group, version, ns, plural, "w1", {"status": {"ready": True, "replicas": 2}, "spec": {"color": "blue"}}
)
assert status["status"] == {"ready": True, "replicas": 2}, status
assert status["spec"]["color"] == "green" and status["metadata"]["generation"] == 3, status
got = co.get_namespaced_custom_object_status(group, version, ns, plural, "w1")
assert got["status"]["ready"] is True, got
# An update of the object keeps the status.
kept = co.patch_namespaced_custom_object(group, version, ns, plural, "w1", {"status": {"ready": False}})
assert kept["status"]["ready"] is True, kept

# The scale subresource: read, then a merge patch sets spec.replicas.
scale = co.get_namespaced_custom_object_scale(group, version, ns, plural, "w1")
assert (scale["kind"], scale["apiVersion"]) == ("Scale", "autoscaling/v1"), scale
assert scale["spec"]["replicas"] == 4 and scale["status"]["replicas"] == 2, scale
scale = co.patch_namespaced_custom_object_scale(group, version, ns, plural, "w1", {"spec": {"replicas": 6}})
assert scale["spec"]["replicas"] == 6, scale
assert co.get_namespaced_custom_object(group, version, ns, plural, "w1")["spec"]["replicas"] == 6

# A schema error: 422 Invalid with upstream's message.
try:
    co.create_namespaced_custom_object(group, version, ns, plural, widget("bad", "pink"))
    sys.exit("a widget of an unknown color was created")
except ApiException as e:
    status = json.loads(e.body)
    assert e.status == 422 and status["reason"] == "Invalid", e.body
    assert status["message"] == (
        'Widget.example.com "bad" is invalid: spec.color: Unsupported value: "pink": '
        'supported values: "red", "green", "blue"'
    ), status["message"]
    assert status["details"]["causes"][0]["field"] == "spec.color", status
try:
    co.patch_namespaced_custom_object(group, version, ns, plural, "w2", {"spec": {"replicas": -1}})
    sys.exit("a negative replicas was stored")
except ApiException as e:
    assert e.status == 422, e.body
    assert json.loads(e.body)["message"] == (
        'Widget.example.com "w2" is invalid: spec.replicas: Invalid value: -1: '
        "spec.replicas in body should be greater than or equal to 0"
    ), e.body

# Delete: answered with the deleted object's Status; then 404.
deleted = co.delete_namespaced_custom_object(group, version, ns, plural, "w2")
assert deleted["kind"] in ("Widget", "Status"), deleted
try:
    co.get_namespaced_custom_object(group, version, ns, plural, "w2")
    sys.exit("w2 is still there")
except ApiException as e:
    assert e.status == 404 and json.loads(e.body)["reason"] == "NotFound", e.body

# The dynamic client finds the kind by apiVersion and kind.
dyn = dynamic.DynamicClient(api_client)
widgets = dyn.resources.get(api_version="example.com/v1", kind="Widget")
assert (widgets.name, widgets.namespaced) == ("widgets", True), widgets
made = widgets.create(body=widget("d1", "blue"), namespace=ns)
assert made.spec.replicas == 1, made
assert widgets.get(name="d1", namespace=ns).spec.color == "blue"
assert sorted(i.metadata.name for i in widgets.get(namespace=ns).items) == ["d1", "w1", "w3"]
status = widgets.status
assert status is not None, "the dynamic client sees the status subresource"
widgets.delete(name="d1", namespace=ns)
try:
    widgets.get(name="d1", namespace=ns)
    sys.exit("d1 is still there")
except dynamic.exceptions.NotFoundError:
    pass

# utils.create_from_yaml with a multi-document file: two CRDs and a ConfigMap, created by
# the client's typed APIs. A custom resource has no typed API in the client (AttributeError);
# with apply=True (server-side apply through the dynamic client) a file of custom resources
# is created once their CRD is served. A CRD and its objects in one file race the CRD being
# served, with kube-apiserver too (the dynamic client's discovery misses the new kind).
def write_yaml(docs):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=".", delete=False) as f:
        f.write("\n---\n".join(json.dumps(d) for d in docs))
    return f.name


configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-yaml"}, "data": {"a": "b"}}
made = utils.create_from_yaml(
    api_client, write_yaml([crd("gadgets", "Gadget"), crd("sprockets", "Sprocket"), configmap]), namespace=ns
)
kinds = [m[0].kind for m in made]
assert kinds == ["CustomResourceDefinition", "CustomResourceDefinition", "ConfigMap"], made
wait_established("gadgets.example.com")
wait_established("sprockets.example.com")
gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"color": "red"}}
try:
    utils.create_from_yaml(api_client, yaml_objects=[gadget], namespace=ns)
    sys.exit("create_from_yaml created a custom resource through a typed API")
except AttributeError:
    pass  # no ExampleComV1Api in the client
sprockets = [dict(gadget, kind="Sprocket", metadata={"name": n}) for n in ("s1", "s2")]
made = utils.create_from_yaml(api_client, write_yaml(sprockets), namespace=ns, apply=True)
assert [m[0].metadata.name for m in made] == ["s1", "s2"], made
sprocket = co.get_namespaced_custom_object(group, version, ns, "sprockets", "s2")
assert sprocket["spec"] == {"color": "red", "replicas": 1}, sprocket
managers = [m["manager"] for m in sprocket["metadata"]["managedFields"]]
assert managers == ["python-client"], sprocket["metadata"]

# Deleting the CRD deletes its objects, then the CRD.
ext.delete_custom_resource_definition("widgets.example.com")
for _ in range(200):
    try:
        ext.read_custom_resource_definition("widgets.example.com")
    except ApiException as e:
        assert e.status == 404, e.body
        break
    time.sleep(0.1)
else:
    sys.exit("widgets.example.com was not deleted")
print("ok")
