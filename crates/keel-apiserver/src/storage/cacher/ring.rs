//! The watch cache's event buffer, sans I/O: the last events of one resource in revision
//! order, each numbered by its position in the stream (its sequence number), so a watcher is a
//! plain cursor into it.
//!
//! The buffer is *complete after* a revision, `covered_from`: every event with a higher
//! revision is in it or has not happened yet. A watch from resourceVersion `rv` can be served
//! from the buffer when `rv >= covered_from`: its cursor is the first event above `rv`, and
//! every event it reads later is newer still. The buffer is full when it holds its capacity
//! in events or its budget in bytes (each event weighs what the caller says it costs; the
//! newest event is kept whatever it weighs). Then the oldest event goes and `covered_from`
//! moves up to its revision; a cursor still pointing at it has fallen behind and its watcher
//! must end (the client resumes from the last resourceVersion it saw). When the store's history the buffer follows is broken (the store compacted past the
//! point the buffer had reached), [`Ring::reset`] starts a new generation: every cursor of an
//! older generation has fallen behind.

use std::collections::VecDeque;
use std::sync::Arc;

/// One buffered event: its revision, its key and what the cache made of it.
#[derive(Debug)]
pub struct Cached<T> {
    /// The revision of the change (the object's resourceVersion after it).
    pub revision: i64,
    /// The object's key.
    pub key: String,
    /// The decoded event.
    pub value: T,
}

/// Where a watcher is in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    generation: u64,
    /// Sequence number of the next event to read.
    next: u64,
    /// Events at or below this revision are skipped (the watch's start).
    after: i64,
}

/// Why a cursor's events are no longer in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behind {
    /// The buffer dropped events the cursor had not read (its watcher did not keep up).
    Overrun,
    /// The buffer started a new generation.
    Reset,
}

/// How much a buffer may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most events.
    pub events: usize,
    /// The most bytes (the sum of the events' weights).
    pub bytes: usize,
}

/// How much one read may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimit {
    /// The most events.
    pub events: usize,
    /// Stop once this many bytes are read (after at least one event).
    pub bytes: usize,
}

/// The last events of one resource (see the module docs).
#[derive(Debug)]
pub struct Ring<T> {
    /// The events, each with its weight.
    events: VecDeque<(Arc<Cached<T>>, usize)>,
    /// The sum of the events' weights.
    bytes: usize,
    /// Sequence number of `events[0]`.
    first: u64,
    /// Every event with a higher revision is in the buffer or still to come.
    covered_from: i64,
    limits: Limits,
    generation: u64,
}

impl<T> Ring<T> {
    /// An empty buffer within `limits`, complete after `revision`.
    pub fn new(limits: Limits, revision: i64) -> Ring<T> {
        Ring {
            events: VecDeque::new(),
            bytes: 0,
            first: 0,
            covered_from: revision,
            limits,
            generation: 0,
        }
    }

    /// Starts over after a break in the store's history: empty and complete after
    /// `revision`, every existing cursor behind.
    pub fn reset(&mut self, revision: i64) {
        self.first += self.events.len() as u64;
        self.events.clear();
        self.bytes = 0;
        self.covered_from = revision;
        self.generation += 1;
    }

    /// Appends the next event of the stream, which costs `weight` bytes; events come in
    /// revision order.
    pub fn push(&mut self, revision: i64, key: String, value: T, weight: usize) {
        self.bytes += weight;
        self.events.push_back((
            Arc::new(Cached {
                revision,
                key,
                value,
            }),
            weight,
        ));
        while self.events.len() > 1
            && (self.events.len() > self.limits.events || self.bytes > self.limits.bytes)
            && let Some((oldest, weight)) = self.events.pop_front()
        {
            self.first += 1;
            self.bytes -= weight;
            self.covered_from = self.covered_from.max(oldest.revision);
        }
    }

    /// The revision after which the buffer is complete.
    pub fn covered_from(&self) -> i64 {
        self.covered_from
    }

    /// Sequence number the next pushed event will get.
    pub fn head(&self) -> u64 {
        self.first + self.events.len() as u64
    }

    /// A cursor for a watch from resourceVersion `after` (events above it), or None when the
    /// buffer no longer holds everything after it.
    pub fn cursor(&self, after: i64) -> Option<Cursor> {
        if after < self.covered_from {
            return None;
        }
        let skipped = self.events.partition_point(|(e, _)| e.revision <= after);
        Some(Cursor {
            generation: self.generation,
            next: self.first + skipped as u64,
            after,
        })
    }

    /// Why `cursor` can no longer be served, if it cannot.
    pub fn behind(&self, cursor: &Cursor) -> Option<Behind> {
        if cursor.generation != self.generation {
            Some(Behind::Reset)
        } else if cursor.next < self.first {
            Some(Behind::Overrun)
        } else {
            None
        }
    }

    /// Whether events past `cursor` are waiting.
    pub fn has_news(&self, cursor: &Cursor) -> bool {
        cursor.generation != self.generation || cursor.next < self.head()
    }

