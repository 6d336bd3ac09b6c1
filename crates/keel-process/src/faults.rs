//! Faults injected at run time, for diagnosis drills (`keel fault set NAME=VALUE`): a delay
//! on one path of the store or the apiserver, dropped peer messages, a storm of lease expiries.
//! All are off by default and cost one atomic load on their path while off; each is set and
//! cleared without a restart through `/debug/faults` ([`Faults::answer`]: the store's client
//! URL, loopback clients only; the apiserver, admin token), and each active one is visible in
//! `/metrics` as `keel_fault_active{name}` ([`FaultMetrics`]), so no one wonders whether a
//! fault is still on.
//!
//! A delay is at most [`MAX_DELAY`] and is slept in slices of at most [`SLICE`] that read the
//! fault again ([`Faults::sleep`], [`Faults::pause`]): clearing or lowering it ends the waits
//! in progress within a slice. A count ([`Kind::Count`]) is one-shot: it acts when set, says
//! what it did, and is off again.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

use crate::go_duration;

/// Which server a fault belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// keel store.
    Store,
    /// keel apiserver.
    Apiserver,
}

/// Where both servers serve the faults ([`Faults::answer`]).
pub const PATH: &str = "/debug/faults";

/// The most a fault's value may weigh, in bytes.
pub const BODY_LIMIT: usize = 4096;

/// The longest delay a fault may inject: a typo (`20m` for `20ms`) must not stop a path.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// The longest one sleep of a delay lasts before the delay is read again.
pub const SLICE: Duration = Duration::from_millis(100);

/// The `reason` of a 409 reply to a one-shot fault set where it does not act (a follower,
/// for `lease.expire.storm`): a note, not a failure, when another member acted.
pub const NOT_HERE: &str = "NotHere";

/// Whether `path` is [`PATH`] or a fault's path under it.
pub fn is_path(path: &str) -> bool {
    path.strip_prefix(PATH)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What a fault's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A duration, as Go writes it (`200ms`, `2s`).
    Delay,
    /// A fraction of messages, from 0 to 1.
    Fraction,
    /// A count, acted on once when set, then off again.
    Count,
}

/// A fault a server can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Every WAL fsync takes this much longer (axis: WAL).
    WalFsyncDelay,
    /// Every backend commit takes this much longer (axis: MVCC).
    BackendCommitDelay,
    /// Every Raft message to a peer waits this long first (axis: Raft).
    PeerDelay,
    /// This fraction of Raft messages to a peer is lost (axis: Raft).
    PeerDrop,
    /// Every applied batch takes this much longer (axis: MVCC, slow applies).
    ApplyDelay,
    /// Every watch stream waits this long before each send (axis: Watch).
    WatchSendStall,
    /// Every lease keep-alive is answered this much later (axis: Lease).
    LeaseKeepaliveDelay,
    /// That many random leases revoked at once on the leader, as a mass expiry (axis: Lease).
    LeaseExpireStorm,
    /// Every apiserver resource request waits this long before it is served.
    ApiserverRequestDelay,
    /// Each watch cache waits this long before it takes in each event from its store.
    ApiserverWatchcacheStall,
}

impl Fault {
    /// Every fault, in the order `keel fault list` shows them.
    pub const ALL: [Fault; 10] = [
        Fault::WalFsyncDelay,
        Fault::BackendCommitDelay,
        Fault::PeerDelay,
        Fault::PeerDrop,
        Fault::ApplyDelay,
        Fault::WatchSendStall,
        Fault::LeaseKeepaliveDelay,
        Fault::LeaseExpireStorm,
        Fault::ApiserverRequestDelay,
        Fault::ApiserverWatchcacheStall,
    ];

