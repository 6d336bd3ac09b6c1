//! The Lease axis: the lessor, etcd's leases with a remaining TTL that survives restarts.
//!
//! # Replicated and leader-local state
//!
//! Grants, revokes, expiries and checkpoints are [`LeaseOp`]s that go through the log and are
//! applied in log order by the state machine, so every member holds the same leases: their id,
//! granted TTL, the keys attached to them and their *persisted remaining TTL* (the value of the
//! lease's last checkpoint). Each lease is one record `lease/<id>` beside the key space,
//! written in the same backend transaction as the entry that changed it. The keys attached to
//! each lease are not persisted: they are rebuilt at start from the key space (every live key
//! carries its lease, as in etcd) and kept up to date from the events of every applied write.
//!
//! Deadlines are leader-local, as in etcd: the leader ([`Lessor::promote`]) gives every lease
//! a deadline of `now + persisted remaining TTL`, keepalives ([`Lessor::renew`]) move a
//! deadline to `now + TTL` without touching the log (they must be fast; a follower forwards
//! them, and TimeToLive, to the leader: [`forward`]), and the leader alone decides which
//! leases expired ([`Lessor::expired`]) and proposes their revocation ([`LeaseOp::Expire`]),
//! at most [`REVOKE_RATE`] a second like etcd.
//!
//! # Remaining TTL across restarts: the exact rule
//!
//! The leader runs a checkpoint pass every [`CHECKPOINT_INTERVAL`] (1 s; in practice every 1 to
//! 1.25 s, the loop ticking every 250 ms). Each pass proposes one [`LeaseOp::Checkpoint`]
//! carrying the current remaining TTL (in milliseconds) of every lease that is *due*, at most
//! [`MAX_CHECKPOINT_BATCH`] (10,000) leases per pass, the oldest checkpoint first
//! ([`Lessor::checkpoints`]); a pass with nothing due proposes nothing. A grant is a lease's
//! first checkpoint (remaining = granted TTL). A lease is due when
//!
//! - it was renewed since its last checkpoint (its remaining TTL went up: a restart must not
//!   take the renewal back), or
//! - its last checkpoint overstates its remaining TTL by its *allowance* or more: the time
//!   since that checkpoint has reached a tenth of its granted TTL, at least 1 s and at most
//!   [`MAX_CHECKPOINT_ALLOWANCE`] (60 s) ([`checkpoint_allowance`]).
//!
//! An idle lease is thus written once per allowance, not once a second (50,000 idle one-hour
//! leases: one record each per minute), and a lease nobody touches is never rewritten
//! with the same value. etcd checkpoints only leases whose remaining TTL changed, every 5
//! minutes by default (`checkpointInterval`, at most `leaseCheckpointRate` 1000 a second).
//!
//! After a restart (or on a new leader) a lease's deadline is `now + the remaining TTL of its
//! last applied checkpoint`. That checkpoint was taken at most one allowance (plus one pass,
//! about 1.25 s, and the time to commit it) before the stop; with more than 10,000 leases due
//! at once, up to `ceil(due / 10,000)` passes later. So a lease resumes with at least the
//! remaining TTL it had at the stop, never less (a lease kept alive does not expire early
//! because of a restart), and at most its allowance plus ~1.25 s more: a 10 s lease at most
//! ~2.25 s more, a 60 s lease ~7.25 s, a lease of 10 minutes or longer ~61.25 s. It never gets
//! its full granted TTL back unless it was granted or renewed within that last pass. Time
//! during which no leader runs is not counted. etcd instead resets every lease to its full TTL
//! on leader change unless its alpha `LeaseCheckpoint` feature is on (etcd-io/etcd#9888,
//! #13294).
//!
//! The [`Lessor`] is a plain struct driven by `(input, now)`, every `now` read from the
//! member's [`LeaseClock`] ([`clock`]); the async shell that runs the expiry and checkpoint
//! loop is [`task`], the gRPC service is `api::lease`.

pub mod clock;
pub mod forward;
pub mod task;

