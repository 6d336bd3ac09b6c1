//! RBAC with the real `kubectl` (the current one and 1.27) against `keel up` and against
//! `keel apiserver` on a real etcd 3.5.1 (there with `--controllers` naming
//! `clusterrole-aggregation`, which `keel apiserver` leaves to a kube-controller-manager by
//! default): the bootstrap ClusterRoles and ClusterRoleBindings are there from the start;
//! `admin`, `edit` and `view` carry the rules they aggregate, and a new ClusterRole labelled
//! `aggregate-to-view` shows up in `view`'s rules (and so in `edit`'s and `admin`'s); roles
//! and bindings made with `kubectl create` and `apply` are printed as upstream prints them,
//! validated with its words, and a binding's roleRef cannot change; `kubectl auth can-i`
//! answers yes (keel authorizes every request), `auth can-i --list` lists `*`, `auth whoami`
//! names the admin; the reviews are created only. The Python client runs
//! `tests/python/rbac.py` against both stacks.

use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, write};
use serde_json::Value;

const AGGREGATION: &str = "--controllers=namespace,clusterrole-aggregation";

/// Whether the ClusterRole `name` has a rule on `resource`.
fn has_resource(role: &Value, resource: &str) -> bool {
    role["rules"].as_array().into_iter().flatten().any(|r| {
        r["resources"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == resource))
    })
}

/// Waits (10 s at most) until the ClusterRole `name` has a rule on `resource`.
fn until_aggregated(kube: &Kube, version: Option<&str>, name: &str, resource: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let role = get_json(kube, version, &["clusterrole", name]);
        if has_resource(&role, resource) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never aggregated {resource}: {role}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

const WIDGET_VIEWER: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widget-viewer
  labels:
    rbac.authorization.k8s.io/aggregate-to-view: "true"
rules:
- apiGroups: [example.com]
  resources: [widgets]
  verbs: [get, list, watch]
"#;

fn binding(role: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: applied\n  \
         namespace: default\nroleRef:\n  kind: ClusterRole\n  name: {role}\nsubjects:\n- kind: User\n  \
         name: carol\n"
    )
}