    /// Its name (`wal.fsync.delay`).
    pub fn name(self) -> &'static str {
        match self {
            Fault::WalFsyncDelay => "wal.fsync.delay",
            Fault::BackendCommitDelay => "backend.commit.delay",
            Fault::PeerDelay => "peer.delay",
            Fault::PeerDrop => "peer.drop",
            Fault::ApplyDelay => "apply.delay",
            Fault::WatchSendStall => "watch.send.stall",
            Fault::LeaseKeepaliveDelay => "lease.keepalive.delay",
            Fault::LeaseExpireStorm => "lease.expire.storm",
            Fault::ApiserverRequestDelay => "apiserver.request.delay",
            Fault::ApiserverWatchcacheStall => "apiserver.watchcache.stall",
        }
    }

    /// The fault named `name`.
    pub fn named(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// What its value is.
    pub fn kind(self) -> Kind {
        match self {
            Fault::PeerDrop => Kind::Fraction,
            Fault::LeaseExpireStorm => Kind::Count,
            _ => Kind::Delay,
        }
    }

    /// The server that injects it.
    pub fn component(self) -> Component {
        match self {
            Fault::ApiserverRequestDelay | Fault::ApiserverWatchcacheStall => Component::Apiserver,
            _ => Component::Store,
        }
    }

    /// It may name one peer (`VALUE@MEMBER-NAME`).
    pub fn per_peer(self) -> bool {
        matches!(self, Fault::PeerDelay | Fault::PeerDrop)
    }
}

/// Why a fault cannot be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// No fault has this name.
    #[error("no fault is named {0:?}; `keel fault list` shows them")]
    Unknown(String),
    /// The fault is another server's.
    #[error("{0} is a fault of the {1}; set it there")]
    Elsewhere(&'static str, &'static str),
    /// The value does not fit the fault.
    #[error("{0}: {1}")]
    BadValue(&'static str, String),
    /// A one-shot fault acts on another member (the leader): why not here, and where.
    #[error("{0}")]
    NotHere(String),
    /// Nothing in this process acts on the one-shot fault (its store stopped).
    #[error("{0}: nothing in this server acts on it")]
    NoAction(&'static str),
}

/// What a fault of [`Kind::Count`] did where it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It acted: what it did (`5 leases expired on m1`).
    Acted(String),
    /// It acts elsewhere: why not here, and where (`m2 is not the leader; ...`).
    NotHere(String),
}

/// A value stored as bits: nanoseconds, a fraction times 2^32, or a count.
type Bits = u64;
const OFF: Bits = u64::MAX;
const FRACTION_ONE: f64 = (1u64 << 32) as f64;

/// The faults of a process: [`process`] for the one every path reads (`keel up`'s store and
/// apiserver share it).
pub struct Faults {
    /// The components served, as bits (`1 << Component as u8`).
    components: AtomicU8,
    /// This member's name, for the faults naming a peer: a peer fault naming this member
    /// applies to all its peers, so one setting slows a member's every link.
    member: RwLock<Option<String>>,
    /// Each fault's value for all peers, in the order of [`Fault::ALL`].
    all: [AtomicU64; Fault::ALL.len()],
    /// The per-peer values of the faults naming a peer, by member name.
    peers: RwLock<HashMap<(usize, String), Bits>>,
    /// The members' names by ID, as the store last listed them.
    peer_names: RwLock<HashMap<u64, String>>,
    random: RandomState,
    draws: AtomicU64,
    /// What setting a fault of [`Kind::Count`] does, once per setting.
    actions: RwLock<Vec<(Fault, Action)>>,
}

/// What a fault of [`Kind::Count`] does when set, given its count; None once what it acts
/// on is gone (a stopped store).
pub type Action = Box<dyn Fn(u64) -> Option<Outcome> + Send + Sync>;

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("active", &self.active())
            .finish_non_exhaustive()
    }
}

/// The process's faults, read on every path that can inject one.
pub fn process() -> &'static Faults {
    static FAULTS: OnceLock<Faults> = OnceLock::new();
    FAULTS.get_or_init(Faults::new)
}

impl Faults {
    /// Faults of no component yet, all off.
    pub fn new() -> Faults {
        Faults {
            components: AtomicU8::new(0),
            member: RwLock::new(None),
            all: std::array::from_fn(|_| AtomicU64::new(OFF)),
            peers: RwLock::new(HashMap::new()),
            peer_names: RwLock::new(HashMap::new()),
            random: RandomState::new(),
            draws: AtomicU64::new(0),
            actions: RwLock::new(Vec::new()),
        }
    }

