//! The NOSPACE alarm of `--quota-backend-bytes`, raised through the write path and cleared
//! as etcd's maintenance guide says (<https://etcd.io/docs/v3.5/op-guide/maintenance/#space-quota>):
//! a member with a 16 MiB quota is filled by overwriting one key with 1 MB values (each
//! revision kept), until a put is refused with etcd's `etcdserver: mvcc: database space
//! exceeded`. Then `etcdctl alarm list` shows `memberID:<id> alarm:NOSPACE`, reads and
//! deletes are still served, and every write is refused — also after `etcdctl compact` and
//! `etcdctl defrag` have brought the backend far below the quota, as long as the alarm is
//! not disarmed. After `etcdctl alarm disarm` writes are accepted again, and every
//! acknowledged write is there, also after a restart.
//!
//! Runs on `keel store`, or on etcd 3.5.1 with `KEEL_TEST_TARGET=etcd`: this is what etcd does.

use keel_testkit::{CtlVersion, Rng, SeedReport, Server, ServerOpts, etcdctl, target_flavor};
use serde_json::Value;

const QUOTA: u64 = 16 * 1024 * 1024;
/// Below etcd's default `--max-request-bytes` (1.5 MiB).
const VALUE_BYTES: usize = 1_000_000;
/// Far more than the quota holds: the alarm must be raised before.
const MAX_PUTS: usize = 64;
const NO_SPACE: &str = "etcdserver: mvcc: database space exceeded";

fn ctl(m: &Server, args: &[&str], stdin: Option<&str>) -> keel_testkit::CtlOutput {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    etcdctl(CtlVersion::V35, &m.endpoint, &args, stdin)
}

fn ok(m: &Server, args: &[&str], stdin: Option<&str>) -> String {
    let out = ctl(m, args, stdin);
    assert_eq!(
        out.code,
        0,
        "etcdctl {args:?} on {}: {}",
        m.flavor.name(),
        out.stderr
    );
    out.stdout
}

/// A write refused with etcd's NOSPACE error, as etcdctl prints it (`lease grant` wraps it).
fn refused(m: &Server, args: &[&str], stdin: Option<&str>) {
    let out = ctl(m, args, stdin);
    assert_ne!(out.code, 0, "etcdctl {args:?} was accepted: {}", out.stdout);
    let expected = if args[0] == "lease" {
        format!("Error: failed to grant lease ({NO_SPACE})")
    } else {
        format!("Error: {NO_SPACE}")
    };
    assert_eq!(
        out.stderr.trim_end().lines().last(),
        Some(expected.as_str()),
        "etcdctl {args:?} on {}",
        m.flavor.name()
    );
}

/// `etcdctl endpoint status -w json`: (member id, revision, dbSize).
fn status(m: &Server) -> (u64, i64, u64) {
    let out = ok(m, &["endpoint", "status", "-w", "json"], None);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let s = &v[0]["Status"];
    (
        s["header"]["member_id"].as_u64().expect("member_id"),
        s["header"]["revision"].as_i64().expect("revision"),
        s["dbSize"].as_u64().expect("dbSize"),
    )
}

fn value(rng: &mut Rng) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..VALUE_BYTES)
        .map(|_| *rng.pick(ALPHABET) as char)
        .collect()
}

/// Every acknowledged write reads back.
fn check_acked(m: &Server, big: &str) {
    let got = ok(m, &["get", "big", "--print-value-only"], None);
    assert!(
        got.trim_end_matches('\n') == big,
        "big lost its last acknowledged value ({} bytes read)",
        got.len()
    );
    assert_eq!(ok(m, &["get", "keep", "--print-value-only"], None), "v\n");
}

