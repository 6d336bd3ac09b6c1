//! Snapshots interchangeable with etcd's, both ways, against the real etcd 3.5.1, etcdctl and
//! etcdutl:
//!
//! - keel → etcd: `etcdctl snapshot save` from `keel store`, `etcdutl snapshot status` and
//!   `restore`, and an etcd serving the same keys and leases;
//! - etcd → keel: a snapshot saved from etcd restored by `keel_store::exchange::restore`
//!   and served by `keel store`, also with a revision bump, and refused when damaged or
//!   aimed at a data directory in use;
//! - `keel_store::exchange::rewrite` of an etcd snapshot with a revision bump, restored by
//!   etcdutl 3.5.1 and served by etcd at the bumped revision with the past compacted.
//!
//! Every store gets the same writes: overwrites, deletes, a 100 KiB value, three leased keys
//! on two leases, and 6,000 rows from bulk txns, so the `key` bucket's tree has leaf, branch
//! and root levels.

use std::path::{Path, PathBuf};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::{PutRequest, RequestOp, TxnRequest};
use keel_store::exchange::{RestoreError, RestoreOptions, restore, rewrite};
use keel_testkit::snapshot::{etcdutl35, json_i64, put_leased, restore_into_etcd, seed, status};
use keel_testkit::{Flavor, Server, ServerOpts, ctl, ctl_ok};
use serde_json::Value;

/// Bulk txns and puts per txn (etcd's default `--max-txn-ops` is 128).
const BULK: (usize, usize) = (60, 100);
/// The revision bump of the bump tests.
const BUMP: i64 = 1000;

/// A server of `flavor` started on the data directory `data`.
fn started_on(flavor: Flavor, data: PathBuf) -> Server {
    Server::start_with(
        flavor,
        ServerOpts {
            data_dir: Some(data),
            ..ServerOpts::default()
        },
    )
}

/// What a store serves: every key, the revision, the leases with their granted TTLs.
#[derive(Debug, PartialEq)]
struct Served {
    kvs: Value,
    count: Value,
    revision: i64,
    leases: Vec<(String, i64)>,
}

fn served(server: &Server) -> Served {
    let got: Value =
        serde_json::from_str(&ctl_ok(server, &["get", "", "--prefix", "-w", "json"])).unwrap();
    let list = ctl_ok(server, &["lease", "list"]);
    let mut leases: Vec<(String, i64)> = list
        .lines()
        .skip(1)
        .map(|id| {
            let ttl: Value =
                serde_json::from_str(&ctl_ok(server, &["lease", "timetolive", id, "-w", "json"]))
                    .unwrap();
            (id.to_string(), json_i64(&ttl["granted-ttl"]))
        })
        .collect();
    leases.sort();
    Served {
        kvs: got["kvs"].clone(),
        count: got["count"].clone(),
        revision: json_i64(&got["header"]["revision"]),
        leases,
    }
}

/// Gives `server` the writes every test starts from; its revision after them.
fn populate(server: &Server) -> i64 {
    bulk(server);
    seed(server);
    put_leased(server, "leased/1", "600");
    let long = put_leased(server, "leased/2", "3600");
    ctl_ok(
        server,
        &["put", "leased/3", "v", &format!("--lease={long}")],
    );
    ctl_ok(server, &["put", "a", "last"]);
    served(server).revision
}

/// [`BULK`] txns of puts, each one revision with many rows.
fn bulk(server: &Server) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut kv = KvClient::new(server.channel().await);
        let (txns, per_txn) = BULK;
        for t in 0..txns {
            let success = (0..per_txn)
                .map(|i| RequestOp {
                    request: Some(Request::RequestPut(PutRequest {
                        key: format!("/bulk/{t:03}/{i:03}").into_bytes(),
                        value: vec![b'v'; 100 + (t * per_txn + i) % 60],
                        ..Default::default()
                    })),
                })
                .collect();
            kv.txn(TxnRequest {
                success,
                ..Default::default()
            })
            .await
            .expect("bulk txn");
        }
    });
}

/// A snapshot in `dir` of a real etcd given [`populate`]'s writes, with what the etcd served
/// and its revision; the etcd is stopped.
fn saved_etcd(dir: &Path) -> (PathBuf, Served, i64) {
    let etcd = Server::start(Flavor::Etcd);
    let latest = populate(&etcd);
    let before = served(&etcd);
    (save(&etcd, dir, "etcd.snap"), before, latest)
}

/// Saves a snapshot of `server` to `dir/name`.
fn save(server: &Server, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    ctl_ok(server, &["snapshot", "save", path.to_str().unwrap()]);
    path
}

/// Entries over all buckets of the snapshot at `path`, as keel-bbolt reads them.
fn entries(path: &Path) -> i64 {
    let db = keel_bbolt::Db::open(path).unwrap();
    let buckets = db.buckets().unwrap();
    buckets
        .iter()
        .map(|b| db.entries(b).unwrap().count() as i64)
        .sum()
}