    /// Setting `fault` (of [`Kind::Count`]) runs `action` with its count (a store expires
    /// that many leases on `lease.expire.storm`); what it answers is the setting's reply.
    pub fn on_set(&self, fault: Fault, action: Action) {
        self.actions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((fault, action));
    }

    /// The process serves `component` (a store member named `member`): its faults can be set.
    /// A process running two stores (`keel up --events-store`) is named by the first.
    pub fn serve(&self, component: Component, member: Option<&str>) {
        self.components
            .fetch_or(1 << component as u8, Ordering::Relaxed);
        let mut named = self.member.write().unwrap_or_else(|e| e.into_inner());
        if named.is_none() {
            *named = member.map(str::to_string);
        }
    }

    fn serves(&self, component: Component) -> bool {
        self.components.load(Ordering::Relaxed) & (1 << component as u8) != 0
    }

    /// The faults this process can inject.
    pub fn known(&self) -> impl Iterator<Item = Fault> + '_ {
        Fault::ALL
            .into_iter()
            .filter(|f| self.serves(f.component()))
    }

    fn index(fault: Fault) -> usize {
        Fault::ALL.iter().position(|&f| f == fault).unwrap_or(0)
    }

    /// The delay of a fault of [`Kind::Delay`], if it is on (for all peers).
    pub fn delay(&self, fault: Fault) -> Option<Duration> {
        match self.all[Self::index(fault)].load(Ordering::Relaxed) {
            OFF => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// Blocks the thread for `fault`'s delay, reading it again every [`SLICE`], so a delay
    /// cleared or lowered meanwhile ends early; how long it waited (zero, after one atomic
    /// load, when the fault is off).
    pub fn sleep(&self, fault: Fault) -> Duration {
        if self.delay(fault).is_none() {
            return Duration::ZERO;
        }
        let started = Instant::now();
        while let Some(slice) = next_slice(self.delay(fault), started.elapsed()) {
            std::thread::sleep(slice);
        }
        started.elapsed()
    }

    /// [`Faults::sleep`] for a task: waits without blocking its thread.
    pub async fn pause(&self, fault: Fault) -> Duration {
        self.pause_while(|| self.delay(fault)).await
    }

    /// [`Faults::pause`] for a message to member `peer` (`peer.delay`).
    pub async fn pause_for_peer(&self, peer: u64) -> Duration {
        self.pause_while(|| self.peer_delay(peer)).await
    }

    /// Waits while `delay` (read again every [`SLICE`]) is longer than the wait so far.
    async fn pause_while(&self, delay: impl Fn() -> Option<Duration>) -> Duration {
        if delay().is_none() {
            return Duration::ZERO;
        }
        let started = Instant::now();
        while let Some(slice) = next_slice(delay(), started.elapsed()) {
            tokio::time::sleep(slice).await;
        }
        started.elapsed()
    }

    /// The store's members, as (ID, name): a peer fault names a member, a message goes to an ID.
    pub fn name_peers(&self, members: impl IntoIterator<Item = (u64, String)>) {
        *self.peer_names.write().unwrap_or_else(|e| e.into_inner()) = members.into_iter().collect();
    }

    /// How long a message to member `peer` waits first (`peer.delay`).
    pub fn peer_delay(&self, peer: u64) -> Option<Duration> {
        self.for_peer(Fault::PeerDelay, peer)
            .map(Duration::from_nanos)
    }

    /// Whether a message to member `peer` is lost (`peer.drop`: a draw against its fraction).
    pub fn drops(&self, peer: u64) -> bool {
        let Some(fraction) = self.for_peer(Fault::PeerDrop, peer) else {
            return false;
        };
        let draw = self
            .random
            .hash_one(self.draws.fetch_add(1, Ordering::Relaxed))
            >> 32;
        draw < fraction
    }

    /// A peer fault's value for messages to `peer`: set for that peer, for this member (all
    /// its peers), or for all.
    fn for_peer(&self, fault: Fault, peer: u64) -> Option<Bits> {
        let index = Self::index(fault);
        if let Some(bits) = Some(self.all[index].load(Ordering::Relaxed)).filter(|&b| b != OFF) {
            return Some(bits);
        }
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        if peers.is_empty() {
            return None;
        }
        let names = self.peer_names.read().unwrap_or_else(|e| e.into_inner());
        names
            .get(&peer)
            .and_then(|name| peers.get(&(index, name.clone())))
            .or_else(|| {
                let member = self.member.read().unwrap_or_else(|e| e.into_inner());
                member
                    .as_ref()
                    .and_then(|me| peers.get(&(index, me.clone())))
            })
            .copied()
    }

    /// Sets `name` to `value` (`200ms`, `0.5`, `100`, `0.5@m2`). A fault of [`Kind::Count`]
    /// acts at once and stays off: its answer is what it did
    /// (`lease.expire.storm=5: 5 leases expired on m1`), or [`FaultError::NotHere`].
    pub fn set(&self, name: &str, value: &str) -> Result<Option<String>, FaultError> {
        let fault = self.fault(name)?;
        let (value, peer) = match value.split_once('@') {
            Some((v, peer)) if fault.per_peer() && !peer.is_empty() => (v, Some(peer)),
            Some(_) => {
                return Err(FaultError::BadValue(
                    fault.name(),
                    "only peer.delay and peer.drop name a member (VALUE@MEMBER-NAME)".into(),
                ));
            }
            None => (value, None),
        };
        let bits = parse_value(fault, value.trim())?;
        if fault.kind() == Kind::Count {
            return self.act(fault, bits).map(Some);
        }
        if let Some(peer) = peer {
            let names = self.peer_names.read().unwrap_or_else(|e| e.into_inner());
            if !names.is_empty() && !names.values().any(|name| name == peer) {
                let mut known: Vec<_> = names.values().map(String::as_str).collect();
                known.sort_unstable();
                return Err(FaultError::BadValue(
                    fault.name(),
                    format!(
                        "no member is named {peer:?} (members: {})",
                        known.join(", ")
                    ),
                ));
            }
        }
        let index = Self::index(fault);
        let mut peers = self.peers.write().unwrap_or_else(|e| e.into_inner());
        match peer {
            Some(peer) => {
                peers.insert((index, peer.to_string()), bits);
                self.all[index].store(OFF, Ordering::Relaxed);
            }
            None => {
                peers.retain(|(i, _), _| *i != index);
                self.all[index].store(bits, Ordering::Relaxed);
            }
        }
        drop(peers);
        tracing::warn!(fault = fault.name(), value, peer, "fault injected");
        Ok(None)
    }

    /// Runs the actions of one-shot `fault` with `count`: what those that acted did, or why
    /// none did.
    fn act(&self, fault: Fault, count: u64) -> Result<String, FaultError> {
        let actions = self.actions.read().unwrap_or_else(|e| e.into_inner());
        let (mut acted, mut elsewhere) = (Vec::new(), Vec::new());
        for (_, action) in actions.iter().filter(|(f, _)| *f == fault) {
            match action(count) {
                Some(Outcome::Acted(what)) => acted.push(what),
                Some(Outcome::NotHere(why)) => elsewhere.push(why),
                None => {}
            }
        }
        let setting = format!("{}={count}", fault.name());
        match (acted.is_empty(), elsewhere.is_empty()) {
            (false, _) => {
                let what = format!("{setting}: {}", acted.join("; "));
                tracing::warn!(fault = fault.name(), count, "{what}");
                Ok(what)
            }
            (true, false) => Err(FaultError::NotHere(format!(
                "{setting}: {}",
                elsewhere.join("; ")
            ))),
            (true, true) => Err(FaultError::NoAction(fault.name())),
        }
    }

    /// Clears `name` (for every peer).
    pub fn clear(&self, name: &str) -> Result<Fault, FaultError> {
        let fault = self.fault(name)?;
        let index = Self::index(fault);
        let mut peers = self.peers.write().unwrap_or_else(|e| e.into_inner());
        peers.retain(|(i, _), _| *i != index);
        if self.all[index].swap(OFF, Ordering::Relaxed) != OFF {
            tracing::warn!(fault = fault.name(), "fault cleared");
        }
        Ok(fault)
    }

    /// Clears every fault.
    pub fn clear_all(&self) {
        for fault in Fault::ALL {
            let _ = self.clear(fault.name());
        }
    }

    /// The active faults as `(name, value)`, values as they are set (`0.5@m2`).
    pub fn active(&self) -> Vec<(&'static str, String)> {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        let mut active = Vec::new();
        for (index, fault) in Fault::ALL.into_iter().enumerate() {
            let bits = self.all[index].load(Ordering::Relaxed);
            if bits != OFF {
                active.push((fault.name(), format_value(fault, bits)));
            }
            let mut named: Vec<_> = peers.iter().filter(|((i, _), _)| *i == index).collect();
            named.sort();
            for ((_, peer), &bits) in named {
                active.push((
                    fault.name(),
                    format!("{}@{peer}", format_value(fault, bits)),
                ));
            }
        }
        active
    }

    fn fault(&self, name: &str) -> Result<Fault, FaultError> {
        let fault = Fault::named(name).ok_or_else(|| FaultError::Unknown(name.to_string()))?;
        if !self.serves(fault.component()) {
            let owner = match fault.component() {
                Component::Store => "store (keel fault ... --etcd-servers URLS)",
                Component::Apiserver => "apiserver (keel fault ... --kubeconfig FILE)",
            };
            return Err(FaultError::Elsewhere(fault.name(), owner));
        }
        Ok(fault)
    }

    /// [`Faults::answer`] for a request on `path` (under [`PATH`]) whose body was read within
    /// [`BODY_LIMIT`] bytes (None: it was longer).
    pub fn answer_request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Reply {
        let Some(body) = body else {
            return Reply::error(413, "a fault's value is at most 4 KiB");
        };
        let rest = path.strip_prefix(PATH).unwrap_or(path);
        self.answer(method, rest, &String::from_utf8_lossy(body))
    }

    /// Answers `method` on `/debug/faults` (`rest` is the path after it: "" or `/NAME`), with
    /// `body` the value of a PUT; the reply is JSON. One protocol for both servers:
    /// - `GET /debug/faults`: `{"active":[{"name","value"}],"known":[{"name","kind","component"}]}`;
    /// - `PUT /debug/faults/NAME` with the value as the body: sets it; a one-shot fault's
    ///   answer says what it did (`"done"`), or is a 409 whose `reason` is [`NOT_HERE`] where
    ///   it does not act;
    /// - `DELETE /debug/faults/NAME` clears it, `DELETE /debug/faults` clears them all.
    ///
    /// A PUT or DELETE answers as a GET does, after the change.
    pub fn answer(&self, method: &str, rest: &str, body: &str) -> Reply {
        let name = rest.trim_start_matches('/');
        let changed = match (method, name) {
            ("GET", "") => Ok(None),
            ("PUT", name) if !name.is_empty() => self.set(name, body),
            ("DELETE", "") => {
                self.clear_all();
                Ok(None)
            }
            ("DELETE", name) => self.clear(name).map(|_| None),
            ("GET", _) => return Reply::error(404, "no such path: GET /debug/faults lists them"),
            _ => {
                return Reply::error(
                    405,
                    "use GET /debug/faults, PUT /debug/faults/NAME (the value as the body), \
                     DELETE /debug/faults[/NAME]",
                );
            }
        };
        match changed {
            Ok(done) => {
                let mut listing = self.listing();
                if let Some(done) = done {
                    listing["done"] = done.into();
                }
                Reply {
                    status: 200,
                    body: listing.to_string(),
                }
            }
            Err(e @ FaultError::Unknown(_)) => Reply::error(404, &e.to_string()),
            Err(FaultError::NotHere(why)) => Reply {
                status: 409,
                body: serde_json::json!({ "error": why, "reason": NOT_HERE }).to_string(),
            },
            Err(e @ FaultError::NoAction(_)) => Reply::error(503, &e.to_string()),
            Err(e) => Reply::error(400, &e.to_string()),
        }
    }

    fn listing(&self) -> serde_json::Value {
        let active: Vec<_> = self
            .active()
            .into_iter()
            .map(|(name, value)| serde_json::json!({ "name": name, "value": value }))
            .collect();
        let known: Vec<_> = self
            .known()
            .map(|f| {
                serde_json::json!({
                    "name": f.name(),
                    "kind": match f.kind() {
                        Kind::Delay => "duration",
                        Kind::Fraction => "fraction",
                        Kind::Count => "count",
                    },
                    "perPeer": f.per_peer(),
                })
            })
            .collect();
        serde_json::json!({ "active": active, "known": known })
    }
}

impl Default for Faults {
    fn default() -> Faults {
        Faults::new()
    }
}

/// An answer of `/debug/faults`: an HTTP status and a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: String,
}