pub use clock::LeaseClock;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use crate::error::EtcdError;

/// etcd's largest lease TTL in seconds (`MaxLeaseTTL`).
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;
/// How many expired leases the leader revokes per second at most (etcd's `leaseRevokeRate`).
pub const REVOKE_RATE: usize = 1000;
/// How often the leader checkpoints remaining TTLs.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// The most a lease's last checkpoint may overstate its remaining TTL before it is
/// checkpointed again (see [`checkpoint_allowance`]).
pub const MAX_CHECKPOINT_ALLOWANCE: Duration = Duration::from_secs(60);
/// The most leases one checkpoint proposal carries.
pub const MAX_CHECKPOINT_BATCH: usize = 10_000;
/// How long the leader waits before proposing the revocation of an expired lease again when
/// the first proposal did not remove it (etcd's `expiredLeaseRetryInterval`).
pub const EXPIRED_RETRY: Duration = Duration::from_secs(3);
/// Prefix of the backend metadata records holding one lease each.
pub const META_PREFIX: &str = "lease/";

/// etcd's minimum lease TTL in seconds: `ceil(((3 * electionTicks) / 2) * heartbeat)`, with
/// `electionTicks = election timeout / heartbeat` (2 s with the default 100 ms / 1000 ms).
pub fn min_lease_ttl(heartbeat_ms: u64, election_timeout_ms: u64) -> i64 {
    let heartbeat = heartbeat_ms.max(1);
    let ticks = election_timeout_ms / heartbeat;
    let min_ms = (3 * ticks) / 2 * heartbeat;
    min_ms.div_ceil(1000) as i64
}

/// How much the last checkpoint of an idle lease of `ttl` seconds may overstate its remaining
/// TTL before the lease is checkpointed again: a tenth of the TTL, within
/// [`CHECKPOINT_INTERVAL`] and [`MAX_CHECKPOINT_ALLOWANCE`].
pub fn checkpoint_allowance(ttl: i64) -> Duration {
    (Duration::from_secs(ttl.max(0) as u64) / 10)
        .clamp(CHECKPOINT_INTERVAL, MAX_CHECKPOINT_ALLOWANCE)
}

/// The name of the metadata record of lease `id`.
pub fn meta_name(id: i64) -> String {
    format!("{META_PREFIX}{:016x}", id as u64)
}

/// One replicated change to the leases: the payload of `ProposalOp::Lease`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseProposal {
    /// The change.
    #[prost(oneof = "LeaseOp", tags = "1, 2, 3, 4")]
    pub op: Option<LeaseOp>,
}

/// The lease changes that go through the log.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum LeaseOp {
    /// A grant; the ID was chosen (by the client or the leader) before proposing.
    #[prost(message, tag = "1")]
    Grant(keel_proto::etcdserverpb::LeaseGrantRequest),
    /// A client's revoke.
    #[prost(message, tag = "2")]
    Revoke(keel_proto::etcdserverpb::LeaseRevokeRequest),
    /// The leader's revocation of leases it found expired (each in its own revision).
    #[prost(message, tag = "3")]
    Expire(LeaseExpire),
    /// The leader's checkpoint of remaining TTLs.
    #[prost(message, tag = "4")]
    Checkpoint(LeaseCheckpoints),
}

/// Leases the leader found expired.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseExpire {
    /// Their IDs.
    #[prost(int64, repeated, tag = "1")]
    pub ids: Vec<i64>,
}

/// A batch of remaining TTLs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseCheckpoints {
    /// One per lease.
    #[prost(message, repeated, tag = "1")]
    pub checkpoints: Vec<LeaseRecord>,
}

/// The persisted state of one lease (also one checkpoint entry, where `ttl` is unused).
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct LeaseRecord {
    /// The lease ID.
    #[prost(int64, tag = "1")]
    pub id: i64,
    /// The granted TTL in seconds (after etcd's minimum TTL rule).
    #[prost(int64, tag = "2")]
    pub ttl: i64,
    /// The remaining TTL in milliseconds at the last checkpoint.
    #[prost(int64, tag = "3")]
    pub remaining_ms: i64,
}

