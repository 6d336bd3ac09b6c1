#!/usr/bin/env python3
"""Writes the protobuf schema keel-apiserver reads and writes Kubernetes protobuf with.

Kubernetes' wire form is defined by the Go API types: each field's `protobuf:"..."` struct
tag gives its number and wire type, its `json:"..."` tag its JSON name and `omitempty`, its
Go type whether it is a pointer. This reads those Go types (the `types.go` of checkouts of
k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver and k8s.io/kube-aggregator,
at the tag matching the Kubernetes version keel reports) and writes, for every message reachable from the kinds keel serves, their lists,
Status, WatchEvent and the discovery documents (aggregated discovery's too), a proto2
message whose field names are the JSON names (or, where a JSON name is no identifier:
`$ref`, `x-kubernetes-list-type`, the protobuf tag's name, with the JSON name as the
field's `json_name`), marked with the `keel.json` options for what
protobuf itself does not carry (see crates/keel-apiserver/proto/keel/json.proto). The
types with a hand-written protobuf form (Time, MicroTime, Quantity, IntOrString, ...) are
written from the table below.

    scripts/k8s-protobuf-schema.py <k8s.io/api> <k8s.io/apimachinery> \
        <k8s.io/apiextensions-apiserver> <k8s.io/kube-aggregator> v1.34

The kinds are those keel serves and those of the generally available groups it is growing
into (apps, batch, RBAC, policy, networking, discovery, storage, scheduling, autoscaling,
admission registration, certificates, node, and the review kinds of authorization and
authentication), with CustomResourceDefinitions (apiextensions.k8s.io) and APIServices
(apiregistration.k8s.io), whose messages keep their upstream packages.
"""

import os
import re
import sys

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "keel-apiserver", "proto")

# Go package: (directory, proto package, Go import names it is referred to by).
PACKAGES = {
    "core": ("api:core/v1", "k8s.io.api.core.v1", ["v1", "corev1", "apiv1"]),
    "coordination": ("api:coordination/v1", "k8s.io.api.coordination.v1", []),
    "events": ("api:events/v1", "k8s.io.api.events.v1", []),
    "meta": ("apimachinery:pkg/apis/meta/v1", "k8s.io.apimachinery.pkg.apis.meta.v1", ["metav1"]),
    "apiextensionsv1": (
        "apiextensions:pkg/apis/apiextensions/v1",
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1",
        [],
    ),
    "apiregistrationv1": (
        "aggregator:pkg/apis/apiregistration/v1",
        "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1",
        [],
    ),
}
# The other groups' packages: (group directory, version).
GROUPS = [
    ("admissionregistration", "v1"),
    ("apidiscovery", "v2"),
    ("apidiscovery", "v2beta1"),
    ("apps", "v1"),
    ("authentication", "v1"),
    ("authorization", "v1"),
    ("autoscaling", "v1"),
    ("autoscaling", "v2"),
    ("batch", "v1"),
    ("certificates", "v1"),
    ("discovery", "v1"),
    ("networking", "v1"),
    ("node", "v1"),
    ("policy", "v1"),
    ("rbac", "v1"),
    ("scheduling", "v1"),
    ("storage", "v1"),
]
for _group, _version in GROUPS:
    PACKAGES[f"{_group}{_version}"] = (f"api:{_group}/{_version}", f"k8s.io.api.{_group}.{_version}", [])
# Packages that import meta/v1 as `v1`, which is core's name elsewhere.
META_AS_V1 = {"apidiscoveryv2", "apidiscoveryv2beta1"}

