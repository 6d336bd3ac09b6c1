//! Command-line and HTTP surface of `keel store` as a drop-in for `etcd`.
//!
//! Every flag the README lists for `keel store` is accepted, as a flag and as its `ETCD_*`
//! environment variable; bad flags and values must be rejected with a non-zero exit and a
//! message naming the problem (etcd's own message where etcd checks the value); flags take
//! effect where that is cheap to see (`--max-txn-ops`, `--max-request-bytes` and
//! `--quota-backend-bytes` refuse what etcd refuses, with etcd's errors, whether set by flag or
//! by variable; `--bcrypt-cost` out of range is replaced, with etcd's warning;
//! `--max-concurrent-streams` is what the server advertises to HTTP/2 clients); the client URL
//! must serve etcd's HTTP endpoints (`/health`, `/version`, `/metrics`). Tests that are not
//! about keel-only behaviour run against the server under test, so `KEEL_TEST_TARGET=etcd`
//! checks them against the real etcd 3.5.1; `keel --help`, `--emulated-etcd-version` and
//! `--max-concurrent-streams` (etcd has it since 3.5.5) always run the keel binary.
//!
//! The effect of `--snapshot-count` is checked by `log_compaction` and `power_loss`, that of
//! `--strict-reconfig-check` (on and off) by `membership`, that of `--election-timeout` by
//! `cluster`, that of `--bcrypt-cost` by `etcdctl_e2e`; `--heartbeat-interval` and
//! `--election-timeout` are checked here for etcd's validation.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::cluster_client::ClusterClient;
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::{
    AlarmRequest, MemberListRequest, PutRequest, RangeRequest, RequestOp, StatusRequest,
    TxnRequest, WatchCreateRequest, alarm_request,
};
use keel_proto::raftpb::MembersRequest;
use keel_proto::raftpb::peer_client::PeerClient;
use keel_testkit::kv::watch;
use keel_testkit::{
    Flavor, Server, ServerOpts, env_name, free_port, http_get, keel_bin, store_command,
    target_flavor,
};

/// How long a rejected command line may take to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `bin args` in an empty working directory and waits (bounded) for it to exit. A process
/// still running after [`EXIT_TIMEOUT`] is killed and fails the test: a bad command line must
/// not start a server.
fn run_to_exit(bin: &Path, args: &[String]) -> Output {
    run_to_exit_with_env(bin, args, &[])
}

/// [`run_to_exit`] with the environment variables `env` set (nothing else is inherited but
/// `PATH`).
fn run_to_exit_with_env(bin: &Path, args: &[String], env: &[(&str, &str)]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().copied())
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
    expect_rejected_with_env(extra, &[], mentions);
}

