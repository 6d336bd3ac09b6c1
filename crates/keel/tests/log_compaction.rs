//! Log compaction: a member that takes a snapshot every `--snapshot-count` entries deletes the
//! WAL segments the snapshot covers, so its log stays a segment or two long however much is
//! written, and a `kill -9` and restart afterwards still finds every write.
//!
//! keel only: etcd 3.5 keeps the newest `--max-wals` (5) segments whatever its snapshots cover
//! and looks for old ones every 30 s, so the same writes leave all of its segments in place.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::{PutRequest, RangeRequest};
use keel_testkit::{Flavor, Server, ServerOpts, target_flavor};

/// Bytes per value: large, so the 64 MiB segments fill after a few dozen writes.
const VALUE_BYTES: usize = 1 << 20;
/// Writes in all: about 150 MiB of log, two full segments and part of a third.
const WRITES: usize = 150;
/// Keys the writes cycle through.
const KEYS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_behind_a_snapshot_are_deleted_and_every_write_survives_a_restart() {
    if target_flavor() == Flavor::Etcd {
        return keel_testkit::not_applicable(
            "log_compaction",
            "etcd keeps --max-wals segments regardless of its snapshots",
        );
    }
    let mut server = Server::start_with(
        Flavor::Keel,
        ServerOpts {
            args: vec!["--snapshot-count=10".to_string()],
            ..Default::default()
        },
    );
    let wal_dir = server.data_dir.join("member").join("wal");

    let mut kv = KvClient::new(server.channel().await);
    let mut last_revision = 0;
    for i in 0..WRITES {
        let resp = kv
            .put(PutRequest {
                key: key(i % KEYS),
                value: value(i),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("put {i}: {e}"))
            .into_inner();
        last_revision = resp.header.expect("put header").revision;
    }

    // Purging follows the snapshot in the background: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut segments = segment_files(&wal_dir);
    while segments.len() > 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        segments = segment_files(&wal_dir);
    }
    assert!(
        segments.len() <= 2,
        "~{} MiB written with a snapshot every 10 entries, yet {} segments remain: {segments:?}",
        (WRITES * VALUE_BYTES) >> 20,
        segments.len()
    );
    assert!(
        !segments[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("0000000000000000-"),
        "the first segment is still there: {segments:?}"
    );

    server.kill();
    server.restart();
    let mut kv = KvClient::new(server.channel().await);
    for k in 0..KEYS {
        let last = (0..WRITES).rev().find(|i| i % KEYS == k).unwrap();
        let resp = kv
            .range(RangeRequest {
                key: key(k),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("get key {k} after the restart: {e}"))
            .into_inner();
        assert_eq!(resp.header.unwrap().revision, last_revision);
        assert_eq!(resp.kvs.len(), 1, "key {k} after the restart");
        assert!(
            resp.kvs[0].value == value(last),
            "key {k} holds the value of write {last}"
        );
    }
}

fn key(k: usize) -> Vec<u8> {
    format!("k/{k}").into_bytes()
}

/// Write `i`'s value: `VALUE_BYTES` of one letter, and its number up front.
fn value(i: usize) -> Vec<u8> {
    let mut v = vec![b'a' + (i % 26) as u8; VALUE_BYTES];
    v[..8].copy_from_slice(&(i as u64).to_be_bytes());
    v
}

/// The `*.wal` files in `dir`, by name (oldest first).
fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    files.sort();
    files
}