/// Checks that `server`, restored with a bump of [`BUMP`] from a store at revision `latest`
/// serving `before`, serves the same keys at `latest + BUMP`, answers reads and watches at
/// older revisions with compacted, and puts the next write at `latest + BUMP + 1`.
fn check_bumped(server: &Server, before: &Served, latest: i64) {
    let now = served(server);
    assert_eq!(now.kvs, before.kvs);
    assert_eq!(now.leases, before.leases);
    assert_eq!(now.revision, latest + BUMP);
    let compacted = "required revision has been compacted";
    let old = latest.to_string();
    let get = ctl(server, &["get", "a", &format!("--rev={old}")]);
    assert_ne!(get.code, 0, "get at {old}: {}", get.stdout);
    assert!(
        get.stderr.contains(compacted),
        "get at {old}: {}",
        get.stderr
    );
    let watch = ctl(server, &["watch", "a", &format!("--rev={old}")]);
    assert!(
        watch.stderr.contains(compacted),
        "watch from {old}: {}{}",
        watch.stdout,
        watch.stderr
    );
    let put: Value =
        serde_json::from_str(&ctl_ok(server, &["put", "after", "x", "-w", "json"])).unwrap();
    assert_eq!(json_i64(&put["header"]["revision"]), latest + BUMP + 1);
    let at = (latest + BUMP).to_string();
    ctl_ok(server, &["get", "a", &format!("--rev={at}")]);
}

#[test]
fn a_keel_snapshot_restores_into_etcd() {
    let Some(utl) = etcdutl35("a_keel_snapshot_restores_into_etcd") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let keel = Server::start(Flavor::Keel);
    let latest = populate(&keel);
    let before = served(&keel);
    assert_eq!(before.leases.len(), 2);
    let snapshot = save(&keel, dir.path(), "keel.snap");
    drop(keel);

    assert_eq!(keel_bbolt::check(&snapshot).unwrap(), Vec::<String>::new());
    let rows = entries(&snapshot);
    assert!(rows > (BULK.0 * BULK.1) as i64, "{rows} entries");
    let st = status(&utl, &snapshot);
    assert_eq!(json_i64(&st["revision"]), latest, "{st}");
    assert_eq!(json_i64(&st["totalKey"]), rows, "{st}");

    let etcd = restore_into_etcd(&utl, &snapshot, dir.path().join("etcd"));
    let after = served(&etcd);
    assert_eq!(after, before);
}

#[test]
fn an_etcd_snapshot_restores_into_keel() {
    let test = "an_etcd_snapshot_restores_into_keel";
    let Some(_) = etcdutl35(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (snapshot, before, latest) = saved_etcd(dir.path());

    let data = dir.path().join("keel");
    let opts = RestoreOptions {
        data_dir: Some(data.clone()),
        ..RestoreOptions::default()
    };
    let restored = restore(&snapshot, &opts).unwrap();
    assert_eq!(restored.revision, latest);
    assert_eq!(restored.leases, 2);
    let keel = started_on(Flavor::Keel, data.clone());
    assert_eq!(served(&keel), before);
    let put: Value =
        serde_json::from_str(&ctl_ok(&keel, &["put", "after", "x", "-w", "json"])).unwrap();
    assert_eq!(json_i64(&put["header"]["revision"]), latest + 1);
    drop(keel);

    // Refusals touch nothing: a data directory in use, a damaged file.
    let before_files = std::fs::read_dir(data.join("member/snap")).unwrap().count();
    let err = restore(&snapshot, &opts).unwrap_err();
    assert!(matches!(err, RestoreError::NotEmpty(_)), "{err}");
    assert_eq!(
        std::fs::read_dir(data.join("member/snap")).unwrap().count(),
        before_files
    );
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    let damaged = dir.path().join("damaged.snap");
    std::fs::write(&damaged, &bytes).unwrap();
    let target = dir.path().join("never");
    let err = restore(
        &damaged,
        &RestoreOptions {
            data_dir: Some(target.clone()),
            ..RestoreOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("expected sha256 ["),
        "etcdutl's message: {err}"
    );
    assert!(!target.exists());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("restoring")),
        "scratch left behind: {names:?}"
    );
}

#[test]
fn a_bumped_restore_into_keel_compacts_the_past() {
    let Some(_) = etcdutl35("a_bumped_restore_into_keel_compacts_the_past") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (snapshot, before, latest) = saved_etcd(dir.path());

    let data = dir.path().join("keel");
    let opts = RestoreOptions {
        data_dir: Some(data.clone()),
        bump_revision: BUMP as u64,
        mark_compacted: true,
        ..RestoreOptions::default()
    };
    let restored = restore(&snapshot, &opts).unwrap();
    assert_eq!(restored.revision, latest + BUMP);
    assert_eq!(restored.compact_revision, latest + BUMP);
    let keel = started_on(Flavor::Keel, data);
    check_bumped(&keel, &before, latest);
}

#[test]
fn a_rewritten_snapshot_restores_into_etcd_with_the_past_compacted() {
    let test = "a_rewritten_snapshot_restores_into_etcd_with_the_past_compacted";
    let Some(utl) = etcdutl35(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (snapshot, before, latest) = saved_etcd(dir.path());

    let bumped = dir.path().join("bumped.snap");
    let rewritten = rewrite(&snapshot, &bumped, BUMP as u64, true).unwrap();
    assert_eq!(rewritten.revision, latest + BUMP);
    // The same entries, and the two compaction revisions etcd had not written.
    let st = status(&utl, &bumped);
    assert_eq!(json_i64(&st["totalKey"]), entries(&snapshot) + 2, "{st}");
    assert_eq!(json_i64(&st["totalSize"]), rewritten.file_size as i64 - 32);

    let etcd = restore_into_etcd(&utl, &bumped, dir.path().join("etcd"));
    check_bumped(&etcd, &before, latest);
}
