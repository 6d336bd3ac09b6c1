//! Power cuts during a snapshot install: a follower that receives the leader's snapshot and
//! loses power part way keeps every acknowledged write, starts, and never answers with a
//! lower revision than it answered before the cut.
//!
//! Three `keel store` members run with a small `--snapshot-count` and small WAL segments;
//! the data dir of one follower lives on a `keel_lazyfs` mount, which keeps everything not
//! yet made durable in a volatile layer that a cut drops (see that crate). 1.5 MiB of
//! large values make the snapshot take a while to stream and write. Each round:
//!
//! 1. the follower is killed and the others take writes until the leader has snapshotted
//!    and purged its log past the follower's end, so the follower can only catch up from a
//!    snapshot;
//! 2. the follower is started again while writers keep loading the leader, reads on it
//!    (serializable, every millisecond) record the revisions it answers, and its power is
//!    cut at a point the seeded PRNG picks: a random delay after the start (often while it
//!    still replays its WAL), a random delay after the incoming snapshot file
//!    (`member/snap/db.incoming.<n>`) appears (while the snapshot is written), as soon as
//!    that file is gone (renamed over the backend), as soon as the follower answers a read
//!    from the snapshot (its revision at or above the one acknowledged before the start,
//!    before the install is over), or as soon as it logs the snapshot installed (its log
//!    and WAL purge follow);
//! 3. the mount is remounted with the durable state alone and the follower restarted. It
//!    must start; its first serializable read must not be below any revision it answered
//!    before the cut (answers received after the cut do not count: a keel member never
//!    serves a revision it could come back below); and once it has caught up to the
//!    highest acknowledged revision, a serializable read on it must return every write
//!    acknowledged by the cluster in any round, with its value and mod_revision.
//!
//! Each cut is reported with where it landed, as seen just before it: `Starting` (not yet
//! serving), `Waiting` (no snapshot file yet), `Receiving` (the incoming file exists, with
//! its size), `Renamed` (the file was seen and is gone), `Answered` (the follower answered
//! from the snapshot) or `Installed` (the install was logged); and with whether the
//! restart found the installed backend ahead of its log (openraft then purges the log up
//! to it: the cut fell after the backend swap, before the log purge was durable). A cut
//! counts as during the install when the file was seen or the snapshot answered from and
//! the process never logged the install; the summary counts those, and with 8 cuts or
//! more the test fails if none did.
//!
//! keel only: etcd 3.5 keeps 5,000 entries for a slow follower, so it would catch up from
//! its log. `KEEL_SNAPSHOT_CUTS` sets the number of cuts (24 by default); the seed is printed
//! and replayable with `KEEL_TEST_SEED`. Needs FUSE (root and `/dev/fuse`, as CI has);
//! elsewhere it is skipped, saying so, and in CI a skip is a failure.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::{
    PutRequest, RangeRequest, RequestOp, StatusRequest, TxnRequest, request_op,
};
use keel_testkit::acked::{Acked, Writers, verify_read};
use keel_testkit::disk::{Disk, power_test};
use keel_testkit::kv::agreed_leader;
use keel_testkit::{Cluster, Flavor, Rng, Server, target_flavor};
use tonic::transport::Channel;

