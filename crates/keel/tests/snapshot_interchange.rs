//! Snapshots interchangeable with etcd's, against the real etcd 3.5.1, etcdctl and etcdutl:
//!
//! - keel → etcd: `etcdctl snapshot save` from `keel store`, `etcdutl snapshot status` and
//!   `restore`, and an etcd serving the same keys and leases.
//!
//! Every store gets the same writes: overwrites, deletes, a 100 KiB value, three leased keys
//! on two leases, and 6,000 rows from bulk txns, so the `key` bucket's tree has leaf, branch
//! and root levels.

use std::path::{Path, PathBuf};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::{PutRequest, RequestOp, TxnRequest};
use keel_testkit::snapshot::{etcdutl35, json_i64, put_leased, restore_into_etcd, seed, status};
use keel_testkit::{Flavor, Server, ctl_ok};
use serde_json::Value;

/// Bulk txns and puts per txn (etcd's default `--max-txn-ops` is 128).
const BULK: (usize, usize) = (60, 100);

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
