//! The admission plugins `Priority`, `DefaultStorageClass` and `StorageObjectInUseProtection`
//! with the pvc- and pv-protection controllers, driven by the real `kubectl` (the current one
//! and 1.27) against `keel up` and against `keel apiserver` on a real etcd 3.5.1. Expected
//! values are upstream's: the system classes' values (pkg/apis/scheduling/types.go), the
//! plugins' messages (plugin/pkg/admission/...), the newest default StorageClass chosen
//! (pkg/volume/util/storageclass.go), a claim held while a scheduled pod uses it and a
//! volume while it is Bound (pkg/controller/volume/{pvcprotection,pvprotection}).

use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, write};
use serde_json::Value;

/// Waits until `check` holds (at most 30 s).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether `kind/name` (in `ns`, if any) exists.
fn exists(kube: &Kube, version: Option<&str>, what: &[&str]) -> bool {
    let mut args = vec!["get", "--ignore-not-found", "-o", "name"];
    args.extend_from_slice(what);
    !ok(kube, version, &args).trim().is_empty()
}

fn pod(name: &str, ns: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{spec}  \
         containers:\n  - name: c\n    image: busybox\n"
    )
}

fn claim(name: &str, ns: &str, class: Option<&str>) -> String {
    let class = class.map_or(String::new(), |c| format!("  storageClassName: \"{c}\"\n"));
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\n  \
         namespace: {ns}\nspec:\n{class}  accessModes: [ReadWriteOnce]\n  resources:\n    \
         requests:\n      storage: 1Gi\n"
    )
}

fn storage_class(name: &str) -> String {
    format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: {name}\n  \
         annotations:\n    storageclass.kubernetes.io/is-default-class: \"true\"\n\
         provisioner: example.com/disk\n"
    )
}

fn volume(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {name}\nspec:\n  \
         capacity:\n    storage: 1Gi\n  accessModes: [ReadWriteOnce]\n  hostPath:\n    \
         path: /tmp/{name}\n"
    )
}

/// Priority: the system class's value, an unknown class and a given priority refused, a
/// global default applied and a second one refused.
fn priority(kube: &Kube, version: Option<&str>, s: &str, ns: &str) {
    let k = |args: &[&str]| ok(kube, version, args);
    let create = |name: &str, body: &str| k(&["create", "-f", &write(kube, name, body)]);
    create(
        &format!("critical-{s}.yaml"),
        &pod(
            "critical",
            ns,
            "  priorityClassName: system-cluster-critical\n",
        ),
    );
    let critical = get_json(kube, version, &["pod", "critical", "-n", ns]);
    assert_eq!(critical["spec"]["priority"], 2_000_000_000);
    assert_eq!(critical["spec"]["preemptionPolicy"], "PreemptLowerPriority");

    let unknown = write(
        kube,
        &format!("unknown-{s}.yaml"),
        &pod("unknown", ns, "  priorityClassName: foo\n"),
    );
    let err = fails(kube, version, &["create", "-f", &unknown]);
    assert!(
        err.contains("(Forbidden)")
            && err.contains(
                r#"pods "unknown" is forbidden: no PriorityClass with name foo was found"#
            ),
        "{err}"
    );
    let given = write(
        kube,
        &format!("given-{s}.yaml"),
        &pod(
            "given",
            ns,
            "  priorityClassName: system-cluster-critical\n  priority: 5\n",
        ),
    );
    let err = fails(kube, version, &["create", "-f", &given]);
    assert!(
        err.contains(
            r#"pods "given" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 2000000000 from the given PriorityClass name"#
        ),
        "{err}"
    );

    // No class and no default: priority 0.
    create(&format!("plain-{s}.yaml"), &pod("plain", ns, ""));
    let plain = get_json(kube, version, &["pod", "plain", "-n", ns]);
    assert_eq!(plain["spec"]["priority"], 0);
    assert_eq!(plain["spec"].get("priorityClassName"), None);

    let default = format!("default-{s}");
    k(&[
        "create",
        "priorityclass",
        &default,
        "--value=1000",
        "--global-default",
        "--preemption-policy=Never",
    ]);
    create(&format!("defaulted-{s}.yaml"), &pod("defaulted", ns, ""));
    let defaulted = get_json(kube, version, &["pod", "defaulted", "-n", ns]);
    assert_eq!(defaulted["spec"]["priorityClassName"], default.as_str());
    assert_eq!(defaulted["spec"]["priority"], 1000);
    assert_eq!(defaulted["spec"]["preemptionPolicy"], "Never");
    let second = format!("second-{s}");
    let err = fails(
        kube,
        version,
        &[
            "create",
            "priorityclass",
            &second,
            "--value=5",
            "--global-default",
        ],
    );
    assert!(
        err.contains(&format!(
            r#"priorityclasses.scheduling.k8s.io "{second}" is forbidden: PriorityClass {default} is already marked as default. Only one default can exist"#
        )),
        "{err}"
    );
    // Nor may another class become the default by an update.
    k(&["create", "priorityclass", &second, "--value=5"]);
    let err = fails(
        kube,
        version,
        &[
            "patch",
            "priorityclass",
            &second,
            "-p",
            r#"{"globalDefault":true}"#,
        ],
    );
    assert!(
        err.contains(&format!(
            "PriorityClass {default} is already marked as default. Only one default can exist"
        )),
        "{err}"
    );
    k(&["delete", "priorityclass", &default, &second]);
}