/// Why a lease operation failed; converts to etcd's wire errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// No such lease (or it expired and awaits its revocation).
    #[error("lease not found")]
    NotFound,
    /// A grant of an ID in use.
    #[error("lease already exists")]
    Exists,
    /// A TTL above [`MAX_LEASE_TTL`].
    #[error("too large lease TTL")]
    TtlTooLarge,
    /// A keepalive or TimeToLive on a member that does not keep deadlines (does not lead, or
    /// was elected a moment ago).
    #[error("not the primary lessor")]
    NotPrimary,
}

impl From<LeaseError> for EtcdError {
    fn from(e: LeaseError) -> EtcdError {
        match e {
            LeaseError::NotFound => EtcdError::LeaseNotFound,
            LeaseError::Exists => EtcdError::LeaseExists,
            LeaseError::TtlTooLarge => EtcdError::LeaseTtlTooLarge,
            LeaseError::NotPrimary => EtcdError::NoLeader,
        }
    }
}

/// One lease.
#[derive(Debug)]
struct Lease {
    ttl: i64,
    /// Remaining TTL at the last checkpoint (replicated).
    remaining: Duration,
    /// The deadline (leader only).
    deadline: Option<Instant>,
    /// When the leader took the last checkpoint (leader only).
    checkpointed: Option<Instant>,
    /// Renewed since the last checkpoint (leader only).
    renewed: bool,
    keys: BTreeSet<Vec<u8>>,
}

impl Lease {
    fn remaining_at(&self, now: Instant) -> Duration {
        match self.deadline {
            Some(d) => d.saturating_duration_since(now),
            None => self.remaining,
        }
    }

    fn record(&self, id: i64) -> LeaseRecord {
        LeaseRecord {
            id,
            ttl: self.ttl,
            remaining_ms: self.remaining.as_millis() as i64,
        }
    }
}

/// What [`Lessor::time_to_live`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseStatus {
    /// Remaining seconds, truncated as etcd does.
    pub ttl: i64,
    /// The granted TTL in seconds.
    pub granted_ttl: i64,
    /// The attached keys, sorted.
    pub keys: Vec<Vec<u8>>,
}

/// The leases of one member (see the module docs).
#[derive(Debug)]
pub struct Lessor {
    min_ttl: i64,
    leases: HashMap<i64, Lease>,
    primary: bool,
    /// Leader only: one entry per lease, `(time to look at it again, id)`; an entry earlier than
    /// the lease's deadline (a renewal moved it) is pushed back when it comes up.
    queue: BinaryHeap<Reverse<(Instant, i64)>>,
    /// The lease each attached key belongs to (etcd's `itemMap`).
    attached: HashMap<Vec<u8>, i64>,
}

impl Lessor {
    /// An empty lessor applying etcd's minimum TTL `min_ttl` (seconds).
    pub fn new(min_ttl: i64) -> Lessor {
        Lessor {
            min_ttl,
            leases: HashMap::new(),
            primary: false,
            queue: BinaryHeap::new(),
            attached: HashMap::new(),
        }
    }

    /// Rebuilds the lessor from its persisted records and the leased keys of the key space.
    pub fn restore(
        min_ttl: i64,
        records: impl IntoIterator<Item = LeaseRecord>,
        keys: impl IntoIterator<Item = (i64, Vec<u8>)>,
    ) -> Lessor {
        let mut lessor = Lessor::new(min_ttl);
        for r in records {
            lessor.leases.insert(
                r.id,
                Lease {
                    ttl: r.ttl,
                    remaining: Duration::from_millis(r.remaining_ms.max(0) as u64),
                    deadline: None,
                    checkpointed: None,
                    renewed: false,
                    keys: BTreeSet::new(),
                },
            );
        }
        for (id, key) in keys {
            lessor.attach(id, key);
        }
        lessor
    }