/// [`expect_rejected`] with the environment variables `env` set as well. The server is given
/// free ports (and its data dir is the empty working directory's default), so a value that is
/// wrongly accepted makes a server that serves on ports of its own, never on etcd's defaults,
/// until [`run_to_exit`] gives up on it.
fn expect_rejected_with_env(extra: &[&str], env: &[(&str, &str)], mentions: &[&str]) {
    let flavor = target_flavor();
    let (bin, mut args) = store_command(flavor);
    let (client, peer) = (
        format!("http://127.0.0.1:{}", free_port()),
        format!("http://127.0.0.1:{}", free_port()),
    );
    args.extend([
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=default={peer}"),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = run_to_exit_with_env(&bin, &args, env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "`{env:?} {} {}` exited successfully; stderr:\n{stderr}",
        flavor.name(),
        args.join(" ")
    );
    for m in mentions {
        assert!(
            stderr.contains(m),
            "`{env:?} {} {}`: stderr does not mention `{m}`:\n{stderr}",
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

/// A value that is not a number (or not a boolean) is refused naming the flag, for each
/// numeric and boolean flag of the README's list, as etcd's flag parser refuses it.
#[test]
fn values_of_the_wrong_type_are_rejected_naming_the_flag() {
    for (flag, value) in [
        ("max-request-bytes", "abc"),
        ("max-txn-ops", "-x"),
        ("quota-backend-bytes", "abc"),
        ("snapshot-count", "abc"),
        ("snapshot-count", "-1"),
        ("heartbeat-interval", "abc"),
        ("election-timeout", "abc"),
        ("bcrypt-cost", "abc"),
        ("strict-reconfig-check", "maybe"),
    ] {
        expect_rejected(&[&format!("--{flag}={value}")], &[flag, value]);
    }
}

/// The same for a value given in an `ETCD_*` variable: refused, naming the value and the
/// setting (etcd names the variable, keel the flag).
#[test]
fn bad_values_in_etcd_variables_are_rejected() {
    for (flag, value) in [("max-txn-ops", "abc"), ("snapshot-count", "-1")] {
        let var = env_name(flag);
        let flavor = target_flavor();
        let (bin, args) = store_command(flavor);
        let out = run_to_exit_with_env(&bin, &args, &[(&var, value)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{var}={value} {}: exited successfully; stderr:\n{stderr}",
            flavor.name()
        );
        let named = stderr.to_lowercase().replace('_', "-");
        assert!(
            stderr.contains(value) && named.contains(flag),
            "{var}={value} {}: stderr does not name the value and the setting:\n{stderr}",
            flavor.name()
        );
    }
}

/// etcd's checks of the Raft timing flags, with its messages: a zero heartbeat, an election
/// timeout under five heartbeats, and one over 50 s are refused before anything starts.
#[test]
fn raft_timing_flags_are_checked_as_etcd_checks_them() {
    expect_rejected(
        &["--heartbeat-interval=0"],
        &["--heartbeat-interval must be >0 (set to 0ms)"],
    );
    expect_rejected(
        &["--heartbeat-interval=300", "--election-timeout=1000"],
        &[
            "--election-timeout[1000ms] should be at least as 5 times as --heartbeat-interval[300ms]",
        ],
    );
    expect_rejected(
        &["--election-timeout=60000"],
        &["--election-timeout[60000ms] is too long, and should be set less than 50000ms"],
    );
}

/// The `--flags` the README's "`keel store` flags" row lists, in its order.
fn readme_store_flags() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `keel store` flags |"))
        .unwrap_or_else(|| panic!("no \"`keel store` flags\" row in {}", path.display()));
    // The flags are in the row's code spans (every other piece between backticks).
    let flags: Vec<String> = row
        .split('`')
        .skip(1)
        .step_by(2)
        .flat_map(str::split_whitespace)
        .filter(|w| w.starts_with("--"))
        .map(str::to_string)
        .collect();
    assert!(
        flags.len() >= 20,
        "the README's `keel store` flags row lists only {flags:?}"
    );
    flags
}

/// A valid value, other than the default where it can be, for each flag of the README's list
/// that the harness does not set itself (`None` for those it does: name, data dir, URLs and
/// initial cluster). A flag missing here fails the test: a flag added to the README needs a
/// value here, so that it is tested.
fn valid_value(flag: &str) -> Option<&'static str> {
    let value = match flag {
        "--name"
        | "--data-dir"
        | "--listen-client-urls"
        | "--advertise-client-urls"
        | "--listen-peer-urls"
        | "--initial-advertise-peer-urls"
        | "--initial-cluster" => return None,
        "--initial-cluster-state" => "new",
        "--initial-cluster-token" => "keel-cli-test",
        "--quota-backend-bytes" => "4294967296",
        "--max-request-bytes" => "2097152",
        "--max-txn-ops" => "256",
        "--max-concurrent-streams" => "1000",
        "--auto-compaction-mode" => "revision",
        "--auto-compaction-retention" => "1000",
        "--snapshot-count" => "5000",
        "--heartbeat-interval" => "50",
        "--election-timeout" => "500",
        "--strict-reconfig-check" => "false",
        "--bcrypt-cost" => "4",
        "--emulated-etcd-version" => "3.4.31",
        "--log-format" => "json",
        other => panic!(
            "the README lists `{other}` for `keel store`, which this test has no value for: \
             add one to `valid_value`"
        ),
    };
    Some(value)
}

/// Flags of the README's list that etcd 3.5.1 does not have: keel's own, one etcd added in
/// 3.5.5 and one of 3.6.
const NOT_IN_ETCD_3_5_1: [&str; 3] = [
    "--emulated-etcd-version",
    "--max-concurrent-streams",
    "--log-format",
];

/// Every flag the README lists for `keel store`, with a valid value, as flags and then as
/// `ETCD_*` variables: the server starts, serves a write and a read, and (keel) reports the
/// emulated version it was given.
#[tokio::test]
async fn every_flag_the_readme_lists_is_accepted_as_a_flag_and_as_a_variable() {
    let flavor = target_flavor();
    let settings: Vec<(String, &str)> = readme_store_flags()
        .into_iter()
        .filter(|f| flavor == Flavor::Keel || !NOT_IN_ETCD_3_5_1.contains(&f.as_str()))
        .filter_map(|f| valid_value(&f).map(|v| (f, v)))
        .collect();
    for from_env in [false, true] {
        let mut opts = ServerOpts {
            settings_from_env: from_env,
            ..Default::default()
        };
        for (flag, value) in &settings {
            if from_env {
                opts.env
                    .push((env_name(flag.trim_start_matches("--")), value.to_string()));
            } else {
                opts.args.push(format!("{flag}={value}"));
            }
        }
        let given = if from_env { &opts.env[..] } else { &[] };
        let what = format!("{} with {:?}{given:?}", flavor.name(), opts.args);
        let server = Server::start_with(flavor, opts.clone());
        let ch = server.channel().await;
        let mut kv = KvClient::new(ch.clone());
        kv.put(PutRequest {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("put on {what}: {e}"));
        let got = kv
            .range(RangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("get on {what}: {e}"))
            .into_inner();
        assert_eq!(got.kvs.len(), 1, "{what}");
        if flavor == Flavor::Keel {
            let st = MaintenanceClient::new(ch)
                .status(StatusRequest {})
                .await
                .expect("Status")
                .into_inner();
            assert_eq!(st.version, "3.4.31", "{what}");
        }
    }
}

/// A `--bcrypt-cost` bcrypt does not accept is replaced by the default, with etcd's warning,
/// rather than refused (etcd 3.5 does the same).
#[test]
fn an_out_of_range_bcrypt_cost_is_replaced_with_etcds_warning() {
    let server = Server::start_with(
        target_flavor(),
        ServerOpts {
            args: vec!["--bcrypt-cost=3".into()],
            ..Default::default()
        },
    );
    let log = server.log();
    assert!(
        log.contains("use default bcrypt cost instead of the invalid given cost"),
        "{}",
        keel_testkit::tail(&log, 30)
    );
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
    let missing: Vec<String> = readme_store_flags()
        .into_iter()
        .filter(|f| !stdout.contains(&format!("{f} ")))
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

/// The limits [`check_settings`] checks, as (flag, value).
const LIMITS: [(&str, &str); 3] = [
    ("max-txn-ops", "2"),
    ("max-request-bytes", "1024"),
    ("quota-backend-bytes", "200000"),
];

/// A put of `key` with a value of `bytes` bytes.
fn put_of(key: &str, bytes: usize) -> PutRequest {
    PutRequest {
        key: key.as_bytes().to_vec(),
        value: vec![b'v'; bytes],
        ..Default::default()
    }
}

/// Checks the settings given to `server`: member name `name` and its URLs, and [`LIMITS`]:
/// a txn of 3 ops refused, a put of more than 1,024 bytes refused, and, once the backend has
/// grown past 200,000 bytes, puts refused with etcd's NOSPACE alarm raised (the fresh backend
/// is well under that: 20 KiB for etcd 3.5, 72 KiB for keel).
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

    kv.put(put_of("small", 512))
        .await
        .expect("a put of 512 bytes is allowed with max-request-bytes=1024");
    let err = kv
        .put(put_of("large", 2048))
        .await
        .expect_err("a put of 2 KiB must be refused with max-request-bytes=1024");
    assert_eq!(
        (err.code(), err.message()),
        (
            tonic::Code::InvalidArgument,
            "etcdserver: request is too large"
        )
    );

    // 900-byte puts until the quota refuses one: a 2 GiB default quota would take them all.
    let mut accepted = 0;
    let err = loop {
        match kv.put(put_of(&format!("fill/{accepted:04}"), 900)).await {
            Ok(_) => accepted += 1,
            Err(e) => break e,
        }
        assert!(
            accepted < 2000,
            "2,000 puts of 900 bytes fit in a quota of 200,000 bytes"
        );
    };
    assert_eq!(
        (err.code(), err.message()),
        (
            tonic::Code::ResourceExhausted,
            "etcdserver: mvcc: database space exceeded"
        ),
        "after {accepted} puts"
    );
    let alarms = MaintenanceClient::new(server.channel().await)
        .alarm(AlarmRequest {
            action: alarm_request::AlarmAction::Get as i32,
            ..Default::default()
        })
        .await
        .expect("Alarm get")
        .into_inner()
        .alarms;
    assert!(
        alarms
            .iter()
            .any(|a| a.alarm == keel_proto::etcdserverpb::AlarmType::Nospace as i32),
        "no NOSPACE alarm after the quota refused a put: {alarms:?}"
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
            env: LIMITS
                .iter()
                .map(|(flag, value)| (env_name(flag), value.to_string()))
                .collect(),
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
            args: LIMITS
                .iter()
                .map(|(flag, value)| format!("--{flag}={value}"))
                .collect(),
            ..Default::default()
        },
    );
    check_settings(&server, "default").await;
}

/// The `SETTINGS_MAX_CONCURRENT_STREAMS` the HTTP/2 server at `endpoint` announces in its
/// first SETTINGS frame (`None`: it sets no limit). Speaks just enough HTTP/2 by hand: the
/// client preface and an empty SETTINGS frame, then the server's first frame, which must be
/// its SETTINGS (RFC 9113, 3.4): 9-byte header (24-bit length, type 4, flags, stream 0), then
/// 6-byte entries (16-bit id, 32-bit value); MAX_CONCURRENT_STREAMS is id 3.
fn announced_max_concurrent_streams(endpoint: &str) -> Option<u32> {
    let mut conn =
        TcpStream::connect(endpoint).unwrap_or_else(|e| panic!("connect {endpoint}: {e}"));
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("set a read timeout");
    conn.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .expect("send the HTTP/2 preface");
    let mut header = [0u8; 9];
    conn.read_exact(&mut header)
        .expect("the server's first HTTP/2 frame");
    assert_eq!(
        header[3], 4,
        "the server's first frame is not SETTINGS: {header:?}"
    );
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let mut payload = vec![0u8; len];
    conn.read_exact(&mut payload)
        .expect("the server's SETTINGS payload");
    payload.chunks_exact(6).find_map(|e| {
        (u16::from_be_bytes([e[0], e[1]]) == 3)
            .then(|| u32::from_be_bytes([e[2], e[3], e[4], e[5]]))
    })
}

/// `--max-concurrent-streams` bounds the streams one client connection holds open at once:
/// the server announces the limit in its HTTP/2 SETTINGS, and with a limit of 1 a call on a
/// connection whose one stream is an open Watch waits until the watch ends (the client
/// queues it, as HTTP/2 asks), then succeeds. etcd has the flag since 3.5.5 and the tests'
/// etcd is 3.5.1, so this runs against keel only.
#[tokio::test]
async fn max_concurrent_streams_bounds_the_streams_of_a_connection() {
    let server = Server::start_with(
        Flavor::Keel,
        ServerOpts {
            args: vec!["--max-concurrent-streams=1".into()],
            ..Default::default()
        },
    );
    assert_eq!(
        announced_max_concurrent_streams(&server.endpoint),
        Some(1),
        "the SETTINGS_MAX_CONCURRENT_STREAMS announced with --max-concurrent-streams=1"
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
    // Not a pause: proof that the limited connection moved on past the range. A put made
    // after the range was sent is delivered to the watch on that same connection, so had the
    // range had a stream of its own, it would have been answered by now (a range of one key
    // is answered at once; the put needs a commit and then a watch event).
    let mut other = KvClient::new(server.channel().await);
    let put = other
        .put(PutRequest {
            key: b"a".to_vec(),
            value: b"after the range".to_vec(),
            ..Default::default()
        })
        .await
        .expect("put on another connection")
        .into_inner();
    let revision = put.header.expect("a header").revision;
    let event = tokio::time::timeout(Duration::from_secs(30), watch.message())
        .await
        .expect("the put's event on the limited connection's watch within 30 s")
        .expect("watch response")
        .expect("the watch is open");
    assert_eq!(
        event
            .events
            .first()
            .and_then(|e| e.kv.as_ref())
            .map(|kv| kv.mod_revision),
        Some(revision),
        "{event:?}"
    );
    assert!(
        !range.is_finished(),
        "a second stream was opened beyond the limit of 1: the range was answered while the \
         watch held the connection's one stream"
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
    // The default is the first 3.5 release whose progress requests kube-apiserver trusts.
    for (args, reported) in [
        (vec![], "3.5.13"),
        (vec!["--emulated-etcd-version=3.4.31"], "3.4.31"),
    ] {
        let server = Server::start_with(
            Flavor::Keel,
            ServerOpts {
                args: args.into_iter().map(String::from).collect(),
                ..Default::default()
            },
        );
        let st = MaintenanceClient::new(server.channel().await)
            .status(StatusRequest {})
            .await
            .expect("Status")
            .into_inner();
        assert_eq!(st.version, reported);
    }
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
        // What an operator reads to name the axis at fault, as etcd names it.
        "etcd_disk_backend_commit_duration_seconds",
        "etcd_server_leader_changes_seen_total",
        "etcd_server_proposals_failed_total",
        "etcd_server_proposals_pending",
        "etcd_server_slow_apply_total",
        "etcd_debugging_mvcc_slow_watcher_total",
        "etcd_debugging_mvcc_pending_events_total",
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