/// DefaultStorageClass: the newest default class for a claim that names none.
fn default_storage_class(kube: &Kube, version: Option<&str>, s: &str, ns: &str) {
    let k = |args: &[&str]| ok(kube, version, args);
    let create = |name: &str, body: &str| k(&["create", "-f", &write(kube, name, body)]);
    create(&format!("bare-{s}.yaml"), &claim("bare", ns, None));
    let bare = get_json(kube, version, &["pvc", "bare", "-n", ns]);
    assert_eq!(bare["spec"].get("storageClassName"), None);

    let (old, new) = (format!("old-{s}"), format!("new-{s}"));
    create(&format!("{old}.yaml"), &storage_class(&old));
    // A second later, so the second default is the newer (timestamps are in seconds).
    std::thread::sleep(Duration::from_millis(1100));
    create(&format!("{new}.yaml"), &storage_class(&new));
    create(
        &format!("classless-{s}.yaml"),
        &claim("classless", ns, None),
    );
    let classless = get_json(kube, version, &["pvc", "classless", "-n", ns]);
    assert_eq!(classless["spec"]["storageClassName"], new.as_str());
    create(&format!("none-{s}.yaml"), &claim("none", ns, Some("")));
    let none = get_json(kube, version, &["pvc", "none", "-n", ns]);
    assert_eq!(none["spec"]["storageClassName"], "");
    k(&["delete", "storageclass", &new]);
    create(&format!("older-{s}.yaml"), &claim("older", ns, None));
    let older = get_json(kube, version, &["pvc", "older", "-n", ns]);
    assert_eq!(older["spec"]["storageClassName"], old.as_str());
    k(&["delete", "storageclass", &old]);
}