#[test]
fn nospace_alarm_refuses_writes_until_compact_defrag_and_disarm() {
    let seed = SeedReport::new("store_quota");
    let mut rng = Rng::new(seed.seed);
    let mut m = Server::start_with(
        target_flavor(),
        ServerOpts {
            args: vec![format!("--quota-backend-bytes={QUOTA}")],
            ..Default::default()
        },
    );
    ok(&m, &["put", "keep", "v"], None);

    // Fill the quota: each put of `big` keeps the previous revision's value.
    let mut acked: Option<String> = None;
    let mut puts = 0;
    loop {
        assert!(
            puts < MAX_PUTS,
            "{MAX_PUTS} puts of {VALUE_BYTES} bytes were all accepted under a {QUOTA}-byte quota"
        );
        let v = value(&mut rng);
        let out = ctl(&m, &["put", "big"], Some(&v));
        if out.code != 0 {
            assert_eq!(
                out.stderr.trim_end().lines().last(),
                Some(format!("Error: {NO_SPACE}").as_str()),
                "put {puts} of big"
            );
            break;
        }
        assert_eq!(out.stdout, "OK\n");
        acked = Some(v);
        puts += 1;
    }
    let big = acked.expect("some puts were accepted before the quota was reached");
    assert!(
        puts >= 4,
        "only {puts} puts of {VALUE_BYTES} bytes fit a {QUOTA}-byte quota"
    );

    // The alarm is raised; reads and deletes are served, writes refused.
    let (member, _, _) = status(&m);
    // etcdctl prints a space before the newline.
    let alarm = format!("memberID:{member} alarm:NOSPACE \n");
    assert_eq!(ok(&m, &["alarm", "list"], None), alarm);
    check_acked(&m, &big);
    assert_eq!(ok(&m, &["del", "absent"], None), "0\n");
    refused(&m, &["put", "after", "small"], None);
    refused(&m, &["txn"], Some("\nput after small\n\n\n"));
    refused(&m, &["lease", "grant", "60"], None);

    // Disarming alone frees nothing: the next put that does not fit is refused again and
    // raises the alarm again.
    assert_eq!(ok(&m, &["alarm", "disarm"], None), alarm);
    assert_eq!(ok(&m, &["alarm", "list"], None), "");
    let out = ctl(&m, &["put", "big"], Some(&value(&mut rng)));
    assert_eq!(
        (out.code != 0, out.stderr.trim_end().lines().last()),
        (true, Some(format!("Error: {NO_SPACE}").as_str())),
        "a put that does not fit, after a disarm without freeing space: {out:?}"
    );
    assert_eq!(ok(&m, &["alarm", "list"], None), alarm);
    refused(&m, &["put", "after", "small"], None);

    // Compaction and defragmentation free the space, but the alarm stays until disarmed.
    let (_, revision, before) = status(&m);
    assert_eq!(
        ok(&m, &["compact", &revision.to_string()], None),
        format!("compacted revision {revision}\n")
    );
    ok(&m, &["defrag"], None);
    let (_, _, after) = status(&m);
    assert!(
        after < before && after + 4 * VALUE_BYTES as u64 <= QUOTA,
        "dbSize {before} before, {after} after compaction and defrag (quota {QUOTA})"
    );
    assert_eq!(ok(&m, &["alarm", "list"], None), alarm);
    refused(&m, &["put", "after", "small"], None);
    refused(&m, &["lease", "grant", "60"], None);
    check_acked(&m, &big);
    eprintln!(
        "{}: {puts} puts accepted; dbSize {before} before compaction and defrag, {after} after",
        m.flavor.name()
    );

    // The alarm is kept across a restart, as etcd keeps it in its backend.
    m.restart();
    assert_eq!(ok(&m, &["alarm", "list"], None), alarm);
    refused(&m, &["put", "after", "small"], None);
    check_acked(&m, &big);

    assert_eq!(ok(&m, &["alarm", "disarm"], None), alarm);
    assert_eq!(ok(&m, &["alarm", "list"], None), "");
    assert_eq!(ok(&m, &["put", "after", "small"], None), "OK\n");
    assert_eq!(
        ok(&m, &["get", "after", "--print-value-only"], None),
        "small\n"
    );
    check_acked(&m, &big);

    m.restart();
    assert_eq!(ok(&m, &["alarm", "list"], None), "");
    check_acked(&m, &big);
    assert_eq!(
        ok(&m, &["get", "after", "--print-value-only"], None),
        "small\n"
    );
    assert_eq!(ok(&m, &["put", "after", "again"], None), "OK\n");
    assert!(ok(&m, &["lease", "grant", "60"], None).contains("granted with TTL(60s)"));
    std::mem::forget(seed);
}
