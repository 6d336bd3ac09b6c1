//! The format against the real etcd 3.5.1: a snapshot saved by etcd reads and checks clean,
//! and files this crate writes pass `etcdutl snapshot status` and restore into an etcd that
//! serves the same keys.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use keel_bbolt::{Db, Writer, check};
use keel_proto::mvccpb::KeyValue;
use keel_testkit::snapshot::{etcdutl35, json_i64, put_leased, restore_into_etcd, seed, status};
use keel_testkit::{Flavor, Server, ServerOpts, ctl_ok};
use prost::Message;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The response of `etcdctl get <key> [--prefix]` as JSON.
fn get(server: &Server, key: &str, prefix: bool) -> Value {
    let mut args = vec!["get", key, "-w", "json"];
    if prefix {
        args.push("--prefix");
    }
    serde_json::from_str(&ctl_ok(server, &args)).expect("get JSON")
}

/// A real etcd holding a few keys: overwritten, deleted, a 100 KiB value and a leased key.
fn populated_etcd() -> Server {
    let server = Server::start_with(Flavor::Etcd, ServerOpts::default());
    seed(&server);
    put_leased(&server, "leased", "3600");
    server
}

/// A snapshot saved from a [`populated_etcd`], the server stopped.
struct Saved {
    utl: PathBuf,
    dir: tempfile::TempDir,
    /// The file etcdctl saved, its sha256 at the end.
    snapshot: PathBuf,
    /// The database alone, the sha256 stripped.
    plain: PathBuf,
    /// `get "" --prefix` before the snapshot.
    before: Value,
}

/// Saves a snapshot of a [`populated_etcd`] and strips (and checks) its trailing sha256;
/// `None` after skipping `test` if the etcd tools are missing.
fn saved_snapshot(test: &str) -> Option<Saved> {
    let utl = etcdutl35(test)?;
    let dir = tempfile::tempdir().unwrap();
    let server = populated_etcd();
    let before = get(&server, "", true);
    let snapshot = dir.path().join("etcd.snap");
    ctl_ok(&server, &["snapshot", "save", snapshot.to_str().unwrap()]);
    let bytes = std::fs::read(&snapshot).unwrap();
    assert_eq!(bytes.len() % 512, 32, "a saved snapshot ends in its sha256");
    let (db, sum) = bytes.split_at(bytes.len() - 32);
    assert_eq!(Sha256::digest(db).as_slice(), sum);
    let plain = dir.path().join("etcd.db");
    std::fs::write(&plain, db).unwrap();
    Some(Saved {
        utl,
        dir,
        snapshot,
        plain,
        before,
    })
}

/// Copies every bucket of `src` into a new snapshot at `dst`, with `extra(bucket)` pairs
/// appended to each bucket, and appends the sha256 as etcd does.
fn rewrite(src: &Db, dst: &Path, mut extra: impl FnMut(&[u8]) -> Vec<(Vec<u8>, Vec<u8>)>) {
    let mut w = Writer::create(dst).unwrap();
    for name in src.buckets().unwrap() {
        w.begin_bucket(&name).unwrap();
        for pair in src.entries(&name).unwrap() {
            let (k, v) = pair.unwrap();
            w.put(&k, &v).unwrap();
        }
        for (k, v) in extra(&name) {
            w.put(&k, &v).unwrap();
        }
    }
    let written = w.finish().unwrap();
    assert_eq!(check(dst).unwrap(), Vec::<String>::new());
    let mut bytes = std::fs::read(dst).unwrap();
    assert_eq!(bytes.len() as u64, written.file_size);
    let sum = Sha256::digest(&bytes);
    bytes.extend_from_slice(&sum);
    std::fs::write(dst, bytes).unwrap();
}

/// Restores `snapshot` with etcdutl into a fresh data dir and starts etcd on it.
fn restore(utl: &Path, snapshot: &Path, dir: &Path) -> Server {
    restore_into_etcd(utl, snapshot, dir.join("restored"))
}

/// The revision key of the `key` bucket: main revision, `_`, sub revision, big-endian.
fn rev_key(main: i64, sub: i64) -> Vec<u8> {
    let mut k = main.to_be_bytes().to_vec();
    k.push(b'_');
    k.extend_from_slice(&sub.to_be_bytes());
    k
}

