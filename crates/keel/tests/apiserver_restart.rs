//! kill -9 of `keel up` under a write load: every create acknowledged before the kill is
//! there after the restart with the resourceVersion it was acknowledged with, no
//! resourceVersion goes backwards, and a watch resumed from a resourceVersion taken before
//! the kill sees every acknowledged create after it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_testkit::kube::{Kube, Stack};

#[test]
fn acknowledged_writes_survive_kill_9_of_keel_up() {
    let mut kube = Kube::start(Stack::Up);
    let rv_before = kube.kubectl(&["get", "--raw", "/api/v1/namespaces/default/configmaps"]);
    let list: serde_json::Value = serde_json::from_slice(&rv_before.stdout).unwrap();
    let since: i64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let acked = Arc::new(Mutex::new(Vec::<(String, i64)>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let kubeconfig = kube.kubeconfig.clone();
    let body = kube.scratch.join("cm.json");
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (acked, stop, kubeconfig, body) = (acked.clone(), stop.clone(), kubeconfig.clone(), body.clone());
            std::thread::spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let name = format!("w{w}-{i}");
                    let path = body.with_file_name(format!("{name}.json"));
                    std::fs::write(&path, format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"i":"{i}"}}}}"#)).unwrap();
                    let out = std::process::Command::new(keel_testkit::kube::kubectl_bin(None))
                        .arg("--kubeconfig")
                        .arg(&kubeconfig)
                        .args(["create", "--raw", "/api/v1/namespaces/default/configmaps", "-f"])
                        .arg(&path)
                        .output()
                        .unwrap();
                    if out.status.success() {
                        let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                        let rv = created["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
                        acked.lock().unwrap().push((name, rv));
                    }
                }
            })
        })
        .collect();
    while acked.lock().unwrap().len() < 20 {
        std::thread::sleep(Duration::from_millis(20));
    }
    kube.kill_and_restart();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 20);
    let out = kube.kubectl(&["get", "--raw", "/api/v1/namespaces/default/configmaps"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let stored: std::collections::HashMap<String, i64> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cm| {
            (
                cm["metadata"]["name"].as_str().unwrap().to_string(),
                cm["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            )
        })
        .collect();
    for (name, rv) in &acked {
        assert_eq!(
            stored.get(name),
            Some(rv),
            "{name}, acknowledged at {rv}, after the restart"
        );
    }
    let max_acked = acked.iter().map(|(_, rv)| *rv).max().unwrap();
    let list_rv: i64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        list_rv >= max_acked,
        "the list's resourceVersion {list_rv} went below {max_acked}"
    );
    // A watch from before the kill replays every acknowledged create.
    let watch = kube.kubectl(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={since}&timeoutSeconds=3"
        ),
    ]);
    let events = String::from_utf8_lossy(&watch.stdout);
    let added: std::collections::HashSet<String> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "ADDED")
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for (name, _) in &acked {
        assert!(added.contains(name), "the resumed watch missed {name}");
    }
}
