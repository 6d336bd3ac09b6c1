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
//! `tests/python/rbac.py` against both stacks. The bootstrap policy is kube-apiserver
//! 1.34's (its golden testdata: counts, `system:controller:deployment-controller`, the
//! kube-system Role `extension-apiserver-authentication-reader`), and a restart reconciles
//! it as the `rbac/bootstrap-roles` hook does: missing rules, subjects and objects come back,
//! extra labels and subjects stay, a changed roleRef is recreated, and a role annotated
//! `autoupdate: "false"` is left as changed.

use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, write};
use serde_json::{Value, json};

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

/// The number of objects labelled `kubernetes.io/bootstrapping=rbac-defaults` of `kind`.
fn bootstrapped(kube: &Kube, version: Option<&str>, kind: &str) -> usize {
    let list = get_json(
        kube,
        version,
        &[
            kind,
            "-A",
            "-l",
            "kubernetes.io/bootstrapping=rbac-defaults",
        ],
    );
    list["items"].as_array().map_or(0, Vec::len)
}

/// `obj` without what the server sets, for comparing with the golden data.
fn golden_part(obj: &Value) -> Value {
    let meta = &obj["metadata"];
    json!({"kind": obj["kind"], "name": meta["name"], "namespace": meta.get("namespace"),
        "labels": meta["labels"], "annotations": meta["annotations"], "rules": obj["rules"]})
}

/// A JSON patch of `kind/name`.
fn json_patch(kube: &Kube, version: Option<&str>, what: &[&str], patch: Value) {
    let patch = patch.to_string();
    let mut args = vec!["patch"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["--type=json", "-p", &patch]);
    ok(kube, version, &args);
}