impl Reply {
    /// `{"error": message}` with `status`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply {
            status,
            body: serde_json::json!({ "error": message }).to_string(),
        }
    }
}

/// The next sleep of a delay now `delay` (None: off) that has waited `waited`: what is left,
/// up to [`SLICE`]; None when it is done.
fn next_slice(delay: Option<Duration>, waited: Duration) -> Option<Duration> {
    let left = delay?.checked_sub(waited)?;
    (!left.is_zero()).then(|| left.min(SLICE))
}

fn parse_value(fault: Fault, value: &str) -> Result<Bits, FaultError> {
    let bad = |message: String| FaultError::BadValue(fault.name(), message);
    match fault.kind() {
        Kind::Delay => {
            let d = go_duration::parse(value).map_err(bad)?;
            if d > MAX_DELAY {
                return Err(bad(format!(
                    "{value} is too long: a delay is at most {}",
                    go_duration::format(MAX_DELAY)
                )));
            }
            Ok(d.as_nanos() as u64)
        }
        Kind::Fraction => match value.parse::<f64>() {
            Ok(f) if (0.0..=1.0).contains(&f) => Ok((f * FRACTION_ONE) as u64),
            _ => Err(bad(format!("{value:?} is not a fraction from 0 to 1"))),
        },
        Kind::Count => match value.parse::<u64>() {
            Ok(n) if n < OFF => Ok(n),
            _ => Err(bad(format!("{value:?} is not a count"))),
        },
    }
}