    /// Number of leases.
    pub fn len(&self) -> usize {
        self.leases.len()
    }

    /// True when there is no lease.
    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// True when lease `id` exists (expired leases exist until their revocation is applied).
    pub fn contains(&self, id: i64) -> bool {
        self.leases.contains_key(&id)
    }

    /// True while this member leads and keeps deadlines.
    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// Applies a grant: etcd's checks, then the minimum TTL. Returns the lease's record (to
    /// persist) whose `ttl` is the granted TTL.
    pub fn grant(&mut self, id: i64, ttl: i64, now: Instant) -> Result<LeaseRecord, LeaseError> {
        if id == 0 {
            return Err(LeaseError::NotFound);
        }
        if ttl > MAX_LEASE_TTL {
            return Err(LeaseError::TtlTooLarge);
        }
        if self.leases.contains_key(&id) {
            return Err(LeaseError::Exists);
        }
        let ttl = ttl.max(self.min_ttl);
        let remaining = Duration::from_secs(ttl as u64);
        let mut lease = Lease {
            ttl,
            remaining,
            deadline: None,
            checkpointed: None,
            renewed: false,
            keys: BTreeSet::new(),
        };
        if self.primary {
            let deadline = now + remaining;
            lease.deadline = Some(deadline);
            lease.checkpointed = Some(now);
            self.queue.push(Reverse((deadline, id)));
        }
        let record = lease.record(id);
        self.leases.insert(id, lease);
        Ok(record)
    }

    /// Applies a revoke (a client's or an expiry): removes the lease and returns its keys,
    /// sorted, for the caller to delete in one revision.
    pub fn revoke(&mut self, id: i64) -> Result<Vec<Vec<u8>>, LeaseError> {
        let lease = self.leases.remove(&id).ok_or(LeaseError::NotFound)?;
        for key in &lease.keys {
            self.attached.remove(key);
        }
        Ok(lease.keys.into_iter().collect())
    }

    /// Applies a checkpoint entry: the lease's persisted remaining TTL becomes `remaining_ms`.
    /// Returns the record to persist, or `None` when the lease is gone. Deadlines are not
    /// touched: on the leader they are already the truth.
    pub fn checkpoint(&mut self, id: i64, remaining_ms: i64) -> Option<LeaseRecord> {
        let lease = self.leases.get_mut(&id)?;
        lease.remaining = Duration::from_millis(remaining_ms.max(0) as u64);
        Some(lease.record(id))
    }

    /// Attaches `key` to lease `id` (a put with that lease was applied).
    pub fn attach(&mut self, id: i64, key: Vec<u8>) {
        if let Some(lease) = self.leases.get_mut(&id) {
            lease.keys.insert(key.clone());
            self.attached.insert(key, id);
        }
    }

    /// Detaches `key` from lease `id` (the key was deleted or put with another lease).
    pub fn detach(&mut self, id: i64, key: &[u8]) {
        if let Some(lease) = self.leases.get_mut(&id) {
            lease.keys.remove(key);
        }
        if self.attached.get(key) == Some(&id) {
            self.attached.remove(key);
        }
    }

    /// The lease `key` is attached to, 0 for none.
    pub fn lease_of(&self, key: &[u8]) -> i64 {
        self.attached.get(key).copied().unwrap_or(0)
    }

    /// Makes this member the one that keeps deadlines: every lease gets `now + its persisted
    /// remaining TTL` (never its full TTL back). Does nothing when already primary.
    pub fn promote(&mut self, now: Instant) {
        if self.primary {
            return;
        }
        self.primary = true;
        self.queue.clear();
        for (&id, lease) in &mut self.leases {
            let deadline = now + lease.remaining;
            lease.deadline = Some(deadline);
            lease.checkpointed = Some(now);
            lease.renewed = false;
            self.queue.push(Reverse((deadline, id)));
        }
    }

    /// Stops keeping deadlines (this member no longer leads).
    pub fn demote(&mut self) {
        self.primary = false;
        self.queue.clear();
        for lease in self.leases.values_mut() {
            lease.deadline = None;
            lease.checkpointed = None;
        }
    }

