//! `--auto-compaction-mode` / `--auto-compaction-retention` compact the store on their own,
//! as etcd's compactors do:
//!
//! - `revision` mode with a retention of 5 keeps the last 5 revisions: etcd's revision
//!   compactor runs every five minutes and compacts to `current - 5`, so after 20 puts (the
//!   store at revision 21) the compact revision becomes exactly 16. This test waits for that
//!   five-minute pass (up to ten minutes).
//! - `periodic` mode with a retention of `1s` compacts once a second to the revision of a
//!   second ago: under a stream of puts the compact revision moves forward again and again,
//!   and once the puts stop it reaches the last one.
//!
//! The compact revision is observed the way a client meets it: a watch from revision 1 is
//! answered with `compact_revision`, and `etcdctl get --rev` below it fails with etcd's
//! `etcdserver: mvcc: required revision has been compacted`. Nothing a put acknowledged is
//! lost. Runs on `keel store`, or on etcd 3.5.1 with `KEEL_TEST_TARGET=etcd`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::WatchCreateRequest;
use keel_testkit::{CtlOutput, CtlVersion, Server, ServerOpts, etcdctl, kv, target_flavor};
use serde_json::Value;

const COMPACTED: &str = "Error: etcdserver: mvcc: required revision has been compacted";

fn start(mode: &str, retention: &str) -> Server {
    Server::start_with(
        target_flavor(),
        ServerOpts {
            args: vec![
                format!("--auto-compaction-mode={mode}"),
                format!("--auto-compaction-retention={retention}"),
            ],
            ..Default::default()
        },
    )
}

fn ctl(m: &Server, args: &[&str]) -> CtlOutput {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    etcdctl(CtlVersion::V35, &m.endpoint, &args, None)
}

fn ok(m: &Server, args: &[&str]) -> String {
    let out = ctl(m, args);
    assert_eq!(out.code, 0, "etcdctl {args:?}: {}", out.stderr);
    out.stdout
}

/// `etcdctl put k/<i> v<i>`: the revision of the put.
fn put(m: &Server, i: usize) -> i64 {
    let out = ok(
        m,
        &["put", &format!("k/{i:04}"), &format!("v{i}"), "-w", "json"],
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["header"]["revision"].as_i64().expect("a revision")
}

/// The store's compact revision as a watch from revision 1 meets it (0: nothing compacted;
/// the `k/` keys exist from revision 2 on, so an uncompacted watch gets an event at once).
async fn compact_revision(m: &Server) -> i64 {
    let create = WatchCreateRequest {
        key: b"k/".to_vec(),
        range_end: b"k0".to_vec(),
        start_revision: 1,
        ..Default::default()
    };
    let (_requests, mut stream) = kv::watch(m.channel().await, create, false)
        .await
        .expect("open a watch");
    let limit = Duration::from_secs(60);
    loop {
        let resp = tokio::time::timeout(limit, stream.message())
            .await
            .unwrap_or_else(|_| panic!("a watch from revision 1 got no answer within {limit:?}"))
            .expect("the watch stream")
            .expect("the watch stream ended");
        if resp.compact_revision > 0 {
            return resp.compact_revision;
        }
        if !resp.events.is_empty() {
            return 0;
        }
    }
}

/// Below `compacted` etcdctl reads fail with etcd's error; at it they are served.
fn check_reads(m: &Server, compacted: i64) {
    let out = ctl(m, &["get", "k/0000", &format!("--rev={}", compacted - 1)]);
    assert_ne!(
        out.code, 0,
        "a read below the compact revision: {}",
        out.stdout
    );
    assert_eq!(out.stderr.trim_end().lines().last(), Some(COMPACTED));
    ok(m, &["get", "k/0000", &format!("--rev={compacted}")]);
}

/// Every put `0..n` reads back with its value.
fn check_acked(m: &Server, n: usize) {
    let out = ok(m, &["get", "k/", "--prefix"]);
    let expected: String = (0..n).map(|i| format!("k/{i:04}\nv{i}\n")).collect();
    assert!(out == expected, "the k/ keys after compaction:\n{out}");
}

#[tokio::test]
async fn revision_mode_keeps_the_last_revisions() {
    let m = start("revision", "5");
    let mut last = 0;
    for i in 0..20 {
        last = put(&m, i);
    }
    assert_eq!(last, 21, "20 puts on a new store");

    // etcd's revision compactor wakes every five minutes.
    let limit = Duration::from_secs(600);
    let deadline = Instant::now() + limit;
    let compacted = loop {
        let c = compact_revision(&m).await;
        if c > 0 {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "no auto compaction within {limit:?} in revision mode"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    assert_eq!(
        compacted,
        last - 5,
        "the compact revision keeps 5 revisions"
    );
    check_reads(&m, compacted);
    let at = ok(&m, &["get", "k/", "--prefix", "--keys-only", "--rev=16"]);
    assert_eq!(at.lines().filter(|l| !l.is_empty()).count(), 15, "{at}");
    check_acked(&m, 20);
}

#[tokio::test]
async fn periodic_mode_compacts_every_period() {
    let m = start("periodic", "1s");
    let limit = Duration::from_secs(180);
    let deadline = Instant::now() + limit;
    let mut seen = BTreeSet::new();
    let mut last = 0;
    let mut n = 0;
    while seen.len() < 2 {
        for _ in 0..10 {
            last = put(&m, n);
            n += 1;
        }
        let c = compact_revision(&m).await;
        assert!(c <= last, "compacted to {c}, past the last put at {last}");
        if c > 0 {
            seen.insert(c);
        }
        assert!(
            Instant::now() < deadline,
            "within {limit:?} of puts, auto compaction compacted to {seen:?} (wanted two \
             compactions)"
        );
    }

    // Once the puts stop, the compactor catches up with the last of them.
    let deadline = Instant::now() + limit;
    loop {
        let c = compact_revision(&m).await;
        assert!(c <= last, "compacted to {c}, past the last put at {last}");
        if c == last {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{limit:?} after the last put (revision {last}) the compact revision is {c}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "{}: {n} puts, compactions seen at {seen:?}, then at {last}",
        m.flavor.name()
    );
    check_reads(&m, last);
    check_acked(&m, n);
}
