//! Memory of the key index at scale: run with
//! `cargo nextest run -p keel-mvcc --release --run-ignored only memory` to print the resident
//! set size after loading 1,000,000 keys of 256-byte values (`KEEL_MVCC_CACHE_MIB` sets redb's
//! page cache, to separate the index from the cache).

use keel_mvcc::{Mvcc, MvccOptions};
use keel_proto::etcdserverpb::{PutRequest, RangeRequest};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

#[test]
#[ignore = "loads 1e6 keys; run explicitly"]
fn million_keys_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cache_bytes = std::env::var("KEEL_MVCC_CACHE_MIB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(MvccOptions::default().cache_bytes, |mib| mib << 20);
    let options = MvccOptions {
        cache_bytes,
        ..MvccOptions::default()
    };
    let m = Mvcc::open_with(&dir.path().join("db"), &options).unwrap();
    let base = rss_kib();
    let value = vec![b'x'; 256];
    let no_leases = |_: i64| false;
    let start = std::time::Instant::now();
    for batch in 0..1000 {
        let mut b = m.begin_apply(&no_leases);
        for i in 0..1000 {
            let key = format!("/registry/pods/default/pod-{:07}", batch * 1000 + i).into_bytes();
            b.put(&PutRequest {
                key,
                value: value.clone(),
                ..Default::default()
            })
            .unwrap();
        }
        b.commit(batch as u64 + 1).unwrap();
        if batch % 100 == 99 {
            m.sync().unwrap();
        }
    }
    let load = start.elapsed();
    let after = rss_kib();
    let r = m
        .range(&RangeRequest {
            key: b"/registry/".to_vec(),
            range_end: b"/registry0".to_vec(),
            count_only: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.count, 1_000_000);
    println!(
        "1e6 puts in {load:?}; RSS {} MiB -> {} MiB; db {} MiB",
        base / 1024,
        after / 1024,
        m.db_size() >> 20
    );
    drop(m);
    let m = Mvcc::open_with(&dir.path().join("db"), &options).unwrap();
    println!(
        "reopened: RSS {} MiB, rev {}",
        rss_kib() / 1024,
        m.current_revision()
    );
}
