//! The log lines that matter, beside the metrics (`keel doctor --log FILE`): of what each file
//! gained between the two scrapes of an interval, the lines whose message an operator greps for,
//! each tied to an axis, shown with the verdict (its own axis's first).
//!
//! A file is a store member's or an apiserver's log: keel's console lines, whose whole text is
//! searched, or JSON lines (keel's, etcd 3.5's, klog's), whose `msg` is. The messages are etcd's
//! own, which keel store writes too (see `keel_store::slow_log` and its leader lines), and keel's
//! and kube-apiserver's for the watch cache and leases. A file is read from where the previous
//! read stopped, up to its last complete line: no timestamps to parse, and a line being
//! written is read whole the next time. A file that shrank was rotated or truncated, and is
//! read from its start.
//!
//! [`axis_of`] and [`Picker`] decide, without I/O; [`Tails`] reads the files.

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use super::verdict::Axis;

/// One log line that matters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogLine {
    /// The file it was read from, as named on the command line.
    pub file: String,
    /// The line, cut to [`LINE_CHARS`] characters.
    pub line: String,
    /// The axis its message speaks of.
    pub axis: Axis,
}

/// At most this many lines go with a verdict.
pub const MAX_LINES: usize = 10;

/// A line longer than this many characters is cut, with an ellipsis.
pub const LINE_CHARS: usize = 300;

/// Messages an operator greps for, and the axis each speaks of.
const PATTERNS: &[(&str, Axis)] = &[
    // etcd's `warnSyncDuration` (1 s): the disk.
    ("slow fdatasync", Axis::Wal),
    // etcd's `--warning-apply-duration`, and the quota.
    ("apply request took too long", Axis::Mvcc),
    ("database space exceeded", Axis::Mvcc),
    ("NOSPACE", Axis::Mvcc),
    // etcd's raft node and server, and keel store's leader lines (the same texts).
    ("elected leader", Axis::Raft),
    ("lost leader", Axis::Raft),
    ("changed leader", Axis::Raft),
    ("leader changed", Axis::Raft),
    ("failed to send out heartbeat on time", Axis::Raft),
    ("prober detected unhealthy status", Axis::Raft),
    ("dropped internal Raft message", Axis::Raft),
    // etcd's watch streams, kube-apiserver's and keel apiserver's watch cache.
    ("failed to send watch response", Axis::Watch),
    ("Forcing watcher close", Axis::Watch),
    (
        "watch cache: the store compacted past the cache",
        Axis::Watch,
    ),
    ("watch cache: the store's watch ended", Axis::Watch),
    // etcd's lessor, keel store's lease expiry.
    ("failed to revoke lease", Axis::Lease),
    ("revocation of expired leases failed", Axis::Lease),
    ("lease expiry storm", Axis::Lease),
];

/// The axis `line` speaks of, if its message is one an operator greps for: the `msg` of a
/// JSON line, the whole of any other line.
pub fn axis_of(line: &str) -> Option<Axis> {
    let line = line.trim();
    let parsed = match line.starts_with('{') {
        true => serde_json::from_str::<serde_json::Value>(line).ok(),
        false => None,
    };
    let message = match &parsed {
        Some(json) => json.get("msg").and_then(|m| m.as_str()).unwrap_or(""),
        None => line,
    };
    PATTERNS
        .iter()
        .find(|(pattern, _)| message.contains(pattern))
        .map(|&(_, axis)| axis)
}

/// `line` cut to [`LINE_CHARS`] characters.
fn cut(line: &str) -> String {
    let line = line.trim();
    match line.char_indices().nth(LINE_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_string(),
    }
}

/// Keeps the lines that go with a verdict on `axis`: the latest [`MAX_LINES`] of its axis,
/// then the latest of the others, as many as there is room for.
pub struct Picker {
    axis: Option<Axis>,
    own: VecDeque<LogLine>,
    others: VecDeque<LogLine>,
}

impl Picker {
    /// A picker for a verdict on `axis` (none: every axis is "other").
    pub fn new(axis: Option<Axis>) -> Picker {
        Picker {
            axis,
            own: VecDeque::new(),
            others: VecDeque::new(),
        }
    }

