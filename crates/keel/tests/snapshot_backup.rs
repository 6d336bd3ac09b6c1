//! `keel snapshot save` and `status`: a backup of every store of a control plane. Against
//! `keel apiserver` on two etcd 3.5.1 stores (Events routed to the second by
//! `--etcd-servers-overrides`), the backup holds one etcd snapshot per store, each at its own
//! revision, that `etcdutl snapshot status` reads; `keel snapshot status` checks every file
//! against the manifest and names a damaged or missing one; a second save into the same
//! folder is refused. Each file rewritten with `keel snapshot rewrite --bump-revision
//! --mark-compacted`, restored with etcdutl 3.5.1 and served by etcd again gives `keel
//! apiserver` every object of the backup, nothing after it, new writes past every old
//! resourceVersion and 410 Gone to a watch from an old one, on both stores.
//!
//! `keel snapshot restore`: a backup of `keel up --events-store` (both stores) saved, the
//! folder wiped, restored and started again holds every object of the backup and nothing
//! written after it, and the apiserver's CA and keys of before; its revisions moved a billion past the backup's, so a new write is
//! above any resourceVersion handed out before, and a watch or an Exact list from an old
//! resourceVersion answers 410 Gone. A backup with a damaged or missing file, or a target
//! that is not empty, is refused and nothing is changed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use keel_testkit::kube::{Kube, Stack};
use keel_testkit::snapshot::{restore_into_etcd, status};
use keel_testkit::{Flavor, Server, keel_bin};

/// Runs `keel snapshot ARGS`.
fn snapshot(args: &[&str]) -> Output {
    Command::new(keel_bin())
        .arg("snapshot")
        .args(args)
        .output()
        .expect("run keel snapshot")
}

