//! The controllers every namespace relies on and kube-apiserver's bootstrap objects, on
//! `keel apiserver --controllers=*` on `keel store` (or etcd 3.5.1 with
//! `KEEL_TEST_TARGET=etcd`):
//!
//! - `serviceaccount`: the `default` ServiceAccount in every namespace, made again when
//!   deleted;
//! - `root-ca-cert-publisher`: the `kube-root-ca.crt` ConfigMap in every namespace, holding
//!   the CA the kubeconfig trusts, made again when deleted and set back when changed;
//! - the `default/kubernetes` Service at the first address of `--service-cluster-ip-range`,
//!   and its Endpoints at `--advertise-address` and the serving port;
//! - `componentstatuses`: `etcd-0` healthy from the store's member, `scheduler` and
//!   `controller-manager` unhealthy with kube-apiserver's message when nothing answers on
//!   their ports; get and list only.

use std::process::Command;
use std::time::Duration;

use keel_testkit::kube::Kube;
use keel_testkit::wait::until;
use keel_testkit::{Server, target_flavor};
use serde_json::Value;

/// How long a controller may take to act.
const LIMIT: Duration = Duration::from_secs(60);

fn get(kube: &Kube, args: &[&str]) -> Result<Value, String> {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    let out = kube.kubectl(&all);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// Waits for `args` to name an object; the object.
fn until_exists(kube: &Kube, args: &[&str]) -> Value {
    until(&format!("{args:?}"), LIMIT, || get(kube, args))
}

/// The CA the admin kubeconfig trusts (PEM).
fn kubeconfig_ca(kube: &Kube) -> String {
    let data = kube.kubectl_ok(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ]);
    let out = Command::new("base64")
        .arg("-d")
        .stdin({
            let dir = std::env::temp_dir().join(format!("keel-ca-{}", std::process::id()));
            std::fs::write(&dir, data.trim()).unwrap();
            std::fs::File::open(&dir).unwrap()
        })
        .output()
        .expect("run base64");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_namespace_gets_the_default_service_account_and_the_root_ca() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(&store.client_url, &["--controllers=*"]);
    let ca = kubeconfig_ca(&kube);
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");

    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        until_exists(&kube, &["-n", ns, "serviceaccount", "default"]);
        let cm = until_exists(&kube, &["-n", ns, "configmap", "kube-root-ca.crt"]);
        assert_eq!(cm["data"]["ca.crt"], ca.as_str(), "{cm}");
    }

    kube.kubectl_ok(&["create", "namespace", "team-a"]);
    let sa = until_exists(&kube, &["-n", "team-a", "serviceaccount", "default"]);
    assert_eq!(sa["metadata"]["namespace"], "team-a");
    let cm = until_exists(&kube, &["-n", "team-a", "configmap", "kube-root-ca.crt"]);
    assert_eq!(
        cm["metadata"]["annotations"]["kubernetes.io/description"],
        "Contains a CA bundle that can be used to verify the kube-apiserver when using \
         internal endpoints such as the internal service IP or kubernetes.default.svc. No \
         other usage is guaranteed across distributions of Kubernetes clusters."
    );
    assert_eq!(cm["data"], serde_json::json!({"ca.crt": ca}));

    // Deleted, both are made again (with new uids).
    let (sa_uid, cm_uid) = (sa["metadata"]["uid"].clone(), cm["metadata"]["uid"].clone());
    kube.kubectl_ok(&["-n", "team-a", "delete", "serviceaccount", "default"]);
    kube.kubectl_ok(&["-n", "team-a", "delete", "configmap", "kube-root-ca.crt"]);
    until("the default ServiceAccount made again", LIMIT, || {
        let sa = get(&kube, &["-n", "team-a", "serviceaccount", "default"])?;
        if sa["metadata"]["uid"] != sa_uid {
            Ok(())
        } else {
            Err(sa.to_string())
        }
    });
    until("kube-root-ca.crt made again", LIMIT, || {
        let cm = get(&kube, &["-n", "team-a", "configmap", "kube-root-ca.crt"])?;
        if cm["metadata"]["uid"] != cm_uid {
            Ok(())
        } else {
            Err(cm.to_string())
        }
    });

    // Changed, the ConfigMap is set back.
    kube.kubectl_ok(&[
        "-n",
        "team-a",
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"tampered","extra":"x"}}"#,
    ]);
    until("kube-root-ca.crt set back", LIMIT, || {
        let cm = get(&kube, &["-n", "team-a", "configmap", "kube-root-ca.crt"])?;
        if cm["data"] == serde_json::json!({"ca.crt": ca}) {
            Ok(())
        } else {
            Err(cm["data"].to_string())
        }
    });
}