/// The keys this test writes under.
const PREFIX: &str = "ps/";
/// The member whose data dir is on the lazy filesystem; always restarted behind the others.
const FOLLOWER: usize = 2;
/// Entries between snapshots (each followed by a log purge that keeps as many entries), and
/// a WAL segment size that makes purges delete segments.
const ARGS: [&str; 2] = ["--snapshot-count=20", "--wal-segment-bytes=4096"];
/// While the follower is down, puts are made in steps of this many until the leader has
/// purged its log past the follower's end...
const BEHIND_STEP: usize = 20;
/// ...and at most this many in all.
const MAX_BEHIND: usize = 5000;
/// Concurrent writers on the leader while the follower is down...
const WRITERS: usize = 4;
/// ...and while it restarts.
const LOAD_WRITERS: usize = 2;
/// Large values written once at the start, so a snapshot is 1.5 MiB: txns, puts per txn
/// and bytes per value.
const FILL: (usize, usize, usize) = (6, 16, 16 << 10);
/// How long a follower may take to serve, catch up or receive a snapshot.
const LIMIT: Duration = Duration::from_secs(30);
/// What the follower logs once a snapshot from the leader is installed.
const INSTALLED: &str = "installed a snapshot from the leader";
/// What a member logs once it serves clients.
const READY: &str = "ready to serve client requests";
/// The follower's log filter: keel's default, and openraft's account of the state it
/// starts from.
const FOLLOWER_LOG: &str = "info,openraft=warn,openraft::storage::helper=info";
/// What openraft logs at start when the backend is ahead of the log: a snapshot was
/// installed, and the power cut before the log purge after it was durable.
const AHEAD: &str = "Clean the hole between last_log_id";

/// Where in the follower's restart the power is cut.
#[derive(Clone, Copy, Debug)]
enum CutAt {
    /// This long after the process starts.
    Started(Duration),
    /// This long after the incoming snapshot file appears.
    Receiving(Duration),
    /// As soon as the incoming snapshot file, once seen, is gone.
    Renamed,
    /// As soon as the follower answers a read from the snapshot (at or above the revision
    /// acknowledged before its start, which it can only reach that way).
    Answered,
    /// As soon as the install is logged.
    Installed,
}

impl CutAt {
    /// A random cut point.
    fn pick(rng: &mut Rng) -> CutAt {
        match rng.below(9) {
            0 | 1 => CutAt::Started(Duration::from_millis(rng.below(800))),
            2..=4 => CutAt::Receiving(Duration::from_millis(rng.below(60))),
            5 => CutAt::Renamed,
            6 | 7 => CutAt::Answered,
            _ => CutAt::Installed,
        }
    }
}

/// What the watcher saw of the follower's install up to the cut.
#[derive(Debug, Default)]
struct Seen {
    /// The follower logged that it serves clients.
    ready: bool,
    /// How long after the start an incoming snapshot file was first seen.
    incoming_at: Option<Duration>,
    /// The size of the incoming snapshot file at the last look, if there was one.
    incoming_bytes: Option<u64>,
    /// The follower logged the install.
    installed: bool,
    /// The follower answered a read from the snapshot.
    answered: bool,
    /// From the start of the process to the cut.
    elapsed: Duration,
}

/// Where a cut landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Landed {
    /// Before the follower served clients, no snapshot file seen.
    Starting,
    /// Serving, no snapshot file seen yet.
    Waiting,
    /// While the incoming snapshot file was being written (its size at the last look).
    Receiving(u64),
    /// After the file was gone (renamed over the backend), before the install was logged.
    Renamed,
    /// After the follower answered a read from the snapshot, before the install was logged.
    Answered,
    /// After the install was logged.
    Installed,
}

impl Seen {
    /// Where the cut landed, given everything the follower logged before it was killed: an
    /// install it never logged was cut short.
    fn landed(&self, log: &str) -> Landed {
        if log.contains(INSTALLED) {
            Landed::Installed
        } else if self.answered {
            Landed::Answered
        } else if let Some(bytes) = self.incoming_bytes {
            Landed::Receiving(bytes)
        } else if self.incoming_at.is_some() {
            Landed::Renamed
        } else if self.ready {
            Landed::Waiting
        } else {
            Landed::Starting
        }
    }
}

/// The size of an incoming snapshot file in `snap`, if there is one.
fn incoming_snapshot(snap: &Path) -> Option<u64> {
    std::fs::read_dir(snap).ok()?.find_map(|e| {
        let e = e.ok()?;
        let name = e.file_name();
        name.to_string_lossy()
            .starts_with("db.incoming.")
            .then(|| e.metadata().map_or(0, |m| m.len()))
    })
}

