//! The handoff, sans I/O: what this apiserver is writing, handed by the writer to the watch
//! cache of the resource, so that the cache need not decode again the store event that
//! brings the write back. (kube-apiserver decodes every event; under a lease-renewal load
//! that decode is most of what its cache costs.)
//!
//! A writer offers, *before* it sends its write, the key, the bytes it writes and how to make
//! what the cache's codec would make of those bytes at any revision ([`Make`]), and says at
//! which revision the write landed once the store has answered. The offer comes first because
//! the store's watch event may reach the cache before the write's answer reaches the writer.
//!
//! # Exactness
//!
//! An ADDED or MODIFIED event takes an offer only when its key and its value bytes are the
//! offered ones (and its revision the landed one, once known); a key may have offers of
//! several writes waiting (a client that writes again as soon as it is answered). What a
//! codec makes of an event depends on nothing but those bytes and the event's revision (the
//! object's resourceVersion), and the offer is made at the event's revision, so what the
//! cache gets is what decoding would give: for keel store in process and for a remote etcd
//! alike, even when another writer wrote the same bytes. An event that takes nothing is
//! decoded, as before. The writer answers for its [`Make`] giving what decoding its bytes
//! gives: the registry offers only values whose JSON reads back as them
//! (`registry::served::decodes_back`), and in debug builds its codec checks every object
//! handed over against decoding.
//!
//! # Bounds
//!
//! An offer lives for one write: until an event takes it, the writer withdraws it (the write
//! failed, wrote nothing, or its request was dropped: [`Handover`] withdraws on drop), or the
//! cache has passed the revision it landed at ([`Handoff::pass`]: after every batch of events
//! and progress notification, and after a relist). An offer that lands at or below the
//! revision passed is dropped at once. Past [`LIMITS`] (offers, bytes of stored values)
//! nothing more is offered, so a cache that does not follow the store (it lost the store, or
//! its shell stopped) holds at most that much. Storage offers nothing to a cache that is not
//! ready, nor without a cache (`--watch-cache=false`).
//!
//! # Locking
//!
//! Writers and the cache's shell share one mutex of the handoff's own (not the cache's),
//! held to insert, look up and compare bytes, never to make an object and never across an
//! await. The shell takes a batch's offers before it applies the batch and passes the
//! batch's revision after: an offer that lands in between is dropped by the pass, one that
//! lands after finds the revision passed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::Limits;

/// How much a handoff holds: 2,048 offers and 8 MiB of offered bytes (each offer also holds
/// the object made of them, a few times that).
pub const LIMITS: Limits = Limits {
    events: 2048,
    bytes: 8 << 20,
};

/// What a writer hands over: what the cache's codec makes of the offered bytes, made at the
/// revision of the event that brings them back.
pub type Make<O> = Box<dyn FnOnce(i64) -> O + Send>;

/// One write's offer.
struct Offered<O> {
    /// Whose offer it is.
    ticket: u64,
    /// The bytes written.
    value: Vec<u8>,
    /// The revision the write landed at, once its writer knows.
    revision: Option<i64>,
    make: Make<O>,
}

/// The offers of the writes of one resource (see the module docs).
pub struct Handoff<O> {
    limits: Limits,
    /// By key, in the order they were made (a writer's next offer replaces its last).
    offers: HashMap<String, Vec<Offered<O>>>,
    /// How many offers there are.
    len: usize,
    /// The sum of the offered bytes.
    bytes: usize,
    /// How many offers have landed.
    landed: usize,
    /// The revision the cache has passed.
    passed: i64,
    next_ticket: u64,
}

impl<O> Handoff<O> {
    /// An empty handoff holding at most `limits`.
    pub fn new(limits: Limits) -> Handoff<O> {
        Handoff {
            limits,
            offers: HashMap::new(),
            len: 0,
            bytes: 0,
            landed: 0,
            passed: 0,
            next_ticket: 0,
        }
    }

    /// How many offers wait.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no offer waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A new writer's ticket.
    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// Offers what `ticket`'s write of `value` to `key` makes, in place of `ticket`'s
    /// earlier offer; false when the handoff is full.
    pub fn offer(&mut self, key: &str, ticket: u64, value: &[u8], make: Make<O>) -> bool {
        self.withdraw(key, ticket);
        if self.len >= self.limits.events || self.bytes + value.len() > self.limits.bytes {
            return false;
        }
        let offered = Offered {
            ticket,
            value: value.to_vec(),
            revision: None,
            make,
        };
        match self.offers.get_mut(key) {
            Some(offers) => offers.push(offered),
            None => {
                self.offers.insert(key.to_string(), vec![offered]);
            }
        }
        self.len += 1;
        self.bytes += value.len();
        true
    }

