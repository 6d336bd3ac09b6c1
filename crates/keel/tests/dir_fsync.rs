//! Every directory entry the store creates, renames or removes in its data dir is made durable
//! by an fsync of the parent directory afterwards (a new file or directory is lost on a power
//! cut until then, however often the file itself is fsynced).
//!
//! `keel store` runs under `strace -f -y` on a fresh data dir, serves one put and stops; the
//! trace's successful `mkdir`, creating `open`, `rename` and `unlink` calls under the data dir
//! must each be followed by an `fsync` of the parent directory. Without strace the test says it
//! is skipped, and fails when `CI=true`.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::PutRequest;
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_testkit::{Flavor, READY_TIMEOUT, Server, tail};

/// The quoted path arguments of a trace line, in order.
fn quoted(line: &str) -> Vec<&str> {
    line.split('"').skip(1).step_by(2).collect()
}

/// The directory entries a successful trace line changes, as absolute paths.
fn changed_entries(line: &str) -> Vec<PathBuf> {
    let Some((call, _)) = line.split_once('(') else {
        return Vec::new();
    };
    let call = call.rsplit(' ').next().unwrap_or(call);
    let ok = line.contains(") = 0") || (call == "openat" && !line.contains(") = -1"));
    if !ok {
        return Vec::new();
    }
    let paths = quoted(line);
    match call {
        "mkdir" | "mkdirat" | "unlink" | "unlinkat" | "rmdir" => {
            paths.last().map(PathBuf::from).into_iter().collect()
        }
        "rename" | "renameat" | "renameat2" => paths.iter().map(PathBuf::from).collect(),
        "openat" if line.contains("O_CREAT") => {
            paths.last().map(PathBuf::from).into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// The directory an `fsync` line syncs (strace `-y` prints an fd's path as `fd</path>`).
fn synced_dir(line: &str) -> Option<PathBuf> {
    let rest = line.split_once("fsync(")?.1;
    let path = rest.split_once('<')?.1.split_once(">)")?.0;
    line.contains(") = 0").then(|| PathBuf::from(path))
}

#[tokio::test]
async fn every_directory_change_in_the_data_dir_is_fsynced() {
    if Command::new("strace").arg("-V").output().is_err() {
        return keel_testkit::skip("dir_fsync", "strace is not installed");
    }
    // A server on fresh ports, stopped: its command line is reused under strace.
    let mut server = Server::start(Flavor::Keel);
    server.kill();
    fs::remove_dir_all(&server.data_dir).expect("clear the data dir");
    let data_dir = fs::canonicalize(&server.scratch)
        .expect("canonical scratch")
        .join("data");
    let (bin, args, env) = server.command();
    let trace = server.scratch.join("strace.txt");
    let log = server.scratch.join("traced.log");
    let mut child = Command::new("strace")
        .args(["-f", "-y", "-qq", "-o"])
        .arg(&trace)
        .args([
            "-e",
            "trace=mkdir,mkdirat,openat,rename,renameat,renameat2,unlink,unlinkat,rmdir,fsync",
        ])
        .arg(&bin)
        .args(&args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn strace");
    let deadline = Instant::now() + READY_TIMEOUT;
    while !fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("ready to serve client requests")
    {
        assert!(child.try_wait().expect("try_wait").is_none(), "exited");
        assert!(Instant::now() < deadline, "not ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut kv = KvClient::new(server.channel().await);
    kv.put(PutRequest {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
        ..Default::default()
    })
    .await
    .expect("put");
    // strace itself ignores SIGTERM while its tracee runs: stop the traced store.
    let pid = child.id();
    let children =
        fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).expect("strace's children");
    let store = children
        .split_whitespace()
        .next()
        .expect("the traced store");
    let _ = Command::new("kill").args(["-TERM", store]).status();
    let status = child.wait().expect("wait");
    let log = fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{status}: {}", tail(&log, 20));

    let trace = fs::read_to_string(&trace).expect("read trace");
    // Entries changed since their parent's last fsync.
    let mut pending: Vec<(PathBuf, String)> = Vec::new();
    let mut seen = HashSet::new();
    // What the check covered: entries changed and directory fsyncs in the data dir, so that
    // it cannot pass on a trace that saw nothing (a path that never matched, say).
    let (mut changes, mut dir_syncs) = (0, 0);
    for line in trace.lines() {
        if let Some(dir) = synced_dir(line) {
            if dir.starts_with(&data_dir) {
                dir_syncs += 1;
            }
            pending.retain(|(p, _)| p.parent() != Some(dir.as_path()));
            continue;
        }
        for path in changed_entries(line) {
            let under = path.starts_with(&data_dir) || path == data_dir;
            // Re-opening an existing file with O_CREAT changes no entry.
            let new = !line.contains("openat") || seen.insert(path.clone());
            if under && new {
                changes += 1;
                pending.push((path, line.to_string()));
            }
        }
    }
    // At least member/, member/wal/, member/snap/, the first WAL segment and the backend.
    assert!(
        changes >= 5 && dir_syncs >= 3,
        "the trace shows {changes} entries changed and {dir_syncs} directory fsyncs under {}: \
         it did not see the store build its data dir\n{}",
        data_dir.display(),
        tail(&trace, 40)
    );
    let unsynced: Vec<_> = pending.iter().map(|(_, line)| line.as_str()).collect();
    assert!(
        unsynced.is_empty(),
        "directory changes never followed by an fsync of the parent:\n{}",
        unsynced.join("\n")
    );
    assert!(Path::new(&data_dir).join("member/snap/db").is_file());
}
