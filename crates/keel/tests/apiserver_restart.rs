//! kill -9 of `keel up` under a write load: every create acknowledged before the kill is
//! there after the restart with the resourceVersion it was acknowledged with, no
//! resourceVersion goes backwards, and a watch resumed from a resourceVersion taken before
//! the kill sees every acknowledged create after it.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack};
use keel_testkit::wait;

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
    wait::until(
        "20 creates acknowledged before the kill",
        Duration::from_secs(60),
        || {
            let n = acked.lock().unwrap().len();
            if n >= 20 {
                Ok(())
            } else {
                assert!(
                    !writers.iter().any(|w| w.is_finished()),
                    "a writer stopped after {n} acknowledged creates"
                );
                Err(format!("{n} acknowledged"))
            }
        },
    );
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
    // A watch from before the kill replays every acknowledged create: read as it streams,
    // until every one of them was seen (not for a fixed time).
    let mut watch = std::process::Command::new(keel_testkit::kube::kubectl_bin(None))
        .arg("--kubeconfig")
        .arg(&kube.kubeconfig)
        .args([
            "get",
            "--raw",
            &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={since}"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the watch");
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().expect("the watch's stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut missing: HashSet<String> = acked.iter().map(|(name, _)| name.clone()).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !missing.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|e| {
            panic!(
                "the resumed watch from {since} ({e}) missed {} acknowledged creates: {:?}",
                missing.len(),
                missing.iter().take(20).collect::<Vec<_>>()
            )
        });
        let event: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a watch event that is not JSON ({e}): {line}"));
        assert_ne!(
            event["type"], "ERROR",
            "the resumed watch from {since}: {event}"
        );
        if event["type"] == "ADDED" {
            let name = event["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or_default();
            missing.remove(name);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
}