    /// A keepalive: the lease's deadline becomes `now + TTL`; returns the TTL. An expired
    /// lease awaiting its revocation is not found, as in etcd.
    pub fn renew(&mut self, id: i64, now: Instant) -> Result<i64, LeaseError> {
        if !self.primary {
            return Err(LeaseError::NotPrimary);
        }
        let lease = self.leases.get_mut(&id).ok_or(LeaseError::NotFound)?;
        if lease.deadline.is_some_and(|d| d <= now) {
            return Err(LeaseError::NotFound);
        }
        lease.deadline = Some(now + Duration::from_secs(lease.ttl as u64));
        lease.renewed = true;
        Ok(lease.ttl)
    }

    /// Leader only: the remaining and granted TTL of lease `id`, and its keys (a member that
    /// does not keep deadlines knows only the last checkpoint, not the remaining TTL).
    pub fn time_to_live(&self, id: i64, now: Instant) -> Result<LeaseStatus, LeaseError> {
        if !self.primary {
            return Err(LeaseError::NotPrimary);
        }
        let lease = self.leases.get(&id).ok_or(LeaseError::NotFound)?;
        let ttl = match lease.deadline {
            // etcd: int64(time.Until(expiry).Seconds()), truncated towards zero.
            Some(d) if d >= now => (d - now).as_secs() as i64,
            Some(d) => -((now - d).as_secs() as i64),
            None => lease.remaining.as_secs() as i64,
        };
        Ok(LeaseStatus {
            ttl,
            granted_ttl: lease.ttl,
            keys: lease.keys.iter().cloned().collect(),
        })
    }

    /// Every lease ID, soonest deadline first (etcd's order), then by ID.
    pub fn ids(&self) -> Vec<i64> {
        let mut ids: Vec<(Option<Instant>, i64)> = self
            .leases
            .iter()
            .map(|(&id, l)| (l.deadline, id))
            .collect();
        ids.sort_unstable();
        ids.into_iter().map(|(_, id)| id).collect()
    }

    /// Leader only: the deadline of up to `count` leases, taken at random, becomes `now`, as
    /// in a mass expiry (the `lease.expire.storm` fault); the expiry task then revokes them
    /// at its usual pace. Returns how many.
    pub fn expire_now(&mut self, count: usize, now: Instant) -> usize {
        if !self.primary {
            return 0;
        }
        // A HashMap's order is random per process: the first `count` are a random pick.
        let ids: Vec<i64> = self
            .leases
            .iter()
            .filter(|(_, l)| l.deadline.is_some_and(|d| d > now))
            .map(|(&id, _)| id)
            .take(count)
            .collect();
        for &id in &ids {
            if let Some(lease) = self.leases.get_mut(&id) {
                lease.deadline = Some(now);
                self.queue.push(Reverse((now, id)));
            }
        }
        ids.len()
    }

