//! `keel apiserver`'s storage, serving and authentication flags, each checked where it shows,
//! on `keel store` (or etcd 3.5.1 with `KEEL_TEST_TARGET=etcd`):
//!
//! - `--etcd-prefix`: objects are stored under it and nothing under `/registry`;
//! - `--event-ttl`: an Event's key carries a store lease granted for the TTL plus the lease
//!   reuse window (kube-apiserver's LeaseManager: min(60 s, 5 % of the TTL));
//! - `--etcd-compaction-interval`: the store is compacted without anyone asking it to;
//! - `--watch-cache=false`: no watch cache runs (no `apiserver_watch_cache_*` series), and
//!   watches are still served;
//! - `--plain-http`: plain HTTP on loopback, without authentication (as kube-apiserver's old
//!   insecure port);
//! - `--tls-cert-file` / `--tls-private-key-file`: the operator's certificate is the one
//!   served (a client trusting only its CA connects), and no certificate is generated;
//! - `--token-auth-file`: the file's tokens are accepted, any other refused with 401;
//! - `keel up` locks its folder against a second `keel up`.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::lease_client::LeaseClient;
use keel_proto::etcdserverpb::{LeaseTimeToLiveRequest, RangeRequest};
use keel_testkit::kube::Kube;
use keel_testkit::{Server, free_port, keel_bin, target_flavor};

/// How long the server may take to show a flag's effect.
const LIMIT: Duration = Duration::from_secs(60);

/// The token the test's `--token-auth-file` holds for an admin.
const TOKEN: &str = "flags-test-admin-token";

/// `curl` with `args`; its output.
fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "30"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run curl (apt-get install -y curl)")
}

/// The HTTP status curl got for `args` (`-o /dev/null -w %{http_code}` added).
fn status(args: &[&str]) -> String {
    let mut all = vec!["-o", "/dev/null", "-w", "%{http_code}"];
    all.extend_from_slice(args);
    String::from_utf8_lossy(&curl(&all).stdout).into_owned()
}