# The kinds keel serves, and DeleteOptions.
ROOTS = (
    [
        ("core", k)
        for k in [
            "ConfigMap",
            "Endpoints",
            "Event",
            "LimitRange",
            "Namespace",
            "Node",
            "PersistentVolume",
            "PersistentVolumeClaim",
            "Pod",
            "PodTemplate",
            "ReplicationController",
            "ResourceQuota",
            "Secret",
            "Service",
            "ServiceAccount",
        ]
    ]
    + [("coordination", "Lease"), ("events", "Event"), ("meta", "DeleteOptions")]
    + [("admissionregistration" + "v1", k) for k in [
        "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]]
    + [("appsv1", k) for k in [
        "ControllerRevision", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"]]
    + [("authenticationv1", k) for k in ["SelfSubjectReview", "TokenReview"]]
    + [("authorizationv1", k) for k in [
        "LocalSubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview",
        "SubjectAccessReview"]]
    + [("autoscalingv1", "HorizontalPodAutoscaler"), ("autoscalingv1", "Scale")]
    + [("autoscalingv2", "HorizontalPodAutoscaler")]
    + [("batchv1", k) for k in ["CronJob", "Job"]]
    + [("certificatesv1", "CertificateSigningRequest")]
    + [("discoveryv1", "EndpointSlice")]
    + [("networkingv1", k) for k in ["Ingress", "IngressClass", "NetworkPolicy"]]
    + [("nodev1", "RuntimeClass")]
    + [("policyv1", k) for k in ["Eviction", "PodDisruptionBudget"]]
    + [("rbacv1", k) for k in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]]
    + [("schedulingv1", "PriorityClass")]
    + [("storagev1", k) for k in ["CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"]]
    + [("apiextensionsv1", "CustomResourceDefinition"), ("apiregistrationv1", "APIService")]
)
# Kinds that are only ever an answer (or a body) of their own, without a list.
NO_LIST = {"DeleteOptions", "Eviction", "Scale", "SelfSubjectReview", "TokenReview",
           "LocalSubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview",
           "SubjectAccessReview"}
# Every served kind's list, and what responses carry besides objects: Status, the watch
# stream's events, and the discovery documents.
ROOTS += [(p, k + "List") for p, k in ROOTS if k not in NO_LIST]
ROOTS += [("meta", k) for k in ["Status", "WatchEvent", "APIResourceList", "APIGroupList",
                                "APIVersions"]]
ROOTS += [("apidiscovery" + v, "APIGroupDiscoveryList") for v in ["v2", "v2beta1"]]

META = "k8s.io.apimachinery.pkg.apis.meta.v1"
# Types whose protobuf and JSON forms are written by hand in apimachinery: the Go type, the
# message, and that message's fields (as upstream's generated.proto has them).
SPECIAL = {
    "metav1.Time": (META + ".Time", "optional int64 seconds = 1;\n  optional int32 nanos = 2;"),
    "metav1.MicroTime": (META + ".MicroTime", "optional int64 seconds = 1;\n  optional int32 nanos = 2;"),
    "metav1.Duration": (META + ".Duration", "optional int64 duration = 1;"),
    "metav1.FieldsV1": (META + ".FieldsV1", "optional bytes Raw = 1;"),
    "resource.Quantity": ("k8s.io.apimachinery.pkg.api.resource.Quantity", "optional string string = 1;"),
    "intstr.IntOrString": (
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
        "optional int64 type = 1;\n  optional int32 intVal = 2;\n  optional string strVal = 3;",
    ),
    "runtime.RawExtension": ("k8s.io.apimachinery.pkg.runtime.RawExtension", "optional bytes raw = 1;"),
}
# The envelope of every protobuf body.
ENVELOPE = {
    "k8s.io.apimachinery.pkg.runtime.TypeMeta": "optional string apiVersion = 1;\n  optional string kind = 2;",
    "k8s.io.apimachinery.pkg.runtime.Unknown": (
        "optional TypeMeta typeMeta = 1;\n  optional bytes raw = 2;\n"
        "  optional string contentEncoding = 3;\n  optional string contentType = 4;"
    ),
}
SCALARS = {
    "string": "string",
    "bool": "bool",
    "int32": "int32",
    "int64": "int64",
    "float64": "double",
    "[]byte": "bytes",
    "types.UID": "string",
}

FIELD = re.compile(r"^\t(?:(\w+)\s+)?(\S+)\s+`(.*)`\s*(?://.*)?$")


def read_package(root, pkg):
    """The structs (name -> field lines) and other named types (name -> Go type) of a package."""
    where, path = PACKAGES[pkg][0].split(":")
    folder = os.path.join(root[where], path)
    structs, named = {}, {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".go") or name.endswith("_test.go"):
            continue
        lines = open(os.path.join(folder, name)).read().split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"^type (\w+) struct\{\}$", lines[i])
            if m:
                structs[m.group(1)] = []
                i += 1
                continue
            m = re.match(r"^type (\w+) struct \{$", lines[i])
            if m:
                body = []
                i += 1
                while lines[i] != "}":
                    body.append(lines[i])
                    i += 1
                structs[m.group(1)] = body
            else:
                m = re.match(r"^type (\w+) (\S+)$", lines[i])
                if m and m.group(2) not in ("interface", "struct"):
                    named[m.group(1)] = m.group(2)
            i += 1
    return structs, named


def tag(tags, key):
    m = re.search(key + r':"([^"]*)"', tags)
    return m.group(1) if m else None


class Schema:
    def __init__(self, root):
        self.packages = {p: read_package(root, p) for p in PACKAGES}
        self.messages = {p: {} for p in PACKAGES}  # package -> name -> field lines
        self.specials = set()
        self.queue = []

    def qualify(self, pkg, go_type):
        """(package, type name) for a Go type named in `pkg`, or a special's key."""
        if "." in go_type:
            prefix, name = go_type.split(".", 1)
            if prefix == "v1" and pkg in META_AS_V1:
                return "meta", name
            for other, (_, _, aliases) in PACKAGES.items():
                if prefix in aliases:
                    return other, name
            return None, go_type
        return pkg, go_type

    def proto_type(self, pkg, go_type):
        """The proto type of a Go (non-pointer, non-slice, non-map) type, queueing messages."""
        pkg, go_type = self.resolve(pkg, go_type)
        if go_type in SCALARS:
            return SCALARS[go_type], True
        owner, name = self.qualify(pkg, go_type)
        key = ("metav1." + name) if owner == "meta" else go_type
        if key in SPECIAL:
            self.specials.add(key)
            return "." + SPECIAL[key][0], False
        if owner is None:
            raise SystemExit(f"unknown type {go_type} in {pkg}")
        structs, named = self.packages[owner]
        if name in structs:
            self.queue.append((owner, name))
            return "." + PACKAGES[owner][1] + "." + name, False
        raise SystemExit(f"unknown type {go_type} in {owner}")

    def resolve(self, pkg, go_type):
        """A named non-struct type (ResourceList, Protocol, ...) as its underlying type, and
        the package its names are in."""
        owner, name = self.qualify(pkg, go_type)
        while owner and name in self.packages[owner][1]:
            pkg = owner
            go_type = self.packages[owner][1][name]
            owner, name = self.qualify(owner, go_type)
        return pkg, go_type

    def label(self, pkg, go_type):
        """(label, proto type, scalar) for a field's Go type."""
        pkg, go_type = self.resolve(pkg, go_type.removeprefix("*"))
        if go_type == "[]byte":
            return "optional", "bytes", True
        if go_type.startswith("[]"):
            _, t, scalar = self.label(pkg, go_type[2:])
            return "repeated", t, scalar
        m = re.match(r"^map\[([\w.]+)\](.+)$", go_type)
        if m:
            key = self.proto_type(pkg, m.group(1))[0]
            value = self.label(pkg, m.group(2))[1]
            return "map", f"map<{key}, {value}>", False
        return ("optional",) + self.proto_type(pkg, go_type)

    def message(self, pkg, name):
        fields = []
        for line in self.packages[pkg][0][name]:
            m = FIELD.match(line)
            if not m:
                continue
            go_name, go_type, tags = m.groups()
            pb, js = tag(tags, "protobuf"), tag(tags, "json")
            if pb is None or pb == "-":
                continue
            parts = pb.split(",")
            number = parts[1]
            json_name, *flags = (js or "").split(",")
            inline = "inline" in flags
            given = [p[5:] for p in parts if p.startswith("name=")]
            if not json_name or json_name == "-":
                json_name = given[0] if given else go_name or go_type.split(".")[-1]
                json_name = json_name[0].lower() + json_name[1:]
            field_name = json_name
            if not re.match(r"^[A-Za-z_]\w*$", json_name):
                # `$ref`, `x-kubernetes-...`: the protobuf name, answering to the JSON one.
                field_name = given[0]
            label, proto, scalar = self.label(pkg, go_type)
            options = []
            if inline:
                options.append("(keel.inline) = true")
            pointer, omitempty = go_type.startswith("*"), "omitempty" in flags
            if (scalar and label == "optional" and (pointer or not omitempty)) or (
                label != "optional" and not omitempty
            ):
                options.append("(keel.keep_zero) = true")
            if field_name != json_name:
                options.append(f'json_name = "{json_name}"')
            opts = f" [{', '.join(options)}]" if options else ""
            if label == "map":
                fields.append(f"  {proto} {field_name} = {number}{opts};")
            else:
                fields.append(f"  {label} {proto} {field_name} = {number}{opts};")
        return fields

    def build(self):
        self.queue = [(p, k) for p, k in ROOTS]
        while self.queue:
            pkg, name = self.queue.pop()
            if name not in self.messages[pkg]:
                self.messages[pkg][name] = self.message(pkg, name)


HEADER = """// Generated by scripts/k8s-protobuf-schema.py from the Kubernetes {version} Go API types:
// the protobuf form of the {what} keel-apiserver reads, field names as in JSON. Do not edit.

syntax = "proto2";

package {package};
"""


def proto_file(package):
    """The schema file of a proto package: k8s.io.api.core.v1 -> k8s.io/api/core/v1/schema.proto."""
    return "k8s.io/" + package.removeprefix("k8s.io.").replace(".", "/") + "/schema.proto"


def write(package, body, imports, version, what):
    path = os.path.join(OUT, proto_file(package))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = HEADER.format(version=version, package=package, what=what)
    if imports:
        text += "\n" + "".join(f'import "{i}";\n' for i in sorted(imports))
    text += "\n" + "\n\n".join(body) + "\n"
    open(path, "w").write(text)


def main():
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    root = {
        "api": sys.argv[1],
        "apimachinery": sys.argv[2],
        "apiextensions": sys.argv[3],
        "aggregator": sys.argv[4],
    }
    version = sys.argv[5]
    schema = Schema(root)
    schema.build()
    files = {}  # proto package -> (messages, imports)
    for pkg, messages in schema.messages.items():
        body, imports = [], set()
        for name in sorted(messages):
            fields = messages[name]
            for f in fields:
                for ref in re.findall(r"\.((?:k8s\.io\.)[\w.]+)\.\w+", f):
                    if ref != PACKAGES[pkg][1]:
                        imports.add(proto_file(ref))
                if "(keel." in f:
                    imports.add("keel/json.proto")
            body.append(f"message {name} {{\n" + "\n".join(fields) + "\n}")
        files[PACKAGES[pkg][1]] = (body, imports)
    for key in sorted(schema.specials):
        full, fields = SPECIAL[key]
        package, name = full.rsplit(".", 1)
        files.setdefault(package, ([], set()))[0].append(f"message {name} {{\n  {fields}\n}}")
    for full, fields in ENVELOPE.items():
        package, name = full.rsplit(".", 1)
        files.setdefault(package, ([], set()))[0].append(f"message {name} {{\n  {fields}\n}}")
    for package, (body, imports) in sorted(files.items()):
        what = "types" if package.startswith("k8s.io.apimachinery.") else "kinds"
        write(package, sorted(body), imports, version, what)


if __name__ == "__main__":
    main()