    /// Leader only: up to `limit` leases whose deadline passed, to propose their revocation.
    /// Each one returned is looked at again only after [`EXPIRED_RETRY`], in case the
    /// proposal is lost.
    pub fn expired(&mut self, now: Instant, limit: usize) -> Vec<i64> {
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(&Reverse((at, id))) = self.queue.peek() else {
                break;
            };
            if at > now {
                break;
            }
            self.queue.pop();
            let Some(lease) = self.leases.get(&id) else {
                continue;
            };
            match lease.deadline {
                Some(deadline) if deadline > now => self.queue.push(Reverse((deadline, id))),
                Some(_) => {
                    out.push(id);
                    self.queue.push(Reverse((now + EXPIRED_RETRY, id)));
                }
                None => {}
            }
        }
        out
    }

    /// Leader only: the checkpoint pass at `now` (see the module docs): every live lease
    /// renewed since its last checkpoint or checkpointed at least its allowance ago, at most
    /// `limit`, oldest checkpoint first; marks them checkpointed.
    pub fn checkpoints(&mut self, now: Instant, limit: usize) -> Vec<LeaseRecord> {
        if !self.primary {
            return Vec::new();
        }
        let mut due: Vec<(Instant, i64)> = self
            .leases
            .iter()
            .filter_map(|(&id, l)| {
                let deadline = l.deadline?;
                let last = l.checkpointed.unwrap_or(now);
                let stale = now.saturating_duration_since(last) >= checkpoint_allowance(l.ttl);
                (deadline > now && (l.renewed || stale)).then_some((last, id))
            })
            .collect();
        if due.len() > limit {
            due.select_nth_unstable(limit);
            due.truncate(limit);
        }
        due.sort_unstable();
        due.into_iter()
            .filter_map(|(_, id)| {
                let lease = self.leases.get_mut(&id)?;
                lease.checkpointed = Some(now);
                lease.renewed = false;
                Some(LeaseRecord {
                    id,
                    ttl: lease.ttl,
                    remaining_ms: lease.remaining_at(now).as_millis() as i64,
                })
            })
            .collect()
    }

    /// Leader only: marks leases whose checkpoint proposal failed as due again.
    pub fn checkpoint_failed(&mut self, ids: impl IntoIterator<Item = i64>) {
        for id in ids {
            if let Some(lease) = self.leases.get_mut(&id) {
                lease.renewed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn min_ttl_as_etcd() {
        assert_eq!(min_lease_ttl(100, 1000), 2);
        assert_eq!(min_lease_ttl(100, 500), 1);
        assert_eq!(min_lease_ttl(50, 1000), 2);
        assert_eq!(min_lease_ttl(100, 3000), 5);
    }

    #[test]
    fn grant_checks_as_etcd() {
        let now = Instant::now();
        let mut l = Lessor::new(2);
        assert_eq!(l.grant(0, 10, now), Err(LeaseError::NotFound));
        assert_eq!(
            l.grant(1, MAX_LEASE_TTL + 1, now),
            Err(LeaseError::TtlTooLarge)
        );
        assert_eq!(l.grant(1, 1, now).unwrap().ttl, 2);
        assert_eq!(l.grant(1, 10, now), Err(LeaseError::Exists));
        assert_eq!(l.grant(2, MAX_LEASE_TTL, now).unwrap().ttl, MAX_LEASE_TTL);
        assert_eq!(l.grant(-5, 0, now).unwrap().ttl, 2);
        assert_eq!(l.revoke(7), Err(LeaseError::NotFound));
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn a_storm_expires_that_many_leases_now() {
        let t0 = Instant::now();
        let mut l = Lessor::new(5);
        for id in 1..=10 {
            l.grant(id, 60, t0).unwrap();
        }
        assert_eq!(l.expire_now(4, t0), 0, "only the leader keeps deadlines");
        l.promote(t0);
        let now = t0 + secs(1);
        assert_eq!(l.expire_now(4, now), 4);
        assert_eq!(l.expired(now, 100).len(), 4);
        // Those already expiring are not picked again.
        assert_eq!(l.expire_now(100, now), 6);
    }

    #[test]
    fn keys_attach_detach_and_revoke_sorted() {
        let now = Instant::now();
        let mut l = Lessor::new(2);
        l.grant(1, 10, now).unwrap();
        l.attach(1, b"b".to_vec());
        l.attach(1, b"a".to_vec());
        l.attach(1, b"c".to_vec());
        l.attach(9, b"x".to_vec());
        l.detach(1, b"c");
        assert_eq!(l.time_to_live(1, now), Err(LeaseError::NotPrimary));
        l.promote(now);
        let st = l.time_to_live(1, now).unwrap();
        assert_eq!(st.keys, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(l.revoke(1).unwrap(), vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(!l.contains(1));
    }

    #[test]
    fn keepalive_and_expiry_on_the_leader() {
        let t0 = Instant::now();
        let mut l = Lessor::new(2);
        l.grant(1, 10, t0).unwrap();
        assert_eq!(l.renew(1, t0), Err(LeaseError::NotPrimary));
        l.promote(t0);
        l.grant(2, 5, t0).unwrap();
        assert_eq!(l.time_to_live(1, t0 + secs(3)).unwrap().ttl, 7);
        assert!(l.expired(t0 + secs(4), 10).is_empty());
        assert_eq!(l.renew(2, t0 + secs(4)), Ok(5));
        // 2 was renewed at 4 s: its old queue entry at 5 s is pushed back to 9 s.
        assert!(l.expired(t0 + secs(6), 10).is_empty());
        assert_eq!(l.expired(t0 + secs(10), 10), vec![2, 1]);
        // An expired lease cannot be kept alive, and is proposed again only after the retry.
        assert_eq!(l.renew(1, t0 + secs(10)), Err(LeaseError::NotFound));
        assert!(l.expired(t0 + secs(11), 10).is_empty());
        assert_eq!(l.expired(t0 + secs(13), 10), vec![1, 2]);
        assert_eq!(l.renew(3, t0), Err(LeaseError::NotFound));
        assert_eq!(l.time_to_live(1, t0 + secs(12)).unwrap().ttl, -2);
        l.revoke(1).unwrap();
        assert_eq!(l.expired(t0 + secs(20), 10), vec![2]);
    }

    #[test]
    fn expiry_is_rate_limited() {
        let t0 = Instant::now();
        let mut l = Lessor::new(1);
        l.promote(t0);
        for id in 1..=10 {
            l.grant(id, 1, t0).unwrap();
        }
        let first = l.expired(t0 + secs(2), 4);
        assert_eq!(first.len(), 4);
        let rest = l.expired(t0 + secs(2), 100);
        assert_eq!(rest.len(), 6);
        assert!(first.iter().all(|id| !rest.contains(id)));
    }

    #[test]
    fn checkpoints_keep_remaining_ttl_across_restarts() {
        let t0 = Instant::now();
        let mut l = Lessor::new(2);
        l.promote(t0);
        l.grant(1, 100, t0).unwrap();
        l.grant(2, 100, t0).unwrap();
        let ms = Duration::from_millis;
        // Granted at this very instant, or idle within its allowance (10 s): nothing to write.
        assert_eq!(checkpoint_allowance(100), secs(10));
        assert!(l.checkpoints(t0, 10).is_empty());
        assert!(l.checkpoints(t0 + ms(500), 10).is_empty());
        let rec = |id, remaining_ms| LeaseRecord {
            id,
            ttl: 100,
            remaining_ms,
        };
        // A renewal makes a lease due at the next pass, even within the same instant.
        l.renew(2, t0 + ms(600)).unwrap();
        assert_eq!(l.checkpoints(t0 + ms(700), 10), vec![rec(2, 99_900)]);
        assert!(l.checkpoints(t0 + ms(700), 10).is_empty());
        l.renew(2, t0 + ms(700)).unwrap();
        assert_eq!(l.checkpoints(t0 + ms(700), 10), vec![rec(2, 100_000)]);
        // An idle lease once its checkpoint is off by its allowance.
        assert!(l.checkpoints(t0 + ms(9_900), 10).is_empty());
        assert_eq!(l.checkpoints(t0 + secs(10), 10), vec![rec(1, 90_000)]);
        // Every due lease at a pass, oldest checkpoint first.
        l.renew(2, t0 + secs(1)).unwrap();
        let cp = l.checkpoints(t0 + secs(40), 10);
        assert_eq!(cp, vec![rec(2, 61_000), rec(1, 60_000)]);
        // Applying the checkpoints through the log, then restarting from the records.
        let mut records = Vec::new();
        for c in &cp {
            records.push(l.checkpoint(c.id, c.remaining_ms).unwrap());
        }
        let mut r = Lessor::restore(2, records, [(1, b"k".to_vec())]);
        assert_eq!(r.time_to_live(1, t0), Err(LeaseError::NotPrimary));
        let t1 = t0 + secs(1000);
        r.promote(t1);
        let st = r.time_to_live(1, t1).unwrap();
        assert_eq!((st.ttl, st.granted_ttl), (60, 100));
        assert_eq!(st.keys, vec![b"k".to_vec()]);
        assert_eq!(r.time_to_live(2, t1).unwrap().ttl, 61);
        assert!(r.expired(t1 + secs(59), 10).is_empty());
        assert_eq!(r.expired(t1 + secs(60), 10), vec![1]);
        assert_eq!(r.expired(t1 + secs(61), 10), vec![2]);
    }

    #[test]
    fn idle_leases_are_written_once_per_allowance_not_every_pass() {
        const LEASES: i64 = 50_000;
        const PASSES: u64 = 184;
        let t0 = Instant::now();
        let mut l = Lessor::new(2);
        l.promote(t0);
        for id in 1..=LEASES {
            // One-hour leases (allowance 60 s), and a few 10 s ones (allowance 1 s).
            let ttl = if id % 1000 == 0 { 10 } else { 3600 };
            l.grant(id, ttl, t0).unwrap();
        }
        let (mut records, mut proposals) = (0, 0);
        for pass in 1..=PASSES {
            let now = t0 + secs(pass);
            let cp = l.checkpoints(now, MAX_CHECKPOINT_BATCH);
            for c in &cp {
                // What a restart would resume with is never off by more than the allowance.
                let lease = &l.leases[&c.id];
                assert_eq!(c.remaining_ms, lease.remaining_at(now).as_millis() as i64);
                l.checkpoint(c.id, c.remaining_ms);
            }
            records += cp.len();
            proposals += usize::from(!cp.is_empty());
        }
        // The one-hour leases three times (from 60, 120 and 180 s, 10,000 a pass); the 10 s
        // ones each second until they expire at 10 s. Checkpointing every lease at every pass
        // would be 10,000 records a pass: 1.84 million.
        let hour = (LEASES - LEASES / 1000) as usize;
        assert_eq!(
            records,
            3 * hour + 9 * (LEASES / 1000) as usize,
            "{proposals} proposals"
        );
        assert!(
            proposals <= 9 + 3 * hour.div_ceil(MAX_CHECKPOINT_BATCH),
            "{proposals}"
        );
        for (id, lease) in l.leases.iter().filter(|(_, lease)| lease.ttl == 3600) {
            let behind = secs(3600) - lease.remaining;
            assert!(
                (secs(180)..=secs(PASSES)).contains(&behind),
                "lease {id}: {behind:?}"
            );
        }
    }

    #[test]
    fn checkpoint_batches_are_bounded_oldest_first() {
        let t0 = Instant::now();
        let mut l = Lessor::new(2);
        l.promote(t0);
        for id in 1..=5 {
            l.grant(id, 100, t0 + secs(id as u64)).unwrap();
        }
        let cp = l.checkpoints(t0 + secs(20), 2);
        assert_eq!(cp.iter().map(|c| c.id).collect::<Vec<_>>(), vec![1, 2]);
        let cp = l.checkpoints(t0 + secs(20), 10);
        assert_eq!(cp.iter().map(|c| c.id).collect::<Vec<_>>(), vec![3, 4, 5]);
        l.checkpoint_failed([4]);
        let cp = l.checkpoints(t0 + secs(20), 10);
        assert_eq!(cp.iter().map(|c| c.id).collect::<Vec<_>>(), vec![4]);
        l.demote();
        assert!(l.checkpoints(t0 + secs(100), 10).is_empty());
        assert_eq!(l.renew(1, t0), Err(LeaseError::NotPrimary));
    }

    #[test]
    fn records_round_trip() {
        use prost::Message;
        let p = LeaseProposal {
            op: Some(LeaseOp::Expire(LeaseExpire { ids: vec![1, -2] })),
        };
        assert_eq!(
            LeaseProposal::decode(p.encode_to_vec().as_slice()).unwrap(),
            p
        );
        assert_eq!(meta_name(-1), "lease/ffffffffffffffff");
    }
}