    /// Considers `line`, read from `file` after the ones offered before.
    pub fn offer(&mut self, file: &str, line: &str) {
        let Some(axis) = axis_of(line) else {
            return;
        };
        let kept = match Some(axis) == self.axis {
            true => &mut self.own,
            false => &mut self.others,
        };
        if kept.len() == MAX_LINES {
            kept.pop_front();
        }
        kept.push_back(LogLine {
            file: file.to_string(),
            line: cut(line),
            axis,
        });
    }

    /// The lines kept: the verdict's axis first, each group in the order read.
    pub fn finish(self) -> Vec<LogLine> {
        let room = MAX_LINES - self.own.len();
        let skip = self.others.len().saturating_sub(room);
        self.own
            .into_iter()
            .chain(self.others.into_iter().skip(skip))
            .collect()
    }
}

/// At most this many bytes of a file are read per interval: its latest.
const MAX_READ: u64 = 16 << 20;

/// The log files named with `--log`, each with where the next read starts.
pub struct Tails {
    files: Vec<(PathBuf, u64)>,
}

impl Tails {
    /// Starts at the current end of each of `paths`, which must be readable files.
    pub fn at_end(paths: &[PathBuf]) -> anyhow::Result<Tails> {
        let files = paths
            .iter()
            .map(|path| {
                let len = std::fs::File::open(path)
                    .and_then(|file| file.metadata())
                    .with_context(|| format!("--log {}", path.display()))?
                    .len();
                Ok((path.clone(), len))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Tails { files })
    }

    /// Offers `picker` every complete line the files gained since the last read. A file that
    /// cannot be read now is skipped (it may be being rotated).
    pub fn read_into(&mut self, picker: &mut Picker) {
        for (path, offset) in &mut self.files {
            let Ok(gained) = read_from(path, offset) else {
                continue;
            };
            let name = path.display().to_string();
            for line in String::from_utf8_lossy(&gained).lines() {
                picker.offer(&name, line);
            }
        }
    }
}

/// The complete lines of `path` from `offset` (from its start if it shrank below it; of its
/// latest [`MAX_READ`] bytes if it grew by more), moving `offset` past them.
fn read_from(path: &Path, offset: &mut u64) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len < *offset {
        *offset = 0;
    }
    let latest = len.saturating_sub(MAX_READ);
    let skipped = latest > *offset;
    let start = (*offset).max(latest);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(len - start).read_to_end(&mut bytes)?;
    let Some(last) = bytes.iter().rposition(|&b| b == b'\n') else {
        return Ok(Vec::new());
    };
    bytes.truncate(last + 1);
    *offset = start + bytes.len() as u64;
    if skipped {
        // The first line read is the end of one.
        let first = bytes.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
        bytes.drain(..first);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_json_lines_match_on_their_message() {
        let slow = r#"{"level":"warn","ts":"2026-12-07T04:00:00.000Z","caller":"wal/wal.go:802","msg":"slow fdatasync","took":"1.5s","expected-duration":"1s"}"#;
        assert_eq!(axis_of(slow), Some(Axis::Wal));
        let apply = r#"{"level":"warn","ts":"2026-12-07T04:00:00.000Z","caller":"etcdserver/util.go:166","msg":"apply request took too long","took":"212ms","expected-duration":"100ms","prefix":"","request":"header:<ID:1 > put:<key:\"a\" >"}"#;
        assert_eq!(axis_of(apply), Some(Axis::Mvcc));
        let elected = r#"{"level":"info","ts":"2026-12-07T04:00:00.000Z","logger":"raft","caller":"raft/node.go:325","msg":"raft.node: 8e9e05c52164694d elected leader 8e9e05c52164694d at term 2"}"#;
        assert_eq!(axis_of(elected), Some(Axis::Raft));
        let heartbeat = r#"{"level":"warn","ts":"2026-12-07T04:00:00.000Z","caller":"etcdserver/raft.go:369","msg":"leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk","to":"a1","heartbeat-interval":"100ms","expected-duration":"200ms","exceeded-duration":"1.2s"}"#;
        assert_eq!(axis_of(heartbeat), Some(Axis::Raft));
        // A field that happens to hold a pattern is not the message.
        let put = r#"{"level":"info","ts":"2026-12-07T04:00:00.000Z","msg":"request stats","key":"slow fdatasync"}"#;
        assert_eq!(axis_of(put), None);
        let ready = r#"{"level":"info","ts":"2026-12-07T04:00:00.000Z","msg":"ready to serve client requests"}"#;
        assert_eq!(axis_of(ready), None);
    }

    #[test]
    fn keel_console_and_json_lines_match() {
        let console = "2026-12-07T04:00:00.123456Z  WARN keel_store::slow_log: slow fdatasync \
                       took=1.1s expected-duration=1s suppressed=0";
        assert_eq!(axis_of(console), Some(Axis::Wal));
        let json = r#"{"ts":"2026-12-07T04:00:00.123456Z","level":"warn","component":"store","member":"default","logger":"keel_store::slow_log","msg":"apply request took too long","took":"250ms","expected-duration":"100ms","entries":3,"suppressed":0}"#;
        assert_eq!(axis_of(json), Some(Axis::Mvcc));
        let lost = "2026-12-07T04:00:00.123456Z  INFO keel_store::server::raft_metrics: \
                    raft.node: a1 lost leader b2 at term 7";
        assert_eq!(axis_of(lost), Some(Axis::Raft));
        let storm = "2026-12-07T04:00:00.123456Z  WARN keel_store::serve: lease expiry storm: \
                     leases expire now expired=500";
        assert_eq!(axis_of(storm), Some(Axis::Lease));
        let serving =
            "2026-12-07T04:00:00.123456Z  INFO keel_store::serve: ready to serve client requests";
        assert_eq!(axis_of(serving), None);
        // A line that is not JSON after all is searched whole.
        assert_eq!(axis_of("{ not json: slow fdatasync"), Some(Axis::Wal));
    }

    #[test]
    fn the_verdicts_axis_comes_first_and_the_latest_are_kept() {
        let mut picker = Picker::new(Some(Axis::Wal));
        picker.offer("a.log", "raft.node: 1 elected leader 1 at term 2");
        for i in 0..12 {
            picker.offer("b.log", &format!("slow fdatasync took={i}s"));
        }
        picker.offer("a.log", "nothing to see");
        let kept = picker.finish();
        assert_eq!(kept.len(), MAX_LINES);
        assert!(
            kept.iter()
                .all(|l| l.axis == Axis::Wal && l.file == "b.log")
        );
        assert_eq!(kept[0].line, "slow fdatasync took=2s");
        assert_eq!(kept[9].line, "slow fdatasync took=11s");

        let mut picker = Picker::new(Some(Axis::Mvcc));
        picker.offer("a.log", "raft.node: 1 lost leader 1 at term 2");
        picker.offer("a.log", "apply request took too long");
        let kept = picker.finish();
        let axes: Vec<Axis> = kept.iter().map(|l| l.axis).collect();
        assert_eq!(axes, [Axis::Mvcc, Axis::Raft]);
    }

    #[test]
    fn long_lines_are_cut() {
        let long = format!("slow fdatasync {}", "é".repeat(400));
        let cut = cut(&long);
        assert_eq!(cut.chars().count(), LINE_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(super::cut("  short  "), "short");
    }

    #[test]
    fn files_are_read_from_where_the_last_read_stopped() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.log");
        let mut file = std::fs::File::create(&path).unwrap();
        writeln!(file, "slow fdatasync before the first scrape").unwrap();
        let mut tails = Tails::at_end(std::slice::from_ref(&path)).unwrap();
        let read = |tails: &mut Tails| {
            let mut picker = Picker::new(None);
            tails.read_into(&mut picker);
            picker
                .finish()
                .into_iter()
                .map(|l| l.line)
                .collect::<Vec<_>>()
        };
        // A line being written is read once it is whole.
        write!(file, "slow fdatasync one\nslow fdatasync tw").unwrap();
        assert_eq!(read(&mut tails), ["slow fdatasync one"]);
        writeln!(file, "o").unwrap();
        assert_eq!(read(&mut tails), ["slow fdatasync two"]);
        assert!(read(&mut tails).is_empty());
        // Rotated: read from the start of the new file.
        drop(file);
        std::fs::write(&path, "lost leader\n").unwrap();
        assert_eq!(read(&mut tails), ["lost leader"]);
        // A file that is not there is an error at the start.
        assert!(Tails::at_end(&[dir.path().join("missing.log")]).is_err());
    }
}