#[test]
fn an_etcd_snapshot_reads_checks_and_survives_a_rewrite() {
    let Some(Saved {
        utl,
        dir,
        snapshot,
        plain,
        before,
    }) = saved_snapshot("an_etcd_snapshot_reads_checks_and_survives_a_rewrite")
    else {
        return;
    };

    // etcd's own file: our reader sees its buckets and rows, our check finds nothing.
    assert_eq!(check(&plain).unwrap(), Vec::<String>::new());
    let db = Db::open(&plain).unwrap();
    assert_eq!(db.page_size(), 4096);
    assert_eq!(db.freelist_page(), None, "etcd does not store its freelist");
    let names = db.buckets().unwrap();
    for bucket in ["key", "lease", "members", "meta"] {
        assert!(
            names.contains(&bucket.as_bytes().to_vec()),
            "bucket {bucket} in {names:?}"
        );
    }
    let meta: Vec<_> = db.entries(b"meta").unwrap().map(Result::unwrap).collect();
    let index = meta
        .iter()
        .find(|(k, _)| k == b"consistent_index")
        .expect("consistent_index");
    assert_eq!(index.1.len(), 8);
    assert!(u64::from_be_bytes(index.1[..].try_into().unwrap()) > 0);
    let rows: Vec<_> = db.entries(b"key").unwrap().map(Result::unwrap).collect();
    for kv in before["kvs"].as_array().unwrap() {
        let rev = json_i64(&kv["mod_revision"]);
        let (_, value) = rows
            .iter()
            .find(|(k, _)| *k == rev_key(rev, 0))
            .expect("a row at the mod revision");
        let row = KeyValue::decode(value.as_slice()).unwrap();
        assert_eq!(B64.encode(&row.key), kv["key"].as_str().unwrap());
        assert_eq!(B64.encode(&row.value), kv["value"].as_str().unwrap());
        assert_eq!(row.create_revision, json_i64(&kv["create_revision"]));
        assert_eq!(row.version, json_i64(&kv["version"]));
        assert_eq!(row.lease, kv.get("lease").map_or(0, json_i64));
    }
    let tombstone = rows
        .iter()
        .filter(|(k, _)| k.len() == 18 && k[17] == b't')
        .count();
    assert_eq!(tombstone, 1, "the delete of `gone` is a tombstone row");

    // Our copy: the same status, and a restore serves the same keys.
    let copy = dir.path().join("copy.snap");
    rewrite(&db, &copy, |_| Vec::new());
    let (want, got) = (status(&utl, &snapshot), status(&utl, &copy));
    for field in ["hash", "revision", "totalKey"] {
        assert_eq!(
            got[field], want[field],
            "status {field}: etcd's {want}, ours {got}"
        );
    }
    let restored = restore(&utl, &copy, dir.path());
    let after = get(&restored, "", true);
    assert_eq!(after["kvs"], before["kvs"]);
    assert_eq!(after["count"], before["count"]);
}

#[test]
fn a_large_written_keyspace_restores_into_etcd() {
    let Some(Saved {
        utl,
        dir,
        snapshot,
        plain,
        ..
    }) = saved_snapshot("a_large_written_keyspace_restores_into_etcd")
    else {
        return;
    };
    let db = Db::open(&plain).unwrap();

    // Thousands of revisions after etcd's last, so the `key` bucket's tree is several levels
    // deep, with values from empty to several pages.
    let base = json_i64(&status(&utl, &snapshot)["revision"]);
    let n = 4000i64;
    let value = |i: i64| -> Vec<u8> {
        let len = if i % 500 == 7 {
            20_000 + i as usize
        } else {
            (i as usize * 37) % 600
        };
        (0..len).map(|j| (j as i64 * 7 + i) as u8).collect()
    };
    let copy = dir.path().join("bulk.snap");
    rewrite(&db, &copy, |bucket| match bucket {
        b"key" => (1..=n)
            .map(|i| {
                let rev = base + i;
                let kv = KeyValue {
                    key: format!("/bulk/{i:05}").into_bytes(),
                    create_revision: rev,
                    mod_revision: rev,
                    version: 1,
                    value: value(i),
                    lease: 0,
                };
                (rev_key(rev, 0), kv.encode_to_vec())
            })
            .collect(),
        _ => Vec::new(),
    });
    let (orig, bulk) = (status(&utl, &snapshot), status(&utl, &copy));
    assert_eq!(json_i64(&bulk["revision"]), base + n);
    assert_eq!(json_i64(&bulk["totalKey"]), json_i64(&orig["totalKey"]) + n);

    let restored = restore(&utl, &copy, dir.path());
    let got = get(&restored, "/bulk/", true);
    let kvs = got["kvs"].as_array().unwrap();
    assert_eq!(kvs.len() as i64, n);
    for (i, kv) in (1..=n).zip(kvs) {
        assert_eq!(
            kv["key"].as_str().unwrap(),
            B64.encode(format!("/bulk/{i:05}"))
        );
        assert_eq!(
            kv.get("value").and_then(Value::as_str).unwrap_or(""),
            B64.encode(value(i))
        );
        assert_eq!(json_i64(&kv["mod_revision"]), base + i);
        assert_eq!(json_i64(&kv["version"]), 1);
    }
    assert_eq!(json_i64(&got["header"]["revision"]), base + n);
}