fn rbac(kube: &Kube, version: Option<&str>) {
    let run = |args: &[&str]| ok(kube, version, args);

    // The bootstrap policy, labelled and annotated as kube-apiserver stores it.
    let roles = run(&["get", "clusterroles"]);
    assert!(roles.starts_with("NAME"), "{roles}");
    assert!(
        roles.lines().next().unwrap().contains("CREATED AT"),
        "{roles}"
    );
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "system:node",
        "system:kube-scheduler",
        "system:kube-controller-manager",
        "system:monitoring",
        "system:aggregate-to-view",
    ] {
        assert!(
            roles
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} missing:\n{roles}"
        );
    }
    let admin = get_json(kube, version, &["clusterrole", "cluster-admin"]);
    assert_eq!(
        admin["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );
    assert_eq!(
        admin["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
        "true"
    );
    let masters = run(&["get", "clusterrolebinding", "cluster-admin", "-o", "wide"]);
    let header: Vec<&str> = masters.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    );
    assert!(masters.contains("ClusterRole/cluster-admin") && masters.contains("system:masters"));

    // Aggregation: view's rules, edit's (view's and its own), admin's (edit's and its own);
    // then a new role labelled to aggregate into view, through view into edit and admin.
    until_aggregated(kube, version, "view", "pods");
    until_aggregated(kube, version, "edit", "pods/exec");
    until_aggregated(kube, version, "admin", "rolebindings");
    until_aggregated(kube, version, "admin", "pods");
    let viewer = write(kube, "widget-viewer.yaml", WIDGET_VIEWER);
    run(&["apply", "-f", &viewer]);
    until_aggregated(kube, version, "view", "widgets");
    until_aggregated(kube, version, "admin", "widgets");
    run(&["delete", "clusterrole", "widget-viewer"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while has_resource(
        &get_json(kube, version, &["clusterrole", "view"]),
        "widgets",
    ) {
        assert!(
            Instant::now() < deadline,
            "view kept the deleted role's rules"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // kubectl create, printed as upstream prints them.
    run(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list",
        "--resource=pods",
        "-n",
        "default",
    ]);
    run(&[
        "create",
        "clusterrole",
        "node-reader",
        "--verb=get",
        "--resource=nodes",
    ]);
    run(&[
        "create",
        "rolebinding",
        "read-pods",
        "--role=pod-reader",
        "--user=alice",
        "-n",
        "default",
    ]);
    run(&[
        "create",
        "clusterrolebinding",
        "read-nodes",
        "--clusterrole=node-reader",
        "--group=devs",
        "--serviceaccount=default:default",
    ]);
    let role = get_json(kube, version, &["role", "pod-reader", "-n", "default"]);
    assert_eq!(
        role["rules"][0]["verbs"],
        serde_json::json!(["get", "list"])
    );
    let wide = run(&[
        "get",
        "rolebinding",
        "read-pods",
        "-n",
        "default",
        "-o",
        "wide",
    ]);
    let row: Vec<&str> = wide.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        (row[0], row[1], row[3]),
        ("read-pods", "Role/pod-reader", "alice"),
        "{wide}"
    );
    let wide = run(&["get", "clusterrolebinding", "read-nodes", "-o", "wide"]);
    assert!(
        wide.contains("ClusterRole/node-reader")
            && wide.contains("devs")
            && wide.contains("default/default"),
        "{wide}"
    );
    // The defaults: a User's apiGroup.
    let bound = get_json(
        kube,
        version,
        &["rolebinding", "read-pods", "-n", "default"],
    );
    assert_eq!(
        bound["subjects"][0]["apiGroup"],
        "rbac.authorization.k8s.io"
    );

    // apply, then a changed roleRef is refused with upstream's words.
    let applied = write(kube, "binding.yaml", &binding("view"));
    run(&["apply", "-f", &applied]);
    let changed = write(kube, "changed.yaml", &binding("edit"));
    let err = fails(kube, version, &["apply", "-f", &changed]);
    assert!(err.contains("cannot change roleRef"), "{err}");
    let rule = write(
        kube,
        "bad-role.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: bad\n  namespace: default\nrules:\n- apiGroups: ['']\n  resources: [pods]\n",
    );
    let err = fails(kube, version, &["apply", "-f", &rule]);
    assert!(
        err.contains("rules[0].verbs: Required value: verbs must contain at least one value"),
        "{err}"
    );

    // The reviews: keel authorizes everything, as kube-apiserver with AlwaysAllow does.
    assert_eq!(
        run(&["auth", "can-i", "create", "deployments"]).trim(),
        "yes"
    );
    assert_eq!(
        run(&["auth", "can-i", "delete", "nodes", "--all-namespaces"]).trim(),
        "yes"
    );
    let list = run(&["auth", "can-i", "--list"]);
    assert!(list.contains("*.*") && list.contains("[*]"), "{list}");
    let resources = run(&[
        "api-resources",
        "--api-group=authorization.k8s.io",
        "-o",
        "wide",
    ]);
    let verbs = resources
        .lines()
        .find(|l| l.starts_with("selfsubjectaccessreviews"))
        .map(|l| l.split_whitespace().last().unwrap_or(""));
    assert_eq!(verbs, Some("create"), "{resources}");
    let err = fails(
        kube,
        version,
        &[
            "get",
            "--raw",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        ],
    );
    assert!(
        err.contains("MethodNotAllowed") || err.contains("not allow"),
        "{err}"
    );
}

#[test]
fn rbac_on_keel_up() {
    let kube = Kube::start(Stack::Up);
    rbac(&kube, None);
    // `auth whoami` (SelfSubjectReview v1; kubectl 1.27 asks for v1beta1 only).
    let me = ok(&kube, None, &["auth", "whoami"]);
    assert!(
        me.contains("admin") && me.contains("system:masters"),
        "{me}"
    );
    assert!(me.contains("system:authenticated"), "{me}");
}

#[test]
fn rbac_on_keel_apiserver_on_etcd_with_kubectl_1_27() {
    let kube = Kube::start_with(Stack::OnEtcd, &[AGGREGATION]);
    rbac(&kube, Some("1.27"));
}

#[test]
fn python_rbac_on_keel_up() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/rbac.py");
    Kube::start(Stack::Up).python_ok(script, &[]);
}

#[test]
fn python_rbac_on_keel_apiserver_on_etcd() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/rbac.py");
    Kube::start_with(Stack::OnEtcd, &[AGGREGATION]).python_ok(script, &[]);
}