fn format_value(fault: Fault, bits: Bits) -> String {
    match fault.kind() {
        Kind::Delay => go_duration::format(Duration::from_nanos(bits)),
        Kind::Fraction => format!("{}", bits as f64 / FRACTION_ONE),
        Kind::Count => bits.to_string(),
    }
}

/// `keel_fault_active{name}`: 1 for each fault on, 0 for each off, of the faults the
/// process can inject.
#[derive(Debug)]
pub struct FaultMetrics(pub &'static Faults);

impl Collector for FaultMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let active = self.0.active();
        let gauge = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "keel_fault_active",
            "Whether a fault injected for a diagnosis drill is on (keel fault list).",
            None,
            gauge.metric_type(),
        )?;
        for fault in self.0.known() {
            let on = active.iter().any(|(name, _)| *name == fault.name());
            ConstGauge::new(on as i64).encode(family.encode_family(&[("name", fault.name())])?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serving(component: Component, member: Option<&str>) -> Faults {
        let faults = Faults::new();
        faults.serve(component, member);
        faults
    }

    #[test]
    fn set_list_and_clear() {
        let faults = serving(Component::Store, Some("m1"));
        assert_eq!(faults.delay(Fault::WalFsyncDelay), None);
        faults.set("wal.fsync.delay", "200ms").unwrap();
        assert_eq!(
            faults.delay(Fault::WalFsyncDelay),
            Some(Duration::from_millis(200))
        );
        faults.set("backend.commit.delay", "1m").unwrap();
        assert_eq!(
            faults.active(),
            vec![
                ("wal.fsync.delay", "200ms".to_string()),
                ("backend.commit.delay", "1m0s".to_string())
            ]
        );
        faults.clear("wal.fsync.delay").unwrap();
        assert_eq!(faults.delay(Fault::WalFsyncDelay), None);
        faults.clear_all();
        assert!(faults.active().is_empty());
    }

    #[test]
    fn peer_faults_name_one_peer_or_all() {
        let faults = serving(Component::Store, Some("m1"));
        faults.name_peers([(1, "m1".into()), (2, "m2".into()), (3, "m3".into())]);
        assert!(
            faults
                .set("peer.delay", "50ms@m9")
                .unwrap_err()
                .to_string()
                .contains("members: m1, m2, m3")
        );
        faults.set("peer.delay", "50ms@m2").unwrap();
        assert_eq!(faults.peer_delay(2), Some(Duration::from_millis(50)));
        assert_eq!(faults.peer_delay(3), None);
        // Naming this member slows all its links.
        faults.set("peer.delay", "70ms@m1").unwrap();
        assert_eq!(faults.peer_delay(3), Some(Duration::from_millis(70)));
        // Without a member: every peer, and the per-peer settings go.
        faults.set("peer.delay", "10ms").unwrap();
        assert_eq!(faults.active(), vec![("peer.delay", "10ms".to_string())]);
        faults.set("peer.drop", "1").unwrap();
        assert!(faults.drops(2));
        faults.set("peer.drop", "0").unwrap();
        assert!(!faults.drops(2));
        faults.set("peer.drop", "0.5@m3").unwrap();
        let lost = (0..10_000).filter(|_| faults.drops(3)).count();
        assert!((4_000..6_000).contains(&lost), "{lost} of 10000 lost");
        assert!(!faults.drops(2));
    }

    #[test]
    fn bad_settings_are_explained() {
        let faults = serving(Component::Store, None);
        let err = |name, value| faults.set(name, value).unwrap_err().to_string();
        assert!(err("wal.fsync", "1s").contains("keel fault list"));
        assert!(err("wal.fsync.delay", "200").contains("Go syntax"));
        assert!(err("wal.fsync.delay", "20m").contains("20m is too long: a delay is at most 1m0s"));
        assert!(err("peer.delay", "61s@m2").contains("at most 1m0s"));
        assert!(err("lease.keepalive.delay", "2h").contains("at most 1m0s"));
        assert!(err("peer.drop", "1.5").contains("fraction"));
        assert!(err("wal.fsync.delay", "1s@m2").contains("name a member"));
        assert!(err("apiserver.request.delay", "1s").contains("--kubeconfig"));
        assert!(faults.active().is_empty());
    }

    /// A storm acting on `leader` only, as a store's does.
    fn storming(faults: &Faults, member: &'static str, leader: bool) {
        faults.on_set(
            Fault::LeaseExpireStorm,
            Box::new(move |n| {
                Some(match leader {
                    true => Outcome::Acted(format!("{n} leases expired on {member}")),
                    false => Outcome::NotHere(format!("{member} is not the leader")),
                })
            }),
        );
    }

    #[test]
    fn a_count_acts_once_says_what_it_did_and_is_off_again() {
        let faults = serving(Component::Store, Some("m1"));
        assert_eq!(
            faults.set("lease.expire.storm", "5"),
            Err(FaultError::NoAction("lease.expire.storm"))
        );
        storming(&faults, "m2", false);
        let refused = faults.answer("PUT", "/lease.expire.storm", "5");
        assert_eq!(refused.status, 409);
        let refused: serde_json::Value = serde_json::from_str(&refused.body).unwrap();
        assert_eq!(refused["reason"], NOT_HERE);
        assert_eq!(
            refused["error"],
            "lease.expire.storm=5: m2 is not the leader"
        );
        // A process with a leader among its stores acted.
        storming(&faults, "m1", true);
        faults.on_set(Fault::LeaseExpireStorm, Box::new(|_| None));
        let done = faults.answer("PUT", "/lease.expire.storm", "5");
        assert_eq!(done.status, 200);
        let done: serde_json::Value = serde_json::from_str(&done.body).unwrap();
        assert_eq!(done["done"], "lease.expire.storm=5: 5 leases expired on m1");
        assert_eq!(done["active"], serde_json::json!([]));
        assert!(faults.active().is_empty());
    }

    #[test]
    fn a_delay_is_slept_in_slices_that_read_it_again() {
        let ms = Duration::from_millis;
        assert_eq!(next_slice(None, ms(0)), None);
        assert_eq!(next_slice(Some(ms(250)), ms(0)), Some(SLICE));
        assert_eq!(next_slice(Some(ms(250)), ms(200)), Some(ms(50)));
        assert_eq!(next_slice(Some(ms(250)), ms(250)), None);
        // Lowered below what was waited, or cleared: done.
        assert_eq!(next_slice(Some(ms(100)), ms(200)), None);
        assert_eq!(next_slice(None, ms(200)), None);
        let faults = serving(Component::Store, None);
        assert_eq!(faults.sleep(Fault::WalFsyncDelay), Duration::ZERO);
    }

    /// Runs `wait` on a thread of its own once `fault` is set to a minute, then `end`s the
    /// fault: the wait must end (the 30 s bound is a deadline for a failure, not a timing).
    fn ended_early(
        fault: Fault,
        wait: impl FnOnce(&'static Faults) + Send + 'static,
        end: impl FnOnce(&Faults),
    ) {
        let faults: &'static Faults = Box::leak(Box::new(serving(Component::Store, None)));
        faults.set(fault.name(), "1m").unwrap();
        let (started, started_rx) = std::sync::mpsc::channel();
        let (done, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            started.send(()).unwrap();
            wait(faults);
            done.send(()).unwrap();
        });
        started_rx.recv().unwrap();
        end(faults);
        assert!(
            done_rx.recv_timeout(Duration::from_secs(30)).is_ok(),
            "the wait outlived its fault"
        );
    }

    #[test]
    fn clearing_a_delay_ends_a_sleep_in_progress() {
        ended_early(
            Fault::WalFsyncDelay,
            |faults| {
                faults.sleep(Fault::WalFsyncDelay);
            },
            |faults| {
                faults.clear("wal.fsync.delay").unwrap();
            },
        );
    }

    #[test]
    fn lowering_a_delay_ends_a_pause_in_progress() {
        ended_early(
            Fault::LeaseKeepaliveDelay,
            |faults| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                runtime.block_on(faults.pause(Fault::LeaseKeepaliveDelay));
            },
            |faults| {
                faults.set("lease.keepalive.delay", "1ms").unwrap();
            },
        );
    }

    #[test]
    fn the_http_protocol() {
        let faults = serving(Component::Apiserver, None);
        let put = faults.answer("PUT", "/apiserver.request.delay", "2s");
        assert_eq!(put.status, 200);
        let listing: serde_json::Value = serde_json::from_str(&put.body).unwrap();
        assert_eq!(
            listing["active"],
            serde_json::json!([{"name": "apiserver.request.delay", "value": "2s"}])
        );
        assert_eq!(listing["known"].as_array().unwrap().len(), 2);
        assert_eq!(faults.answer("PUT", "/nope", "1s").status, 404);
        assert_eq!(faults.answer("PUT", "/wal.fsync.delay", "1s").status, 400);
        assert_eq!(faults.answer("POST", "", "").status, 405);
        assert_eq!(faults.answer("DELETE", "", "").status, 200);
        // A whole request: the path under PATH, a body past the limit refused.
        let set =
            faults.answer_request("PUT", "/debug/faults/apiserver.request.delay", Some(b"1s"));
        assert_eq!(set.status, 200);
        assert_eq!(
            faults.answer_request("PUT", "/debug/faults/x", None).status,
            413
        );
        assert!(is_path("/debug/faults") && is_path("/debug/faults/a.b"));
        assert!(!is_path("/debug/faultsx") && !is_path("/debug"));
        faults.clear_all();
        assert!(faults.active().is_empty());
    }

    #[test]
    fn the_metric_shows_each_fault_on_or_off() {
        let faults = serving(Component::Apiserver, None);
        faults.set("apiserver.watchcache.stall", "1s").unwrap();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(FaultMetrics(Box::leak(Box::new(faults)))));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("keel_fault_active{name=\"apiserver.watchcache.stall\"} 1"));
        assert!(text.contains("keel_fault_active{name=\"apiserver.request.delay\"} 0"));
        assert!(!text.contains("wal.fsync.delay"));
    }
}