/// Watches the restarted `follower` (its snapshot folder and its log, every millisecond,
/// and its `answers` more often) and cuts the power of `disk` at `at`, or after [`LIMIT`]
/// if it never gets there. Blocks.
fn cut_at(disk: &Disk, follower: &Server, at: CutAt, answers: &Answers) -> Seen {
    let started = Instant::now();
    let snap = follower.data_dir.join("member").join("snap");
    let mut seen = Seen::default();
    for look in 0u64.. {
        if look % 5 == 0 {
            let log = follower.log();
            seen.ready = log.contains(READY);
            seen.installed = log.contains(INSTALLED);
            seen.incoming_bytes = incoming_snapshot(&snap);
            if seen.incoming_bytes.is_some() && seen.incoming_at.is_none() {
                seen.incoming_at = Some(started.elapsed());
            }
        }
        seen.answered = answers.saw_snapshot();
        let due = match at {
            CutAt::Started(delay) => started.elapsed() >= delay,
            CutAt::Receiving(delay) => {
                seen.installed
                    || seen
                        .incoming_at
                        .is_some_and(|t| started.elapsed() >= t + delay)
            }
            CutAt::Renamed => {
                seen.installed || (seen.incoming_at.is_some() && seen.incoming_bytes.is_none())
            }
            CutAt::Answered => seen.installed || seen.answered,
            CutAt::Installed => seen.installed,
        };
        if due || started.elapsed() > LIMIT {
            answers.cutting.store(true, Ordering::SeqCst);
            disk.cut();
            seen.elapsed = started.elapsed();
            return seen;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    unreachable!()
}

/// The revision a serializable read answers with (of one key that is never written).
async fn answered_revision(kv: &mut KvClient<Channel>) -> Result<i64, tonic::Status> {
    let resp = kv
        .range(RangeRequest {
            key: PREFIX.as_bytes().to_vec(),
            serializable: true,
            ..Default::default()
        })
        .await?;
    Ok(resp.into_inner().header.expect("range header").revision)
}

/// Serializable reads on the follower every millisecond while it runs, keeping the highest
/// revision answered before the power cut.
struct Answers {
    /// Set just before the cut: answers received later do not count.
    cutting: Arc<AtomicBool>,
    highest: Arc<AtomicI64>,
    /// An answer at this revision or above comes from a snapshot.
    snapshot_revision: i64,
    task: tokio::task::JoinHandle<()>,
}

impl Answers {
    /// Starts reading on `follower` (which may not be up yet), which can reach
    /// `snapshot_revision` only from a snapshot.
    fn start(follower: &Server, snapshot_revision: i64) -> Answers {
        let channel = Channel::from_shared(follower.client_url.clone())
            .expect("valid uri")
            .connect_timeout(Duration::from_millis(200))
            .timeout(Duration::from_secs(2))
            .connect_lazy();
        let cutting = Arc::new(AtomicBool::new(false));
        let highest = Arc::new(AtomicI64::new(0));
        let (cut, high) = (cutting.clone(), highest.clone());
        let task = tokio::spawn(async move {
            let mut kv = KvClient::new(channel);
            loop {
                if let Ok(rev) = answered_revision(&mut kv).await
                    && !cut.load(Ordering::SeqCst)
                {
                    high.fetch_max(rev, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        Answers {
            cutting,
            highest,
            snapshot_revision,
            task,
        }
    }

    /// Whether the follower answered a read from the snapshot.
    fn saw_snapshot(&self) -> bool {
        self.highest.load(Ordering::SeqCst) >= self.snapshot_revision
    }

    /// Stops reading (the follower must be gone); the highest revision answered before the cut.
    async fn stop(self) -> i64 {
        self.task.abort();
        let _ = self.task.await;
        self.highest.load(Ordering::SeqCst)
    }
}

/// The index of the last entry in `member`'s log (Status `raft_index`).
async fn last_log_index(member: &Server) -> u64 {
    MaintenanceClient::new(member.channel().await)
        .status(StatusRequest {})
        .await
        .expect("Status")
        .into_inner()
        .raft_index
}

/// Whether `leader` has purged its log past the entry after index `end`, so a member whose
/// log ends at `end` can only catch up from a snapshot: its oldest WAL segment (named
/// `<seq>-<first WAL index>.wal`, WAL index = Raft index + 1) starts after that entry, and
/// the in-memory log is purged before the segments are deleted.
fn purged_past(leader: &Server, end: u64) -> bool {
    let wal = leader.data_dir.join("member").join("wal");
    let first = std::fs::read_dir(&wal)
        .unwrap_or_else(|e| panic!("read {}: {e}", wal.display()))
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let (_, first) = name.strip_suffix(".wal")?.split_once('-')?;
            u64::from_str_radix(first, 16).ok()
        })
        .min();
    first.is_some_and(|first| first > end + 2)
}

/// Writes [`FILL`] large values through `leader`; the acknowledged puts.
async fn fill(leader: &Server) -> Acked {
    let (txns, per_txn, bytes) = FILL;
    let mut kv = KvClient::new(leader.channel().await);
    let mut acked = Acked::new();
    for t in 0..txns {
        let puts: Vec<(String, String)> = (0..per_txn)
            .map(|i| {
                let n = t * per_txn + i;
                let value = format!("{n:08}{}", "f".repeat(bytes - 8));
                (format!("{PREFIX}fill/{n:08}"), value)
            })
            .collect();
        let success = puts
            .iter()
            .map(|(key, value)| RequestOp {
                request: Some(request_op::Request::RequestPut(PutRequest {
                    key: key.clone().into_bytes(),
                    value: value.clone().into_bytes(),
                    ..Default::default()
                })),
            })
            .collect();
        let txn = TxnRequest {
            success,
            ..Default::default()
        };
        let rev = kv
            .txn(txn)
            .await
            .expect("fill txn")
            .into_inner()
            .header
            .expect("txn header")
            .revision;
        acked.extend(puts.into_iter().map(|(k, v)| (k, (v, rev))));
    }
    acked
}

/// Waits until a serializable read on `follower` answers at `revision` or above.
async fn caught_up(follower: &mut Server, revision: i64, context: &str) {
    let mut kv = KvClient::new(follower.channel().await);
    let deadline = Instant::now() + LIMIT;
    loop {
        let now = answered_revision(&mut kv).await;
        if now.as_ref().is_ok_and(|r| *r >= revision) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{context}: the follower did not catch up to revision {revision} within {LIMIT:?} \
             ({now:?}; {})",
            follower.process_state()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_power_cuts_during_snapshot_install() {
    if target_flavor() == Flavor::Etcd {
        return keel_testkit::not_applicable(
            "power_loss_snapshot",
            "etcd 3.5 catches a slow follower up from its log, not a snapshot",
        );
    }
    let test = "power_loss_snapshot";
    let Some((mut disk, cuts, guard)) = power_test(test, "KEEL_SNAPSHOT_CUTS", 24) else {
        return;
    };
    let seed = guard.seed;
    let mut rng = Rng::new(seed);
    let mut cluster = Cluster::unstarted(Flavor::Keel, 3, &ARGS);
    cluster.members[FOLLOWER].data_dir = disk.mnt.join("data");
    cluster.members[FOLLOWER].set_env("RUST_LOG", FOLLOWER_LOG);
    cluster.spawn_all();
    let started = Instant::now();
    let leader = agreed_leader(&cluster, &[0, 1, 2], LIMIT).await;
    let mut all = fill(&cluster.members[leader]).await;
    // The highest revision the follower answered.
    let mut answered = 0;
    let mut landed = Vec::new();
    for round in 0..cuts {
        let context = format!("cut {round} (KEEL_TEST_SEED={seed})");
        let round_started = Instant::now();
        let end = last_log_index(&cluster.members[FOLLOWER]).await;
        cluster.members[FOLLOWER].kill();
        let leader = agreed_leader(&cluster, &[0, 1], LIMIT).await;
        let writers = Writers::start(&cluster.members[leader], PREFIX, 2 * round, WRITERS).await;
        let mut behind = 0;
        while !purged_past(&cluster.members[leader], end) {
            assert!(
                behind < MAX_BEHIND,
                "{context}: {behind} puts and the leader kept its log after index {end}"
            );
            behind += BEHIND_STEP;
            writers.wait_acked(behind).await;
        }
        all.extend(writers.stop().await);

        let writers = Writers::start(
            &cluster.members[leader],
            PREFIX,
            2 * round + 1,
            LOAD_WRITERS,
        )
        .await;
        let at = CutAt::pick(&mut rng);
        let before = all.values().map(|(_, r)| *r).max().expect("acked writes");
        let answers = Answers::start(&cluster.members[FOLLOWER], before);
        cluster.members[FOLLOWER].respawn();
        let seen =
            tokio::task::block_in_place(|| cut_at(&disk, &cluster.members[FOLLOWER], at, &answers));
        cluster.members[FOLLOWER].kill();
        answered = answered.max(answers.stop().await);
        let here = seen.landed(&cluster.members[FOLLOWER].log());
        all.extend(writers.stop().await);
        disk.remount();

        let follower = &mut cluster.members[FOLLOWER];
        follower.restart();
        let ahead = follower.log().contains(AHEAD);
        let first = answered_revision(&mut KvClient::new(follower.channel().await))
            .await
            .unwrap_or_else(|e| panic!("{context}: serializable read after restart: {e:?}"));
        assert!(
            first >= answered,
            "{context}: the follower answered revision {answered} before the cut ({at:?}, \
             landed {here:?}) and {first} after the restart"
        );
        let acked_rev = all.values().map(|(_, r)| *r).max().expect("acked writes");
        caught_up(follower, acked_rev, &context).await;
        let min_rev = acked_rev.max(answered);
        answered = verify_read(follower, PREFIX, &all, min_rev, true, &context).await;
        eprintln!(
            "{test}: cut {round} at {at:?}, {:?} after the start{}: landed \
             {here:?}; restarted {}; {} acknowledged writes kept, revision {answered}; \
             {:.1?} in all",
            seen.elapsed,
            seen.incoming_at.map_or(String::new(), |t| format!(
                ", {:?} after the snapshot file appeared",
                seen.elapsed - t
            )),
            if ahead {
                "with the installed backend ahead of its log"
            } else {
                "from its backend and log"
            },
            all.len(),
            round_started.elapsed(),
        );
        landed.push((here, ahead));
    }
    let count = |f: fn(&Landed) -> bool| landed.iter().filter(|(l, _)| f(l)).count();
    let ahead = landed.iter().filter(|(_, ahead)| *ahead).count();
    let during = count(|l| matches!(l, Landed::Receiving(_) | Landed::Renamed | Landed::Answered));
    eprintln!(
        "{test}: {cuts} cuts in {:.1?}: {during} during a snapshot install ({} receiving, {} \
         renamed, {} answered), {} after one, {} waiting, {} starting; {ahead} restarts found \
         an installed backend ahead of the log; {} acknowledged writes kept, revision \
         {answered}",
        started.elapsed(),
        count(|l| matches!(l, Landed::Receiving(_))),
        count(|l| *l == Landed::Renamed),
        count(|l| *l == Landed::Answered),
        count(|l| *l == Landed::Installed),
        count(|l| *l == Landed::Waiting),
        count(|l| *l == Landed::Starting),
        all.len(),
    );
    assert!(
        cuts < 8 || during > 0,
        "no cut landed during a snapshot install: {landed:?}"
    );
    std::mem::forget(guard);
}