    /// Moves `cursor` past the next events, as many as `limit` allows, appending them to
    /// `out`.
    pub fn read(
        &self,
        cursor: &mut Cursor,
        out: &mut Vec<Arc<Cached<T>>>,
        limit: ReadLimit,
    ) -> Result<(), Behind> {
        if let Some(behind) = self.behind(cursor) {
            return Err(behind);
        }
        let start = (cursor.next - self.first) as usize;
        let mut bytes = 0;
        for (event, weight) in self.events.range(start..).take(limit.events) {
            if bytes >= limit.bytes {
                break;
            }
            bytes += weight;
            cursor.next += 1;
            if event.revision > cursor.after {
                out.push(event.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revisions(out: &[Arc<Cached<()>>]) -> Vec<i64> {
        out.iter().map(|e| e.revision).collect()
    }

    const ALL: ReadLimit = ReadLimit {
        events: 100,
        bytes: usize::MAX,
    };

    fn limits(events: usize) -> Limits {
        Limits {
            events,
            bytes: usize::MAX,
        }
    }

    fn ring(capacity: usize, start: i64, revisions: &[i64]) -> Ring<()> {
        let mut ring = Ring::new(limits(capacity), start);
        for &r in revisions {
            ring.push(r, format!("/k/{r}"), (), 1);
        }
        ring
    }

    #[test]
    fn a_cursor_reads_the_events_after_its_start_and_then_what_comes_next() {
        let mut ring = ring(8, 10, &[12, 15, 16]);
        let mut cursor = ring.cursor(12).unwrap();
        let mut out = Vec::new();
        ring.read(&mut cursor, &mut out, ALL).unwrap();
        assert_eq!(revisions(&out), [15, 16]);
        assert!(!ring.has_news(&cursor));
        ring.push(20, "/k/20".into(), (), 1);
        assert!(ring.has_news(&cursor));
        out.clear();
        ring.read(&mut cursor, &mut out, ALL).unwrap();
        assert_eq!(revisions(&out), [20]);
    }

    #[test]
    fn a_start_past_the_buffer_skips_events_up_to_it_as_they_arrive() {
        // A client listed at 30 before the cache saw the events up to 30.
        let mut ring = ring(8, 10, &[12]);
        let mut cursor = ring.cursor(30).unwrap();
        for r in [25, 30, 31] {
            ring.push(r, format!("/k/{r}"), (), 1);
        }
        let mut out = Vec::new();
        ring.read(&mut cursor, &mut out, ALL).unwrap();
        assert_eq!(revisions(&out), [31]);
    }

    #[test]
    fn reads_are_bounded_and_resume_where_they_stopped() {
        let ring = ring(8, 0, &[1, 2, 3, 4, 5]);
        let mut cursor = ring.cursor(0).unwrap();
        let mut out = Vec::new();
        let two = ReadLimit {
            events: 2,
            bytes: usize::MAX,
        };
        ring.read(&mut cursor, &mut out, two).unwrap();
        assert_eq!(revisions(&out), [1, 2]);
        ring.read(&mut cursor, &mut out, two).unwrap();
        ring.read(&mut cursor, &mut out, two).unwrap();
        assert_eq!(revisions(&out), [1, 2, 3, 4, 5]);
        assert!(!ring.has_news(&cursor));
    }

    #[test]
    fn a_full_buffer_drops_its_oldest_and_covers_less_history() {
        let mut ring = ring(3, 10, &[11, 12, 13]);
        let mut slow = ring.cursor(10).unwrap();
        assert_eq!(ring.covered_from(), 10);
        ring.push(14, "/k/14".into(), (), 1);
        assert_eq!(ring.covered_from(), 11);
        assert_eq!(ring.cursor(10), None, "event 11 is gone");
        let mut out = Vec::new();
        let mut from_11 = ring.cursor(11).unwrap();
        ring.read(&mut from_11, &mut out, ALL).unwrap();
        assert_eq!(revisions(&out), [12, 13, 14]);
        assert_eq!(ring.read(&mut slow, &mut out, ALL), Err(Behind::Overrun));
        assert!(ring.has_news(&slow), "a cursor behind is woken to learn it");
    }

    #[test]
    fn a_reset_puts_every_cursor_behind_and_starts_from_the_new_revision() {
        let mut ring = ring(8, 10, &[11, 12]);
        let mut old = ring.cursor(12).unwrap();
        ring.reset(50);
        assert!(ring.has_news(&old));
        let mut out = Vec::new();
        assert_eq!(ring.read(&mut old, &mut out, ALL), Err(Behind::Reset));
        assert_eq!(ring.cursor(12), None);
        assert_eq!(ring.covered_from(), 50);
        let mut fresh = ring.cursor(50).unwrap();
        ring.push(51, "/k/51".into(), (), 1);
        ring.read(&mut fresh, &mut out, ALL).unwrap();
        assert_eq!(revisions(&out), [51]);
    }

    #[test]
    fn a_buffer_keeps_to_its_byte_budget_and_always_keeps_the_newest_event() {
        let mut ring: Ring<()> = Ring::new(
            Limits {
                events: 100,
                bytes: 10,
            },
            0,
        );
        for r in 1..=4 {
            ring.push(r, format!("/k/{r}"), (), 4);
        }
        // 4 + 4 fit in 10; the third would not.
        assert_eq!(ring.covered_from(), 2);
        ring.push(5, "/k/5".into(), (), 50);
        assert_eq!(ring.covered_from(), 4, "a heavy event pushes the rest out");
        let mut out = Vec::new();
        ring.read(&mut ring.cursor(4).unwrap(), &mut out, ALL)
            .unwrap();
        assert_eq!(revisions(&out), [5]);
    }

    #[test]
    fn a_read_stops_at_its_byte_limit_after_at_least_one_event() {
        let mut ring: Ring<()> = Ring::new(limits(100), 0);
        for (r, weight) in [(1, 30), (2, 30), (3, 30)] {
            ring.push(r, format!("/k/{r}"), (), weight);
        }
        let limit = ReadLimit {
            events: 100,
            bytes: 50,
        };
        let mut cursor = ring.cursor(0).unwrap();
        let mut out = Vec::new();
        ring.read(&mut cursor, &mut out, limit).unwrap();
        assert_eq!(revisions(&out), [1, 2]);
        let small = ReadLimit {
            events: 100,
            bytes: 1,
        };
        ring.read(&mut cursor, &mut out, small).unwrap();
        assert_eq!(revisions(&out), [1, 2, 3]);
    }
}