/// `keel snapshot save DIR FLAGS`, which must succeed: the manifest it wrote.
fn save(dir: &Path, flags: &[&str]) -> Value {
    let mut args = vec!["save".to_string(), dir.display().to_string()];
    args.extend(flags.iter().map(|f| f.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = snapshot(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// etcdutl 3.5, beside etcdctl 3.5.
fn etcdutl() -> PathBuf {
    let (_, etcdctl) = keel_testkit::etcd35_bins().expect("etcd 3.5 tools");
    etcdctl.with_file_name("etcdutl")
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
    let manifest = save(&dir, &[&etcd_servers, &overrides]);
    let stores = manifest["stores"].as_array().expect("stores");
    let names: Vec<&str> = stores.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["main", "events"]);
    assert_eq!(stores[1]["resources"], json!(["/events"]));
    for store in stores {
        let file = dir.join(store["file"].as_str().unwrap());
        let read = status(&etcdutl(), &file);
        assert_eq!(
            read["revision"].as_i64(),
            store["revision"].as_i64(),
            "{file:?}: etcdutl and the manifest disagree on the revision"
        );
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            store["size"].as_u64().unwrap()
        );
    }
    let checked = snapshot(&["status", &dir_arg]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let table = String::from_utf8_lossy(&checked.stdout);
    assert!(
        table.contains("events") && table.contains("/events"),
        "{table}"
    );

    // For stores that stay on etcd: the snapshot rewritten past its revisions, which
    // etcdutl reads.
    let rewritten = kube.scratch.join("rewritten.db");
    let main_db = dir.join("main.db").display().to_string();
    let rewritten_arg = rewritten.display().to_string();
    let out = snapshot(&[
        "rewrite",
        &main_db,
        &rewritten_arg,
        "--bump-revision=1000",
        "--mark-compacted",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    status(&etcdutl(), &rewritten);

    restores_with_etcdutl_past_every_old_revision(&kube, &dir, &manifest);

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

/// The restore of a backup of `keel apiserver` on etcd, as an operator makes it: every
/// file rewritten past a billion revisions with the past marked compacted, restored with
/// etcdutl 3.5.1 into a new data folder, a real etcd started on each and `keel apiserver`
/// on them. Every object of the backup is back with its resourceVersion, nothing written
/// after it, a new write lands past every resourceVersion handed out before, and a watch
/// from an old one answers 410 Gone on both stores.
fn restores_with_etcdutl_past_every_old_revision(kube: &Kube, dir: &Path, manifest: &Value) {
    let etcdutl = etcdutl();
    let backed_up = rv(kube, "configmap/c1");
    let event = rv(kube, "event/e1");
    kube.kubectl_ok(&["create", "configmap", "after", "--from-literal=a=b"]);
    let newest = rv(kube, "configmap/after");
    let restored: Vec<Server> = manifest["stores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|store| {
            let name = store["name"].as_str().unwrap();
            let file = dir.join(store["file"].as_str().unwrap());
            let rewritten = kube.scratch.join(format!("{name}.bumped.db"));
            let out = snapshot(&[
                "rewrite",
                &file.display().to_string(),
                &rewritten.display().to_string(),
                "--bump-revision=1000000000",
                "--mark-compacted",
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let data = kube.scratch.join(format!("{name}.restored"));
            restore_into_etcd(&etcdutl, &rewritten, data)
        })
        .collect();
    let overrides = format!(
        "--etcd-servers-overrides=/events#{}",
        restored[1].client_url
    );
    let again = Kube::start_on_with(&restored[0].client_url, &[overrides.as_str()]);
    assert_eq!(rv(&again, "configmap/c1"), backed_up);
    assert_eq!(rv(&again, "event/e1"), event);
    assert!(
        !again
            .kubectl(&["get", "configmap", "after"])
            .status
            .success(),
        "an object written after the backup came back"
    );
    again.kubectl_ok(&["create", "configmap", "new", "--from-literal=a=b"]);
    let new = rv(&again, "configmap/new");
    assert!(
        new > newest + 1_000_000_000 - 1_000,
        "a new write at {new}, not past the revisions handed out before the restore ({newest})"
    );
    for (path, from) in [
        ("/api/v1/namespaces/default/configmaps", backed_up),
        ("/api/v1/namespaces/default/events", event),
    ] {
        let watch = again.kubectl_ok(&[
            "get",
            "--raw",
            &format!("{path}?watch=1&resourceVersion={from}&timeoutSeconds=2"),
        ]);
        assert!(
            watch.contains("\"code\":410"),
            "a watch of {path} from {from}: {watch}"
        );
    }
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

/// The resourceVersion of `kind/name` in `default`.
fn rv(kube: &Kube, what: &str) -> i64 {
    kube.kubectl_ok(&["get", what, "-o", "jsonpath={.metadata.resourceVersion}"])
        .trim()
        .parse()
        .expect("a resourceVersion")
}

#[test]
fn a_backup_of_keel_up_with_an_events_store_restores_both_stores_past_every_old_revision() {
    let events_client = format!("http://127.0.0.1:{}", keel_testkit::free_port());
    let events_peer = format!("http://127.0.0.1:{}", keel_testkit::free_port());
    let events_flags = [
        "--events-store".to_string(),
        format!("--events-listen-client-urls={events_client}"),
        format!("--events-listen-peer-urls={events_peer}"),
    ];
    let events_flags: Vec<&str> = events_flags.iter().map(String::as_str).collect();
    let mut kube = Kube::start_with(Stack::Up, &events_flags);
    write_objects(&kube);
    let backed_up = rv(&kube, "configmap/c1");
    let data = kube.scratch.join("keel.data");
    let dir = kube.scratch.join("backup");
    let dir_arg = dir.display().to_string();
    let manifest = save(&dir, &[&format!("--data-dir={}", data.display())]);
    let folders: Vec<&str> = manifest["stores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["folder"].as_str().unwrap())
        .collect();
    assert_eq!(folders, ["store", "events"]);
    // Written after the backup: gone after the restore.
    kube.kubectl_ok(&["create", "configmap", "after", "--from-literal=a=b"]);
    let newest = rv(&kube, "configmap/after");
    kube.kill();
    // A stopped keel up's folder names ports another process may hold now: refused.
    let stopped = snapshot(&[
        "save",
        &kube.scratch.join("late").display().to_string(),
        &format!("--data-dir={}", data.display()),
    ]);
    let err = String::from_utf8_lossy(&stopped.stderr);
    assert!(
        !stopped.status.success() && err.contains("no keel up is running"),
        "{err}"
    );

    // A damaged backup and a non-empty target are refused, and change nothing.
    let restored = kube.scratch.join("restored");
    let restored_arg = format!("--data-dir={}", restored.display());
    std::fs::create_dir(&restored).unwrap();
    std::fs::write(restored.join("keep"), b"x").unwrap();
    let out = snapshot(&["restore", &dir_arg, &restored_arg]);
    assert!(!out.status.success(), "a restore into a non-empty folder");
    assert_eq!(std::fs::read(restored.join("keep")).unwrap(), b"x");
    std::fs::remove_dir_all(&restored).unwrap();
    let events_db = dir.join("events.db");
    let good = std::fs::read(&events_db).unwrap();
    let mut bad = good.clone();
    bad[100] ^= 0xff;
    std::fs::write(&events_db, &bad).unwrap();
    let out = snapshot(&["restore", &dir_arg, &restored_arg]);
    assert!(!out.status.success(), "a restore of a damaged backup");
    assert!(
        !restored.exists(),
        "a refused restore left {}",
        restored.display()
    );
    std::fs::write(&events_db, &good).unwrap();

    let out = snapshot(&["restore", &dir_arg, &restored_arg]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The apiserver's credentials come back with the stores: kubeconfigs and tokens handed
    // out before keep working.
    for file in [
        "apiserver/ca.crt",
        "apiserver/ca.key",
        "apiserver/apiserver.key",
    ] {
        assert_eq!(
            std::fs::read(data.join(file)).unwrap(),
            std::fs::read(restored.join(file)).unwrap(),
            "{file} was not restored"
        );
    }
    let kube = Kube::start_up_in_with(&restored, &events_flags);
    assert_eq!(
        rv(&kube, "configmap/c1"),
        backed_up,
        "an object keeps its resourceVersion"
    );
    assert!(
        kube.kubectl_ok(&["get", "event", "e1", "-o", "name"])
            .contains("e1")
    );
    assert!(
        !kube
            .kubectl(&["get", "configmap", "after"])
            .status
            .success(),
        "an object written after the backup came back"
    );
    kube.kubectl_ok(&["create", "configmap", "new", "--from-literal=a=b"]);
    let new = rv(&kube, "configmap/new");
    assert!(
        new > newest + 1_000_000_000 - 1_000,
        "a new write at {new}, not past the revisions handed out before the restore ({newest})"
    );
    // Clients resuming from before the restore relist.
    let watch = kube.kubectl_ok(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={backed_up}&timeoutSeconds=2"
        ),
    ]);
    assert!(
        watch.contains("\"code\":410"),
        "a watch from {backed_up}: {watch}"
    );
    let exact = kube.kubectl(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/default/configmaps?resourceVersion={backed_up}&resourceVersionMatch=Exact"
        ),
    ]);
    assert!(
        !exact.status.success(),
        "an Exact list at {backed_up} after the restore"
    );
    let events_store = keel_testkit::etcdctl(
        keel_testkit::CtlVersion::V35,
        &events_client,
        &[
            "get".into(),
            "/registry/events/".into(),
            "--prefix".into(),
            "--keys-only".into(),
        ],
        None,
    );
    assert!(
        events_store.stdout.contains("/registry/events/default/e1"),
        "{}",
        events_store.stdout
    );
}
