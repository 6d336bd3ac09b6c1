//! Command-line and HTTP surface of `keel store` as a drop-in for `etcd`.
//!
//! Bad flags and values must be rejected with a non-zero exit and a message naming the
//! problem; settings must be accepted from `ETCD_*` environment variables as etcd does; the
//! client URL must serve etcd's HTTP endpoints (`/health`, `/version`, `/metrics`). Tests that
//! are not about keel-only behaviour run against the server under test, so
//! `KEEL_TEST_TARGET=etcd` checks them against the real etcd; `keel --help` and
//! `--emulated-etcd-version` are keel's own and always run the keel binary.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::cluster_client::ClusterClient;
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::{
    MemberListRequest, PutRequest, RangeRequest, RequestOp, StatusRequest, TxnRequest,
    WatchCreateRequest,
};
use keel_proto::raftpb::MembersRequest;
use keel_proto::raftpb::peer_client::PeerClient;
use keel_testkit::kv::watch;
use keel_testkit::{Flavor, Server, ServerOpts, http_get, keel_bin, store_command, target_flavor};

/// How long a rejected command line may take to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `bin args` in an empty working directory and waits (bounded) for it to exit. A process
/// still running after [`EXIT_TIMEOUT`] is killed and fails the test: a bad command line must
/// not start a server.
fn run_to_exit(bin: &std::path::Path, args: &[String]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    let deadline = Instant::now() + EXIT_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "`{} {}` was still running after {EXIT_TIMEOUT:?}; stderr:\n{}",
                bin.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs the store of the target flavor with `extra` arguments and expects a clear rejection:
/// non-zero exit and every one of `mentions` in stderr.
fn expect_rejected(extra: &[&str], mentions: &[&str]) {
    let flavor = target_flavor();
    let (bin, mut args) = store_command(flavor);
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = run_to_exit(&bin, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "`{} {}` exited successfully; stderr:\n{stderr}",
        flavor.name(),
        args.join(" ")
    );
    for m in mentions {
        assert!(
            stderr.contains(m),
            "`{} {}`: stderr does not mention `{m}`:\n{stderr}",
            flavor.name(),
            args.join(" ")
        );
    }
}

#[test]
fn unknown_flag_is_rejected() {
    expect_rejected(&["--no-such-flag=1"], &["no-such-flag"]);
}

#[test]
fn bad_quota_value_is_rejected() {
    expect_rejected(
        &["--quota-backend-bytes=abc"],
        &["quota-backend-bytes", "abc"],
    );
}

#[test]
fn bad_max_txn_ops_value_is_rejected() {
    expect_rejected(&["--max-txn-ops=-x"], &["max-txn-ops"]);
}

#[test]
fn bad_initial_cluster_state_is_rejected() {
    expect_rejected(&["--initial-cluster-state=sideways"], &["sideways"]);
}

#[test]
fn keel_help_lists_the_store_command() {
    let out = run_to_exit(&keel_bin(), &["--help".to_string()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "keel --help failed: {out:?}");
    assert!(
        stdout.contains("store"),
        "keel --help does not list `store`:\n{stdout}"
    );
}

#[test]
fn keel_store_help_lists_etcd_flags() {
    let out = run_to_exit(&keel_bin(), &["store".to_string(), "--help".to_string()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "keel store --help failed: {out:?}");
    let missing: Vec<&str> = [
        "--name",
        "--data-dir",
        "--listen-client-urls",
        "--advertise-client-urls",
        "--listen-peer-urls",
        "--initial-advertise-peer-urls",
        "--initial-cluster",
        "--initial-cluster-state",
        "--initial-cluster-token",
        "--quota-backend-bytes",
        "--max-request-bytes",
        "--max-txn-ops",
        "--max-concurrent-streams",
        "--auto-compaction-mode",
        "--auto-compaction-retention",
        "--snapshot-count",
        "--emulated-etcd-version",
    ]
    .into_iter()
    .filter(|f| !stdout.contains(f))
    .collect();
    assert!(
        missing.is_empty(),
        "keel store --help does not list {missing:?}:\n{stdout}"
    );
}

/// A txn of `n` puts of distinct keys.
fn txn_of(n: usize) -> TxnRequest {
    TxnRequest {
        success: (0..n)
            .map(|i| RequestOp {
                request: Some(Request::RequestPut(PutRequest {
                    key: format!("t{i}").into_bytes(),
                    value: b"v".to_vec(),
                    ..Default::default()
                })),
            })
            .collect(),
        ..Default::default()
    }
}

/// Checks the settings given to `server`: member name `name`, and `--max-txn-ops` = 2.
async fn check_settings(server: &Server, name: &str) {
    let ch = server.channel().await;
    let members = ClusterClient::new(ch.clone())
        .member_list(MemberListRequest::default())
        .await
        .expect("MemberList")
        .into_inner()
        .members;
    assert_eq!(members.len(), 1, "one member expected: {members:?}");
    assert_eq!(members[0].name, name, "member name");
    assert_eq!(
        members[0].client_ur_ls,
        vec![server.client_url.clone()],
        "client URLs"
    );
    assert_eq!(
        members[0].peer_ur_ls,
        vec![server.peer_url.clone()],
        "peer URLs"
    );
    let mut kv = KvClient::new(ch);
    kv.txn(txn_of(2)).await.expect("a txn of 2 ops is allowed");
    let err = kv
        .txn(txn_of(3))
        .await
        .expect_err("a txn of 3 ops must be refused with max-txn-ops=2");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        err.message(),
        "etcdserver: too many operations in txn request"
    );
    assert!(
        server.data_dir.join("member").is_dir(),
        "no member/ folder in the data dir {}",
        server.data_dir.display()
    );
}

#[tokio::test]
async fn settings_from_etcd_env_vars_are_honoured() {
    let server = Server::start_with(
        target_flavor(),
        ServerOpts {
            settings_from_env: true,
            name: Some("from-env".into()),
            env: vec![("ETCD_MAX_TXN_OPS".into(), "2".into())],
            ..Default::default()
        },
    );
    check_settings(&server, "from-env").await;
}

#[tokio::test]
async fn settings_from_flags_are_honoured() {
    let server = Server::start_with(
        target_flavor(),
        ServerOpts {
            args: vec!["--max-txn-ops=2".into()],
            ..Default::default()
        },
    );
    check_settings(&server, "default").await;
}

/// `--max-concurrent-streams` bounds the streams one client connection holds open at once:
/// with a limit of 1, a call on a connection whose one stream is an open Watch waits until
/// the watch ends (the client queues it, as HTTP/2 asks), then succeeds. etcd has the flag
/// since 3.5.5 and the tests' etcd is 3.5.1, so this runs against keel only.
#[tokio::test]
async fn max_concurrent_streams_bounds_the_streams_of_a_connection() {
    let server = Server::start_with(
        Flavor::Keel,
        ServerOpts {
            args: vec!["--max-concurrent-streams=1".into()],
            ..Default::default()
        },
    );
    let channel = server.channel().await;
    let create = WatchCreateRequest {
        key: b"a".to_vec(),
        ..Default::default()
    };
    let (watch_tx, mut watch) = watch(channel.clone(), create, false).await.expect("watch");
    let created = watch
        .message()
        .await
        .expect("watch response")
        .expect("created");
    assert!(created.created, "{created:?}");

    let mut kv = KvClient::new(channel);
    let range = tokio::spawn(async move {
        kv.range(RangeRequest {
            key: b"a".to_vec(),
            ..Default::default()
        })
        .await
    });
    // The control: the same range on a connection of its own is served meanwhile.
    let mut other = KvClient::new(server.channel().await);
    let control = other.range(RangeRequest {
        key: b"a".to_vec(),
        ..Default::default()
    });
    tokio::time::timeout(Duration::from_secs(10), control)
        .await
        .expect("a range on another connection is served")
        .expect("range");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !range.is_finished(),
        "a second stream was opened beyond the limit of 1"
    );
    drop(watch_tx);
    drop(watch);
    let answered = tokio::time::timeout(Duration::from_secs(10), range)
        .await
        .expect("the range is served once the watch stream ended")
        .unwrap();
    answered.expect("range");
}

#[tokio::test]
async fn emulated_etcd_version_is_reported_by_status() {
    let server = Server::start_with(
        Flavor::Keel,
        ServerOpts {
            args: vec!["--emulated-etcd-version=3.5.13".into()],
            ..Default::default()
        },
    );
    let st = MaintenanceClient::new(server.channel().await)
        .status(StatusRequest {})
        .await
        .expect("Status")
        .into_inner();
    assert_eq!(st.version, "3.5.13");
}

#[test]
fn http_health_version_and_metrics() {
    let server = Server::start(target_flavor());
    let (code, body) = http_get(&server.endpoint, "/health");
    assert_eq!(code, 200, "/health: {body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("/health is JSON");
    assert_eq!(health["health"], "true", "/health body: {body}");

    let (code, body) = http_get(&server.endpoint, "/version");
    assert_eq!(code, 200, "/version: {body}");
    let version: serde_json::Value = serde_json::from_str(&body).expect("/version is JSON");
    for field in ["etcdserver", "etcdcluster"] {
        assert!(
            version[field].as_str().is_some_and(|v| v.starts_with("3.")),
            "/version lacks a 3.x `{field}`: {body}"
        );
    }

    let (code, body) = http_get(&server.endpoint, "/metrics");
    assert_eq!(code, 200, "/metrics");
    for metric in [
        "etcd_disk_wal_fsync_duration_seconds",
        "etcd_server_has_leader",
        "etcd_mvcc_db_total_size_in_bytes",
    ] {
        assert!(body.contains(metric), "/metrics lacks {metric}");
    }

    let (code, body) = http_get(&server.endpoint, "/no/such/path");
    assert_eq!((code, body.as_str()), (404, "404 page not found\n"));
}

/// A gRPC service the server does not have is refused as grpc-go refuses it (here keel's
/// own peer service, which listens on the peer URL only).
#[tokio::test]
async fn an_unknown_grpc_service_is_unimplemented() {
    let server = Server::start(target_flavor());
    let mut peer = PeerClient::new(server.channel().await);
    let err = peer
        .members(MembersRequest::default())
        .await
        .expect_err("the client URL serves no peer service");
    assert_eq!(err.code(), tonic::Code::Unimplemented, "{err:?}");
    assert_eq!(err.message(), "unknown service keelraftpb.Peer");
}