#[test]
fn the_kubernetes_service_points_at_this_apiserver() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(
        &store.client_url,
        &[
            "--service-cluster-ip-range=10.96.0.0/12",
            "--advertise-address=10.1.2.3",
        ],
    );
    let port: u16 = kube
        .kubectl_ok(&[
            "config",
            "view",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ])
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let svc = until_exists(&kube, &["-n", "default", "service", "kubernetes"]);
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1", "{svc}");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(
        svc["spec"]["ports"],
        serde_json::json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}])
    );
    assert_eq!(
        svc["metadata"]["labels"],
        serde_json::json!({"component": "apiserver", "provider": "kubernetes"})
    );
    let ep = until_exists(&kube, &["-n", "default", "endpoints", "kubernetes"]);
    assert_eq!(
        ep["subsets"],
        serde_json::json!([{
            "addresses": [{"ip": "10.1.2.3"}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }]),
        "{ep}"
    );
    let table = kube.kubectl_ok(&["get", "service", "kubernetes", "--no-headers"]);
    assert_eq!(
        table.split_whitespace().take(5).collect::<Vec<_>>(),
        ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    );

    // A changed port is set back.
    kube.kubectl_ok(&[
        "patch",
        "service",
        "kubernetes",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/ports/0/port","value":8443}]"#,
    ]);
    until("the kubernetes service's port set back", LIMIT, || {
        let svc = get(&kube, &["service", "kubernetes"])?;
        if svc["spec"]["ports"][0]["port"] == 443 {
            Ok(())
        } else {
            Err(svc["spec"].to_string())
        }
    });
}

#[test]
fn componentstatuses_show_the_store_healthy_and_absent_components_as_upstream() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on(&store.client_url);
    let out = kube.kubectl(&["get", "componentstatuses"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Warning: v1 ComponentStatus is deprecated in v1.19+"
    );
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(
        rows[0].split_whitespace().collect::<Vec<_>>(),
        ["NAME", "STATUS", "MESSAGE", "ERROR"],
        "{table}"
    );
    let row = |name: &str| {
        rows.iter()
            .find(|r| r.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{table}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("etcd-0"), "etcd-0 Healthy ok");
    for (name, port) in [("controller-manager", 10257), ("scheduler", 10259)] {
        assert_eq!(
            row(name),
            format!(
                "{name} Unhealthy Get \"https://127.0.0.1:{port}/healthz\": dial tcp \
                 127.0.0.1:{port}: connect: connection refused"
            )
        );
    }
    assert_eq!(rows.len(), 4, "{table}");
    let etcd = get(&kube, &["cs", "etcd-0"]).unwrap();
    assert_eq!(
        etcd["conditions"],
        serde_json::json!([{"type": "Healthy", "status": "True", "message": "ok"}])
    );
    let missing = kube.kubectl(&["get", "componentstatus", "etcd-9"]);
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        "Warning: v1 ComponentStatus is deprecated in v1.19+\n\
         Error from server: Component not found: etcd-9"
    );
    let refused = kube.kubectl(&["delete", "componentstatus", "etcd-0"]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("MethodNotAllowed")
            || String::from_utf8_lossy(&refused.stderr)
                .contains("the server does not allow this method on the requested resource"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let resources = kube.kubectl_ok(&["api-resources", "-o", "wide"]);
    let cs = resources
        .lines()
        .find(|l| l.starts_with("componentstatuses"))
        .unwrap_or_else(|| panic!("{resources}"));
    let columns: Vec<&str> = cs.split_whitespace().collect();
    assert!(
        columns.contains(&"cs") && columns.last() == Some(&"get,list"),
        "{cs}"
    );
}