    /// Withdraws `ticket`'s offer for `key`, if it still waits.
    pub fn withdraw(&mut self, key: &str, ticket: u64) {
        self.remove(key, |o| o.ticket == ticket);
    }

    /// `ticket`'s write to `key` landed at `revision`: its offer waits for the event at that
    /// revision, unless the cache has passed it.
    pub fn landed(&mut self, key: &str, ticket: u64, revision: i64) {
        if revision <= self.passed {
            return self.withdraw(key, ticket);
        }
        let mut offers = self.offers.get_mut(key).into_iter().flatten();
        if let Some(offered) = offers.find(|o| o.ticket == ticket)
            && offered.revision.replace(revision).is_none()
        {
            self.landed += 1;
        }
    }

    /// What was offered for an event writing `value` to `key` at `revision`, if anything
    /// (see the module docs).
    pub fn take(&mut self, key: &str, revision: i64, value: &[u8]) -> Option<Make<O>> {
        let offered = self.remove(key, |o| {
            o.value == value && o.revision.is_none_or(|r| r == revision)
        })?;
        Some(offered.make)
    }

    /// The cache has passed `revision` (or, after a relist, starts after it): the offers
    /// landed at or below it go, and later offers landing there are dropped.
    pub fn pass(&mut self, revision: i64) {
        self.passed = revision;
        if self.landed == 0 {
            return;
        }
        let gone = |o: &Offered<O>| o.revision.is_some_and(|r| r <= revision);
        for offers in self.offers.values_mut() {
            for o in offers.iter().filter(|o| gone(o)) {
                self.len -= 1;
                self.bytes -= o.value.len();
                self.landed -= 1;
            }
            offers.retain(|o| !gone(o));
        }
        self.offers.retain(|_, offers| !offers.is_empty());
    }

    /// Drops every offer (the cache stopped).
    pub fn clear(&mut self) {
        self.offers.clear();
        (self.len, self.bytes, self.landed) = (0, 0, 0);
    }

    /// Removes the first offer for `key` that `which` picks.
    fn remove(&mut self, key: &str, which: impl Fn(&Offered<O>) -> bool) -> Option<Offered<O>> {
        let offers = self.offers.get_mut(key)?;
        let offered = offers.remove(offers.iter().position(which)?);
        if offers.is_empty() {
            self.offers.remove(key);
        }
        self.len -= 1;
        self.bytes -= offered.value.len();
        self.landed -= usize::from(offered.revision.is_some());
        Some(offered)
    }
}

/// Locks a shared handoff (a writer that panicked holding it left it consistent: every
/// method completes its bookkeeping before it can panic).
pub(super) fn lock<O>(handoff: &Mutex<Handoff<O>>) -> MutexGuard<'_, Handoff<O>> {
    handoff.lock().unwrap_or_else(|e| e.into_inner())
}

/// One request's handover of its writes of one key to the cache: offer before each write,
/// then say where the last one landed. Dropped without [`Handover::landed`], it withdraws
/// its offer.
pub struct Handover<O> {
    handoff: Arc<Mutex<Handoff<O>>>,
    key: String,
    ticket: u64,
    /// Whether [`Handover::landed`] was said (then the offer is not withdrawn on drop).
    landed: bool,
}

impl<O> Handover<O> {
    /// A handover of the writes of `key` to `handoff`.
    pub(super) fn new(handoff: Arc<Mutex<Handoff<O>>>, key: &str) -> Handover<O> {
        let ticket = lock(&handoff).ticket();
        Handover {
            handoff,
            key: key.to_string(),
            ticket,
            landed: false,
        }
    }

    /// Offers `make` for the write of `value` about to be sent (in place of an earlier
    /// attempt's offer).
    pub fn offer(&mut self, value: &[u8], make: Make<O>) {
        lock(&self.handoff).offer(&self.key, self.ticket, value, make);
    }

    /// Withdraws the offer (the next attempt writes nothing).
    pub fn withdraw(&mut self) {
        lock(&self.handoff).withdraw(&self.key, self.ticket);
    }

    /// The offered write landed at `revision`.
    pub fn landed(mut self, revision: i64) {
        lock(&self.handoff).landed(&self.key, self.ticket, revision);
        self.landed = true;
    }
}