/// Ranges `key` (a prefix when `prefix`) on the store; the key-values.
async fn range(store: &Server, key: &str, prefix: bool) -> Vec<keel_proto::mvccpb::KeyValue> {
    let mut end = key.as_bytes().to_vec();
    *end.last_mut().unwrap() += 1;
    KvClient::new(store.channel().await)
        .range(RangeRequest {
            key: key.as_bytes().to_vec(),
            range_end: if prefix { end } else { vec![] },
            ..Default::default()
        })
        .await
        .expect("range")
        .into_inner()
        .kvs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_flags_take_effect() {
    let store = Server::start(target_flavor());
    let dir = tempfile::tempdir().unwrap();
    let kube = Kube::start_on_with(
        &store.client_url,
        &[
            "--plain-http",
            "--etcd-prefix=/custom",
            "--event-ttl=2m",
            "--etcd-compaction-interval=2s",
            "--watch-cache=false",
        ],
    );

    // --plain-http: the kubeconfig names an http:// server, which serves without a token.
    let server = kube.kubectl_ok(&[
        "config",
        "view",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    assert!(server.starts_with("http://127.0.0.1:"), "{server}");
    assert_eq!(
        status(&[&format!("{server}/api/v1/namespaces/default")]),
        "200"
    );

    // --etcd-prefix: the object is under /custom, nothing under /registry.
    kube.kubectl_ok(&["create", "configmap", "flags-cm", "--from-literal=k=v"]);
    let stored = range(&store, "/custom/configmaps/default/flags-cm", false).await;
    assert_eq!(stored.len(), 1, "the configmap is not under --etcd-prefix");
    assert!(
        range(&store, "/registry/", true).await.is_empty(),
        "keys under /registry"
    );

    // --event-ttl: the Event's lease was granted for 2 minutes plus the reuse window (6 s).
    let event = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "flags-event", "namespace": "default"},
        "involvedObject": {"kind": "ConfigMap", "name": "flags-cm", "namespace": "default"},
        "reason": "Tested",
        "message": "an event with a TTL",
        "type": "Normal"
    });
    let file = dir.path().join("event.json");
    fs::write(&file, event.to_string()).unwrap();
    kube.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let stored = range(&store, "/custom/events/default/flags-event", false).await;
    assert_eq!(stored.len(), 1, "the event is not stored");
    assert_ne!(stored[0].lease, 0, "the event's key has no lease");
    let ttl = LeaseClient::new(store.channel().await)
        .lease_time_to_live(LeaseTimeToLiveRequest {
            id: stored[0].lease,
            keys: false,
        })
        .await
        .expect("lease time to live")
        .into_inner();
    assert_eq!(ttl.granted_ttl, 120 + 6, "granted TTL of the event's lease");

    // --watch-cache=false: no cache series, and a watch is still served (from the store).
    let metrics = kube.kubectl_ok(&["get", "--raw", "/metrics"]);
    assert!(
        !metrics.contains("apiserver_watch_cache_"),
        "a watch cache runs with --watch-cache=false"
    );
    let watch = curl(&[&format!(
        "{server}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1"
    )]);
    let events = String::from_utf8_lossy(&watch.stdout);
    assert!(
        events.contains("\"type\":\"ADDED\"") && events.contains("flags-cm"),
        "the watch without a cache: {events}"
    );

    // --etcd-compaction-interval: the store compacts on its own; revision 1 is gone.
    let deadline = Instant::now() + LIMIT;
    loop {
        let answer = KvClient::new(store.channel().await)
            .range(RangeRequest {
                key: b"/custom/".to_vec(),
                revision: 1,
                ..Default::default()
            })
            .await;
        match answer {
            Err(e) if e.message().contains("required revision has been compacted") => break,
            other => assert!(
                Instant::now() < deadline,
                "no compaction {LIMIT:?} into a 2 s compaction interval: {other:?}\n{}",
                kube.log()
            ),
        }
        // Writes move the revision on, so each round has a newer revision to compact to.
        keel_testkit::kv::put(&store, "/elsewhere")
            .await
            .expect("put");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `keel apiserver` with `args` on a free loopback port; the child and its port.
fn spawn_apiserver(args: &[String], log: &Path) -> (Child, u16) {
    let port = free_port();
    let out = fs::File::create(log).unwrap();
    let child = Command::new(keel_bin())
        .arg("apiserver")
        .args([
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            &port.to_string(),
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start keel apiserver");
    (child, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_certificate_is_served() {
    let store = Server::start(target_flavor());
    // Certificates generated by one apiserver into its cert dir serve as the operator's.
    let first = Kube::start_on(&store.client_url);
    let certs = first.scratch.join("certs");
    let dir = tempfile::tempdir().unwrap();
    let unused = dir.path().join("unused-cert-dir");
    let log = dir.path().join("server.log");
    let tokens = dir.path().join("tokens.csv");
    fs::write(&tokens, format!("{TOKEN},admin,admin,\"system:masters\"\n")).unwrap();
    let (mut child, port) = spawn_apiserver(
        &[
            format!("--token-auth-file={}", tokens.display()),
            format!("--etcd-servers={}", store.client_url),
            format!("--tls-cert-file={}", certs.join("apiserver.crt").display()),
            format!(
                "--tls-private-key-file={}",
                certs.join("apiserver.key").display()
            ),
            format!("--cert-dir={}", unused.display()),
        ],
        &log,
    );
    let ca = certs.join("ca.crt");
    let url = format!("https://127.0.0.1:{port}/readyz");
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Ok(Some(exit)) = child.try_wait() {
            panic!(
                "keel apiserver exited ({exit}):\n{}",
                fs::read_to_string(&log).unwrap()
            );
        }
        let out = curl(&["--cacert", ca.to_str().unwrap(), &url]);
        if String::from_utf8_lossy(&out.stdout) == "ok" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not served with the operator's certificate within {LIMIT:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !unused.join("apiserver.crt").exists() && !unused.join("ca.crt").exists(),
        "a certificate was generated though the operator brought one"
    );
    // --token-auth-file: its token is served, another is 401.
    let path = format!("https://127.0.0.1:{port}/api/v1/namespaces/default");
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    let cacert = ["--cacert", ca.to_str().unwrap()];
    let with = |t: &str| status(&[cacert[0], cacert[1], "-H", &bearer(t), &path]);
    assert_eq!(with(TOKEN), "200");
    assert_eq!(with("not-in-the-file"), "401");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `keel up` locks its folder: a second one on the same `--data-dir` stops at once, saying
/// which lock is held, and the first keeps serving.
#[test]
fn a_second_keel_up_on_the_same_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("keel.data");
    let first = Kube::start_up_in(&data);
    let second = Command::new(keel_bin())
        .args(["up", "--data-dir", data.to_str().unwrap()])
        .args(["--secure-port", &free_port().to_string()])
        .args([
            "--listen-client-urls",
            &format!("http://127.0.0.1:{}", free_port()),
            "--listen-peer-urls",
            &format!("http://127.0.0.1:{}", free_port()),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run a second keel up");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        !second.status.success(),
        "a second keel up started: {stderr}"
    );
    assert!(
        stderr.contains("is in use by another keel up") && stderr.contains("keel.lock"),
        "{stderr}"
    );
    first.kubectl_ok(&["get", "--raw", "/readyz"]);
}
