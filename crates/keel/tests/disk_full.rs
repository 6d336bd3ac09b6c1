//! A full disk stops the member cleanly, as etcd exits on a failed WAL write: the write that
//! hit ENOSPC is answered with etcd's `etcdserver: server stopped` (never an internal Raft
//! message), the member reports itself unhealthy on `/health` and to `etcdctl endpoint health`
//! from then on, and exits non-zero with a log line naming the cause, so a supervisor restarts
//! it. Once space is back it starts with every acknowledged write.
//!
//! The data dir is a small tmpfs (`mount -t tmpfs`, needs root), filled to ENOSPC by a filler
//! file before the writes. Without the capability the test says it is skipped, and fails when
//! `CI=true`, so CI never passes it silently.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::{PutRequest, RangeRequest};
use keel_testkit::{CtlVersion, Flavor, Server, etcdctl, try_http_get};

/// Size of the tmpfs holding the data dir: room to start, then filled up.
const TMPFS_SIZE: &str = "64m";
/// Value size of the puts that run into the full disk.
const VALUE_BYTES: usize = 64 * 1024;
/// Puts acknowledged before the disk is filled (each of [`VALUE_BYTES`]).
const BEFORE_FULL: usize = 20;
/// How long the member may take to exit after the failed write.
const EXIT_LIMIT: Duration = Duration::from_secs(15);

/// A mounted tmpfs, lazily unmounted on drop.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Mounts a tmpfs of `size` on `dir`; `None` when that is not possible, after
/// [`keel_testkit::skip`] (a failure when `CI=true`).
fn mount_tmpfs(dir: &Path, size: &str) -> Option<Tmpfs> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return Some(Tmpfs(dir.to_path_buf())),
        Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
        Err(e) => e.to_string(),
    };
    keel_testkit::skip(
        "disk_full",
        &format!(
            "cannot mount a tmpfs on {} (needs root): {why}",
            dir.display()
        ),
    );
    None
}

/// Writes `path` until the file system is full.
fn fill(path: &Path) {
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .expect("create filler");
    for chunk in [1 << 20, 4096] {
        let buf = vec![0x5a; chunk];
        while f.write_all(&buf).is_ok() {}
    }
    let _ = f.sync_all();
}

/// Whether `/health` answers healthy; `None` once nothing listens any more.
fn healthy(server: &Server) -> Option<bool> {
    let (code, body) = try_http_get(&server.endpoint, "/health").ok()?;
    let health: serde_json::Value = serde_json::from_str(&body).expect("/health is JSON");
    if health["health"] == "false" {
        assert_eq!(code, 503, "{body}");
        assert_eq!(
            health["reason"], "RANGE ERROR:etcdserver: server stopped",
            "{body}"
        );
    }
    Some(health["health"] == "true")
}

#[tokio::test]
async fn full_disk_stops_the_member_and_loses_nothing() {
    let mut server = Server::start(Flavor::Keel);
    server.kill();
    fs::remove_dir_all(&server.data_dir).expect("clear the data dir");
    fs::create_dir_all(&server.data_dir).expect("create the mount point");
    let Some(_tmpfs) = mount_tmpfs(&server.data_dir, TMPFS_SIZE) else {
        return;
    };
    server.restart();

    // Writes acknowledged while there is room: "nothing lost" below must cover some.
    let mut kv = KvClient::new(server.channel().await);
    let mut acked = Vec::new();
    for _ in 0..BEFORE_FULL {
        let key = format!("k/{:05}", acked.len());
        let put = PutRequest {
            key: key.clone().into_bytes(),
            value: vec![b'v'; VALUE_BYTES],
            ..Default::default()
        };
        kv.put(put)
            .await
            .unwrap_or_else(|e| panic!("put {key} before the disk is full: {e}"));
        acked.push(key);
    }
    fill(&server.data_dir.join("filler"));

    let failed = loop {
        let key = format!("k/{:05}", acked.len());
        let put = PutRequest {
            key: key.clone().into_bytes(),
            value: vec![b'v'; VALUE_BYTES],
            ..Default::default()
        };
        match kv.put(put).await {
            Ok(_) => acked.push(key),
            Err(status) => break status,
        }
        assert!(acked.len() < 10_000, "no write failed on a full disk");
    };
    assert_eq!(
        (failed.code(), failed.message()),
        (tonic::Code::Unavailable, "etcdserver: server stopped"),
        "after {} puts",
        acked.len()
    );
    eprintln!(
        "disk_full: {} puts acknowledged, {} of them after the disk was filled",
        acked.len(),
        acked.len() - BEFORE_FULL
    );

    // Never healthy again: unhealthy while it still answers, then gone.
    let deadline = Instant::now() + EXIT_LIMIT;
    while let Some(ok) = healthy(&server) {
        assert!(!ok, "/health says healthy after a failed write");
        assert!(
            Instant::now() < deadline,
            "still serving after {EXIT_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ctl = etcdctl(
        CtlVersion::V35,
        &server.endpoint,
        &["endpoint".into(), "health".into()],
        None,
    );
    assert_ne!(ctl.code, 0, "etcdctl endpoint health: {ctl:?}");
    let code = server.wait_exit(EXIT_LIMIT);
    assert!(matches!(code, Some(c) if c != 0), "exit code {code:?}");
    let log = server.log();
    assert!(
        log.contains("cannot write to the data directory"),
        "{}",
        keel_testkit::tail(&log, 20)
    );

    // Space back: every acknowledged write is there.
    fs::remove_file(server.data_dir.join("filler")).expect("free space");
    server.restart();
    let mut kv = KvClient::new(server.channel().await);
    let resp = kv
        .range(RangeRequest {
            key: b"k/".to_vec(),
            range_end: b"k0".to_vec(),
            keys_only: true,
            ..Default::default()
        })
        .await
        .expect("range")
        .into_inner();
    let keys: Vec<String> = resp
        .kvs
        .into_iter()
        .map(|kv| String::from_utf8(kv.key).expect("utf-8 key"))
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|k| !keys.contains(k)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged puts lost: {lost:?}",
        lost.len(),
        acked.len()
    );
    // Nothing but acknowledged puts and at most the one that failed (it may have reached the
    // log before the member stopped) is there.
    let unknown: Vec<&String> = keys
        .iter()
        .filter(|k| !acked.contains(k) && **k != format!("k/{:05}", acked.len()))
        .collect();
    assert!(unknown.is_empty(), "keys never written: {unknown:?}");
}