/// The 1.34 bootstrap policy; then, changed, deleted and protected objects across a restart.
fn bootstrap_policy(kube: &mut Kube, version: Option<&str>) {
    let run = |kube: &Kube, args: &[&str]| ok(kube, version, args);
    // plugin/pkg/auth/authorizer/rbac/bootstrappolicy: policy.go's 31 ClusterRoles and 12
    // bindings, controller_policy.go's 37 (each bound), namespace_policy.go's 7 and 7.
    assert_eq!(bootstrapped(kube, version, "clusterroles"), 68);
    assert_eq!(bootstrapped(kube, version, "clusterrolebindings"), 49);
    assert_eq!(bootstrapped(kube, version, "roles"), 7);
    assert_eq!(bootstrapped(kube, version, "rolebindings"), 7);
    let defaults = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let autoupdate = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    let events = json!({"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
        "verbs": ["create", "patch", "update"]});
    let apps = |resource: &str, verbs: &[&str]| json!({"apiGroups": ["apps", "extensions"], "resources": [resource], "verbs": verbs});
    let deployments = get_json(
        kube,
        version,
        &["clusterrole", "system:controller:deployment-controller"],
    );
    assert_eq!(
        golden_part(&deployments),
        json!({"kind": "ClusterRole", "name": "system:controller:deployment-controller",
            "namespace": null, "labels": defaults, "annotations": autoupdate, "rules": [
            apps("deployments", &["get", "list", "update", "watch"]),
            apps("deployments/status", &["update"]),
            apps("deployments/finalizers", &["update"]),
            apps("replicasets", &["create", "delete", "get", "list", "patch", "update", "watch"]),
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "update", "watch"]},
            events]})
    );
    let bound = get_json(
        kube,
        version,
        &[
            "clusterrolebinding",
            "system:controller:deployment-controller",
        ],
    );
    assert_eq!(
        bound["subjects"],
        json!([{"kind": "ServiceAccount", "name": "deployment-controller", "namespace": "kube-system"}])
    );
    let reader = get_json(
        kube,
        version,
        &[
            "role",
            "extension-apiserver-authentication-reader",
            "-n",
            "kube-system",
        ],
    );
    assert_eq!(
        golden_part(&reader),
        json!({"kind": "Role", "name": "extension-apiserver-authentication-reader",
            "namespace": "kube-system", "labels": defaults, "annotations": autoupdate, "rules": [
            {"apiGroups": [""], "resourceNames": ["extension-apiserver-authentication"],
                "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]})
    );

    // Changes a restart reconciles.
    run(
        kube,
        &["label", "clusterrole", "view", "example.com/extra=kept"],
    );
    json_patch(
        kube,
        version,
        &["clusterrole", "view"],
        json!([{"op": "remove", "path": "/rules/0"}]),
    );
    json_patch(
        kube,
        version,
        &["clusterrole", "system:discovery"],
        json!([{"op": "replace", "path": "/rules",
            "value": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}]),
    );
    json_patch(
        kube,
        version,
        &["clusterrolebinding", "system:discovery"],
        json!([{"op": "replace", "path": "/subjects", "value": [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "extra"}]}]),
    );
    run(kube, &["delete", "clusterrole", "system:basic-user"]);
    run(
        kube,
        &[
            "delete",
            "role",
            "system:controller:bootstrap-signer",
            "-n",
            "kube-public",
        ],
    );
    run(kube, &["delete", "clusterrolebinding", "system:kube-dns"]);
    run(
        kube,
        &[
            "create",
            "clusterrolebinding",
            "system:kube-dns",
            "--clusterrole=view",
            "--serviceaccount=kube-system:other",
        ],
    );
    // Protected: left as changed.
    run(
        kube,
        &[
            "annotate",
            "--overwrite",
            "clusterrole",
            "edit",
            "rbac.authorization.kubernetes.io/autoupdate=false",
        ],
    );
    run(
        kube,
        &[
            "label",
            "clusterrole",
            "edit",
            "rbac.authorization.k8s.io/aggregate-to-admin-",
        ],
    );
    let nothing = json!([{"matchLabels": {"example.com/aggregate-to-nothing": "true"}}]);
    json_patch(
        kube,
        version,
        &["clusterrole", "edit"],
        json!([{"op": "replace", "path": "/aggregationRule/clusterRoleSelectors", "value": nothing}]),
    );

    kube.kill_and_restart();
    // Ready only once the hook is done: its own readiness check.
    let check = run(
        kube,
        &["get", "--raw", "/readyz/poststarthook/rbac/bootstrap-roles"],
    );
    assert_eq!(check, "ok");
    let verbose = run(kube, &["get", "--raw", "/readyz?verbose"]);
    assert!(
        verbose.contains("[+]poststarthook/rbac/bootstrap-roles ok"),
        "{verbose}"
    );

    let view = get_json(kube, version, &["clusterrole", "view"]);
    assert_eq!(
        view["metadata"]["labels"]["example.com/extra"], "kept",
        "{view}"
    );
    until_aggregated(kube, version, "view", "pods");
    let discovery = get_json(kube, version, &["clusterrole", "system:discovery"]);
    let urls: Vec<&str> = discovery["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["nonResourceURLs"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    for url in [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ] {
        assert!(urls.contains(&url), "{url} missing: {discovery}");
    }
    // The stored rule first, then each missing URL as a simple rule (validation.Covers).
    assert_eq!(
        discovery["rules"][0],
        json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]})
    );
    assert_eq!(
        discovery["rules"][1],
        json!({"nonResourceURLs": ["/api"], "verbs": ["get"]})
    );
    let subjects =
        get_json(kube, version, &["clusterrolebinding", "system:discovery"])["subjects"].clone();
    assert_eq!(
        subjects,
        json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "extra"},
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}])
    );
    let basic = get_json(kube, version, &["clusterrole", "system:basic-user"]);
    assert_eq!(basic["metadata"]["annotations"], autoupdate);
    assert_eq!(basic["rules"].as_array().map(Vec::len), Some(2), "{basic}");
    run(
        kube,
        &[
            "get",
            "role",
            "system:controller:bootstrap-signer",
            "-n",
            "kube-public",
        ],
    );
    let dns = get_json(kube, version, &["clusterrolebinding", "system:kube-dns"]);
    assert_eq!(dns["roleRef"]["name"], "system:kube-dns", "{dns}");
    assert_eq!(
        dns["subjects"],
        json!([{"kind": "ServiceAccount", "name": "kube-dns", "namespace": "kube-system"}])
    );
    let edit = get_json(kube, version, &["clusterrole", "edit"]);
    assert_eq!(
        edit["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
        "false"
    );
    assert!(
        edit["metadata"]["labels"]
            .get("rbac.authorization.k8s.io/aggregate-to-admin")
            .is_none(),
        "{edit}"
    );
    assert_eq!(edit["aggregationRule"]["clusterRoleSelectors"], nothing);
}

#[test]
fn rbac_on_keel_up() {
    let mut kube = Kube::start(Stack::Up);
    rbac(&kube, None);
    bootstrap_policy(&mut kube, None);
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
    let mut kube = Kube::start_with(Stack::OnEtcd, &[AGGREGATION]);
    rbac(&kube, Some("1.27"));
    bootstrap_policy(&mut kube, Some("1.27"));
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