impl<O> Drop for Handover<O> {
    fn drop(&mut self) {
        if !self.landed {
            lock(&self.handoff).withdraw(&self.key, self.ticket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(label: &'static str) -> Make<String> {
        Box::new(move |revision| format!("{label}@{revision}"))
    }

    fn limits(events: usize, bytes: usize) -> Limits {
        Limits { events, bytes }
    }

    #[test]
    fn an_event_takes_the_offer_of_its_key_and_bytes_made_at_its_revision() {
        let mut h = Handoff::new(LIMITS);
        assert!(h.offer("/a", 1, b"x", made("a")));
        // Another key, other bytes, or a revision other than the landed one: nothing.
        assert!(h.take("/b", 5, b"x").is_none());
        assert!(h.take("/a", 5, b"y").is_none());
        h.landed("/a", 1, 5);
        assert!(h.take("/a", 6, b"x").is_none());
        assert_eq!(h.take("/a", 5, b"x").unwrap()(5), "a@5");
        assert!(h.is_empty());
        assert!(h.take("/a", 5, b"x").is_none());
        // Before the writer knows its revision, the first event with the bytes takes it.
        assert!(h.offer("/a", 2, b"z", made("a")));
        assert_eq!(h.take("/a", 9, b"z").unwrap()(9), "a@9");
        // Landing after the event took it is nothing.
        h.landed("/a", 2, 9);
        assert!(h.is_empty());
        assert_eq!((h.bytes, h.landed), (0, 0));
    }

    #[test]
    fn offers_go_when_withdrawn_replaced_or_passed() {
        let mut h = Handoff::new(LIMITS);
        h.offer("/a", 1, b"1", made("a"));
        h.offer("/b", 2, b"22", made("b"));
        // Another writer's withdrawal leaves an offer; its own removes it.
        h.withdraw("/a", 2);
        assert_eq!(h.len(), 2);
        h.withdraw("/a", 1);
        assert_eq!((h.len(), h.bytes), (1, 2));
        // A writer's next offer replaces its own; another writer's offer for the key is
        // kept beside it, and each event takes the one with its bytes.
        h.offer("/b", 2, b"2", made("b"));
        h.offer("/b", 3, b"333", made("b3"));
        assert_eq!((h.len(), h.bytes), (2, 4));
        h.landed("/b", 2, 7);
        h.landed("/b", 3, 8);
        h.offer("/c", 4, b"4", made("c"));
        // The cache passes 6: nothing landed there; then 7: /b's first offer goes.
        h.pass(6);
        assert_eq!(h.len(), 3);
        h.pass(7);
        assert_eq!((h.len(), h.bytes, h.landed), (2, 4, 1));
        assert_eq!(h.take("/b", 8, b"333").unwrap()(8), "b3@8");
        assert_eq!((h.len(), h.bytes, h.landed), (1, 1, 0));
        // Landing at or below what the cache has passed drops the offer at once.
        h.pass(8);
        h.landed("/c", 4, 8);
        assert!(h.is_empty());
        assert_eq!(h.bytes, 0);
        // A relist may start lower: offers landing above it wait again.
        h.pass(3);
        h.offer("/d", 5, b"5", made("d"));
        h.landed("/d", 5, 4);
        assert_eq!(h.len(), 1);
        h.clear();
        assert!(h.is_empty());
    }

    #[test]
    fn a_full_handoff_refuses_offers() {
        let mut h = Handoff::new(limits(2, 10));
        assert!(h.offer("/a", 1, b"12345", made("a")));
        assert!(h.offer("/b", 2, b"12345", made("b")));
        assert!(!h.offer("/c", 3, b"1", made("c")), "at most 2 offers");
        h.withdraw("/b", 2);
        assert!(!h.offer("/c", 3, b"123456", made("c")), "at most 10 bytes");
        assert!(h.offer("/c", 3, b"12345", made("c")));
        // Replacing its own offer frees its room first.
        assert!(h.offer("/c", 3, b"123", made("c")));
        assert_eq!((h.len(), h.bytes), (2, 8));
    }

    #[test]
    fn a_handover_dropped_before_it_landed_withdraws_its_offer() {
        let handoff = Arc::new(Mutex::new(Handoff::new(LIMITS)));
        let mut first = Handover::new(handoff.clone(), "/a");
        first.offer(b"1", made("a"));
        drop(first);
        assert!(lock(&handoff).is_empty());
        let mut second = Handover::new(handoff.clone(), "/a");
        second.offer(b"1", made("a"));
        second.offer(b"2", made("a"));
        assert_eq!(lock(&handoff).len(), 1);
        second.landed(8);
        let mut h = lock(&handoff);
        assert_eq!(h.len(), 1);
        assert_eq!(h.take("/a", 8, b"2").unwrap()(8), "a@8");
    }
}