fn finalizers(obj: &Value) -> Vec<&str> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// StorageObjectInUseProtection and the two controllers: a claim held while a scheduled pod
/// uses it, an unbound volume deleted at once, a bound one held until it is released.
fn protection(kube: &Kube, version: Option<&str>, s: &str, ns: &str) {
    let k = |args: &[&str]| ok(kube, version, args);
    let create = |name: &str, body: &str| k(&["create", "-f", &write(kube, name, body)]);
    create(&format!("data-{s}.yaml"), &claim("data", ns, Some("")));
    let data = get_json(kube, version, &["pvc", "data", "-n", ns]);
    assert_eq!(finalizers(&data), ["kubernetes.io/pvc-protection"]);
    create(
        &format!("user-{s}.yaml"),
        &pod(
            "user",
            ns,
            "  nodeName: node-1\n  volumes:\n  - name: data\n    persistentVolumeClaim:\n      \
             claimName: data\n",
        ),
    );
    k(&["delete", "pvc", "data", "-n", ns, "--wait=false"]);
    // Held while the pod uses it: give the controller time to (wrongly) release it.
    std::thread::sleep(Duration::from_secs(2));
    let held = get_json(kube, version, &["pvc", "data", "-n", ns]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert_eq!(finalizers(&held), ["kubernetes.io/pvc-protection"]);
    let table = k(&["get", "pvc", "data", "-n", ns]);
    assert!(
        table.lines().nth(1).unwrap().contains("Terminating"),
        "{table}"
    );
    k(&[
        "delete",
        "pod",
        "user",
        "-n",
        ns,
        "--grace-period=0",
        "--force",
    ]);
    eventually("the claim is deleted once its pod is gone", || {
        !exists(kube, version, &["pvc", "data", "-n", ns])
    });

    let free = format!("free-{s}");
    create(&format!("{free}.yaml"), &volume(&free));
    let pv = get_json(kube, version, &["pv", &free]);
    assert_eq!(finalizers(&pv), ["kubernetes.io/pv-protection"]);
    // Not bound: the delete completes (kubectl waits for it).
    k(&["delete", "pv", &free, "--timeout=30s"]);
    assert!(!exists(kube, version, &["pv", &free]));
}

/// A bound volume is held until it is released (the current kubectl only: `patch
/// --subresource` is newer than 1.27).
fn bound_volume(kube: &Kube, s: &str) {
    let k = |args: &[&str]| ok(kube, None, args);
    let bound = format!("bound-{s}");
    k(&["create", "-f", &write(kube, "bound.yaml", &volume(&bound))]);
    let set_phase = |phase: &str| {
        let status = format!(r#"{{"status":{{"phase":"{phase}"}}}}"#);
        let patch = [
            "patch",
            "pv",
            &bound,
            "--subresource=status",
            "--type=merge",
            "-p",
        ];
        k(&[&patch[..], &[status.as_str()]].concat());
    };
    set_phase("Bound");
    k(&["delete", "pv", &bound, "--wait=false"]);
    std::thread::sleep(Duration::from_secs(2));
    let held = get_json(kube, None, &["pv", &bound]);
    assert_eq!(finalizers(&held), ["kubernetes.io/pv-protection"]);
    set_phase("Released");
    eventually("the volume is deleted once released", || {
        !exists(kube, None, &["pv", &bound])
    });
}

fn admission(stack: Stack, flags: &[&str]) {
    let kube = Kube::start_with(stack, flags);
    for (version, s) in [(None, "cur"), (Some("1.27"), "old")] {
        let ns = format!("admission-{s}");
        ok(&kube, version, &["create", "namespace", &ns]);
        priority(&kube, version, s, &ns);
        default_storage_class(&kube, version, s, &ns);
        protection(&kube, version, s, &ns);
    }
    bound_volume(&kube, "cur");
}

#[test]
fn admission_on_keel_up() {
    admission(Stack::Up, &[]);
}

#[test]
fn admission_on_keel_apiserver_on_etcd() {
    // `keel apiserver` runs the two protection controllers by default.
    admission(Stack::OnEtcd, &[]);
}

#[test]
fn admission_plugins_can_be_disabled_and_unknown_ones_refused() {
    let kube = Kube::start_with(
        Stack::Up,
        &[
            "--disable-admission-plugins=Priority,StorageObjectInUseProtection,DefaultStorageClass",
            "--controllers=-pvc-protection,-pv-protection,*",
        ],
    );
    let k = |args: &[&str]| kube.kubectl_ok(args);
    k(&[
        "create",
        "-f",
        &write(&kube, "p.yaml", &pod("p", "default", "")),
    ]);
    let p = get_json(&kube, None, &["pod", "p"]);
    assert_eq!(p["spec"].get("priority"), None);
    k(&[
        "create",
        "-f",
        &write(&kube, "sc.yaml", &storage_class("sc")),
    ]);
    k(&[
        "create",
        "-f",
        &write(&kube, "c.yaml", &claim("c", "default", None)),
    ]);
    let c = get_json(&kube, None, &["pvc", "c"]);
    assert_eq!(c["spec"].get("storageClassName"), None);
    assert!(finalizers(&c).is_empty());

    let out = std::process::Command::new(keel_testkit::keel_bin())
        .args([
            "apiserver",
            "--etcd-servers=http://127.0.0.1:1",
            "--enable-admission-plugins=Bogus",
        ])
        .output()
        .expect("run keel apiserver");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"enable-admission-plugins plugin "Bogus" is unknown"#),
        "{err}"
    );
}
