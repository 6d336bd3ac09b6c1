//! `keel snapshot save` and `status`: a backup of every store of a control plane. Against
//! `keel apiserver` on two etcd 3.5.1 stores (Events routed to the second by
//! `--etcd-servers-overrides`), the backup holds one etcd snapshot per store, each at its own
//! revision, that `etcdutl snapshot status` reads; `keel snapshot status` checks every file
//! against the manifest and names a damaged or missing one; a second save into the same
//! folder is refused.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use keel_testkit::kube::Kube;
use keel_testkit::{Flavor, Server, keel_bin};

/// Runs `keel snapshot ARGS`.
fn snapshot(args: &[&str]) -> Output {
    Command::new(keel_bin())
        .arg("snapshot")
        .args(args)
        .output()
        .expect("run keel snapshot")
}

/// `etcdutl snapshot status FILE -w json`.
fn etcdutl_status(file: &Path) -> Value {
    let (_, etcdctl) = keel_testkit::etcd35_bins().expect("etcd 3.5 tools");
    let etcdutl = etcdctl.with_file_name("etcdutl");
    let out = Command::new(&etcdutl)
        .args([
            "snapshot",
            "status",
            &file.display().to_string(),
            "-w",
            "json",
        ])
        .output()
        .expect("run etcdutl");
    assert!(
        out.status.success(),
        "etcdutl snapshot status {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("etcdutl's JSON")
}

/// Creates a ConfigMap and an Event through `kube`.
fn write_objects(kube: &Kube) {
    kube.kubectl_ok(&["create", "configmap", "c1", "--from-literal=a=b"]);
    let file = kube.scratch.join("event.json");
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "e1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p1"},
        "reason": "Scheduled", "message": "assigned", "type": "Normal",
    });
    std::fs::write(&file, event.to_string()).expect("write the event");
    kube.kubectl_ok(&["create", "-f", &file.display().to_string()]);
}

#[test]
fn a_backup_of_keel_apiserver_on_two_etcd_stores_holds_both() {
    let main = Server::start(Flavor::Etcd);
    let events = Server::start(Flavor::Etcd);
    let overrides = format!("--etcd-servers-overrides=/events#{}", events.client_url);
    let kube = Kube::start_on_with(&main.client_url, &[overrides.as_str()]);
    write_objects(&kube);
    let dir = kube.scratch.join("backup");
    let dir_arg = dir.display().to_string();
    let etcd_servers = format!("--etcd-servers={}", main.client_url);
    let out = snapshot(&["save", &dir_arg, &etcd_servers, &overrides]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let stores = manifest["stores"].as_array().expect("stores");
    let names: Vec<&str> = stores.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["main", "events"]);
    assert_eq!(stores[1]["resources"], json!(["/events"]));
    for store in stores {
        let file = dir.join(store["file"].as_str().unwrap());
        let status = etcdutl_status(&file);
        assert_eq!(
            status["revision"].as_i64(),
            store["revision"].as_i64(),
            "{file:?}: etcdutl and the manifest disagree on the revision"
        );
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            store["size"].as_u64().unwrap()
        );
    }
    let status = snapshot(&["status", &dir_arg]);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(
        table.contains("events") && table.contains("/events"),
        "{table}"
    );

    let again = snapshot(&["save", &dir_arg, &etcd_servers]);
    assert!(
        !again.status.success(),
        "a second save into a backup folder"
    );

    // A damaged file and a missing one are named.
    let events_db = dir.join("events.db");
    let mut bytes = std::fs::read(&events_db).unwrap();
    bytes[5000] ^= 0xff;
    std::fs::write(&events_db, &bytes).unwrap();
    let damaged = snapshot(&["status", &dir_arg]);
    assert!(!damaged.status.success());
    let err = String::from_utf8_lossy(&damaged.stderr);
    assert!(
        err.contains("events store's snapshot") && err.contains("corrupt"),
        "{err}"
    );
    std::fs::remove_file(&events_db).unwrap();
    let missing = snapshot(&["status", &dir_arg]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn a_store_that_cannot_be_reached_fails_the_save_and_writes_no_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("backup");
    let port = keel_testkit::free_port();
    let out = snapshot(&[
        "save",
        &target.display().to_string(),
        &format!("--etcd-servers=http://127.0.0.1:{port}"),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the store"), "{err}");
    assert!(!target.join("manifest.json").exists());
}
