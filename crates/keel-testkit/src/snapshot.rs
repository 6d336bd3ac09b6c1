//! Shared by the snapshot tests: the keys every snapshot holds (overwrites, a delete, a
//! 100 KiB value, leased keys), and etcdutl 3.5, found beside etcdctl 3.5, with its
//! `snapshot status` read as JSON and its `snapshot restore` into a data directory that a
//! real etcd is then started on.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::{CtlVersion, Flavor, Server, ServerOpts, ctl_ok, etcdctl, skip};

/// Writes the keys every snapshot test starts from: `a` overwritten, `b`, `c/d`, `gone`
/// put and deleted, and `big`, a 100 KiB value.
pub fn seed(server: &Server) {
    for (k, v) in [
        ("a", "1"),
        ("b", "2"),
        ("a", "3"),
        ("c/d", "4"),
        ("gone", "x"),
    ] {
        ctl_ok(server, &["put", k, v]);
    }
    ctl_ok(server, &["del", "gone"]);
    let big: String = (0..100 * 1024)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let args = ["put".to_string(), "big".to_string()];
    let out = etcdctl(CtlVersion::V35, &server.endpoint, &args, Some(&big));
    assert_eq!(out.code, 0, "put big: {}", out.stderr);
}

/// Grants a lease of `ttl` seconds and puts `key` on it; the lease's id in hex.
pub fn put_leased(server: &Server, key: &str, ttl: &str) -> String {
    let granted = ctl_ok(server, &["lease", "grant", ttl]);
    let lease = granted
        .split_whitespace()
        .nth(1)
        .expect("lease <id> granted")
        .to_string();
    ctl_ok(server, &["put", key, "v", &format!("--lease={lease}")]);
    lease
}

/// etcdutl 3.5, found beside etcdctl 3.5; `None` after [`skip`]ping `test` if it is missing
/// (a failure under `CI=true`).
pub fn etcdutl35(test: &str) -> Option<PathBuf> {
    match crate::etcd35_bins() {
        Ok((_, ctl)) => {
            let utl = ctl.with_file_name("etcdutl");
            if utl.is_file() {
                return Some(utl);
            }
            skip(test, &format!("no etcdutl beside {}", ctl.display()));
        }
        Err(why) => skip(test, &why),
    }
    None
}

/// Runs etcdutl `bin`, which must succeed; its standard output.
pub fn run_etcdutl(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().expect("run etcdutl");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "etcdutl {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout.into_owned()
}

/// `etcdutl snapshot status -w json` of the snapshot at `path`: `hash`, `revision`,
/// `totalKey` (entries over all buckets) and `totalSize`.
pub fn status(bin: &Path, path: &Path) -> Value {
    let out = run_etcdutl(
        bin,
        &["snapshot", "status", path.to_str().unwrap(), "-w", "json"],
    );
    serde_json::from_str(&out).expect("status JSON")
}

/// Restores `snapshot` with etcdutl `bin` (default name and URLs) into the new data
/// directory `data` and starts a real etcd on it.
pub fn restore_into_etcd(bin: &Path, snapshot: &Path, data: PathBuf) -> Server {
    let args = [
        "snapshot",
        "restore",
        snapshot.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ];
    run_etcdutl(bin, &args);
    Server::start_with(
        Flavor::Etcd,
        ServerOpts {
            data_dir: Some(data),
            ..ServerOpts::default()
        },
    )
}

/// An integer of etcdctl's or etcdutl's JSON, which prints some as strings.
pub fn json_i64(v: &Value) -> i64 {
    v.as_str()
        .map_or_else(|| v.as_i64().unwrap(), |s| s.parse().unwrap())
}
