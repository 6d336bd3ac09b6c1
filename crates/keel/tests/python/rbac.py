"""RBAC with the Python kubernetes client: RbacAuthorizationV1Api creates, reads, patches,
lists, watches and deletes each kind (Role, ClusterRole, RoleBinding, ClusterRoleBinding);
a binding's roleRef change is a 422 with upstream's words; AuthorizationV1Api's reviews are
answered allowed, AuthenticationV1Api's SelfSubjectReview names the admin and TokenReview
judges the client's own token and a wrong one. Run by tests/rbac.rs with KUBECONFIG in the
environment; prints "ok"."""

import os
import threading

import yaml

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
api_client = client.ApiClient()
rbac = client.RbacAuthorizationV1Api(api_client)
ns = "default"
GROUP = "rbac.authorization.k8s.io"


def rule(resource):
    return client.V1PolicyRule(api_groups=[""], resources=[resource], verbs=["get", "list"])


def meta(name, namespaced):
    return client.V1ObjectMeta(name=name, namespace=ns if namespaced else None)


def ref(kind, name):
    return client.V1RoleRef(api_group=GROUP, kind=kind, name=name)


def subject(name):
    # No apiGroup: the server defaults a User's.
    return client.RbacV1Subject(kind="User", name=name)


# (kind, namespaced, create body).
KINDS = [
    ("Role", True, client.V1Role(metadata=meta("py-role", True), rules=[rule("pods")])),
    ("ClusterRole", False, client.V1ClusterRole(metadata=meta("py-cluster-role", False), rules=[rule("nodes")])),
    ("RoleBinding", True, client.V1RoleBinding(metadata=meta("py-binding", True),
                                               role_ref=ref("Role", "py-role"), subjects=[subject("alice")])),
    ("ClusterRoleBinding", False, client.V1ClusterRoleBinding(metadata=meta("py-cluster-binding", False),
                                                               role_ref=ref("ClusterRole", "py-cluster-role"),
                                                               subjects=[subject("bob")])),
]


def snake(kind):
    return "".join("_" + c.lower() if c.isupper() else c for c in kind).lstrip("_")


def call(verb, kind, namespaced, **kwargs):
    name = f"{verb}_namespaced_{snake(kind)}" if namespaced else f"{verb}_{snake(kind)}"
    if namespaced:
        kwargs["namespace"] = ns
    return getattr(rbac, name)(**kwargs)


for kind, namespaced, body in KINDS:
    name = body.metadata.name
    created = call("create", kind, namespaced, body=body)
    assert created.metadata.name == name, created
    got = call("read", kind, namespaced, name=name)
    assert got.metadata.uid == created.metadata.uid
    if kind.endswith("Binding"):
        assert got.subjects[0].api_group == GROUP, got.subjects
        assert got.role_ref.api_group == GROUP
    patched = call("patch", kind, namespaced, name=name, body={"metadata": {"labels": {"patched": "yes"}}})
    assert patched.metadata.labels == {"patched": "yes"}, patched.metadata
    listed = call("list", kind, namespaced, label_selector="patched=yes")
    assert [i.metadata.name for i in listed.items] == [name], listed.items

    # A watch from the list sees the delete.
    events = []

    def follow(rv=listed.metadata.resource_version):
        w = watch.Watch()
        lister = getattr(rbac, f"list_namespaced_{snake(kind)}" if namespaced else f"list_{snake(kind)}")
        kwargs = {"namespace": ns} if namespaced else {}
        for event in w.stream(lister, resource_version=rv, timeout_seconds=10, **kwargs):
            events.append((event["type"], event["object"].metadata.name))
            if event["type"] == "DELETED" and event["object"].metadata.name == name:
                w.stop()

    if kind.endswith("Binding"):
        # The roleRef cannot change.
        try:
            call("patch", kind, namespaced, name=name, body={"roleRef": {"name": "other"}})
            raise AssertionError("roleRef changed")
        except ApiException as e:
            assert e.status == 422 and "cannot change roleRef" in e.body, e.body

    thread = threading.Thread(target=follow)
    thread.start()
    call("delete", kind, namespaced, name=name)
    thread.join(15)
    assert ("DELETED", name) in events, events
    try:
        call("read", kind, namespaced, name=name)
        raise AssertionError("still there")
    except ApiException as e:
        assert e.status == 404, e

# The bootstrap policy; a name with ':' is sent in the path as %3A, which is decoded.
assert rbac.read_cluster_role_binding("cluster-admin").subjects[0].name == "system:masters"
assert rbac.read_cluster_role("system:basic-user").metadata.name == "system:basic-user"

# Reviews.
authz = client.AuthorizationV1Api(api_client)
sar = authz.create_self_subject_access_review(client.V1SelfSubjectAccessReview(
    spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=client.V1ResourceAttributes(
        verb="create", group="apps", resource="deployments", namespace=ns))))
assert sar.status.allowed is True, sar.status
try:
    authz.create_subject_access_review(client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(non_resource_attributes=client.V1NonResourceAttributes(
            path="/healthz", verb="get"))))
    raise AssertionError("a SubjectAccessReview without a user was accepted")
except ApiException as e:
    assert e.status == 422 and "at least one of user or group must be specified" in e.body, e.body
rules = authz.create_self_subject_rules_review(client.V1SelfSubjectRulesReview(
    spec=client.V1SelfSubjectRulesReviewSpec(namespace=ns)))
assert rules.status.resource_rules[0].verbs == ["*"] and rules.status.incomplete is False, rules.status

authn = client.AuthenticationV1Api(api_client)
me = authn.create_self_subject_review(client.V1SelfSubjectReview())
assert "system:masters" in me.status.user_info.groups, me.status
with open(os.environ["KUBECONFIG"]) as f:
    token = yaml.safe_load(f)["users"][0]["user"]["token"]
review = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)))
assert review.status.authenticated is True and review.status.user.username == me.status.user_info.username, review.status
bad = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token="wrong")))
assert not bad.status.authenticated and bad.status.error == "invalid bearer token", bad.status

print("ok")
