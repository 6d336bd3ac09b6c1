//! [`Selection`]: the events of one resync read that one kind of watcher receives, cut into
//! catch-up responses without copying.
//!
//! A resync round serves up to 512 watchers from one backend read. Watchers with the same keys
//! and filters receive the same events, so the read is filtered once per distinct filter and
//! every such watcher's responses are windows on that one list: a round costs a few binary
//! searches per watcher instead of a pass over (and a copy of) the whole read.

use std::sync::Arc;

use super::event::{EventRun, SharedEvent};

/// Events in revision order, with the index where each revision starts.
#[derive(Debug, Clone)]
pub struct Selection {
    events: Arc<[SharedEvent]>,
    /// Index of the first event of each revision, ascending.
    revision_starts: Vec<usize>,
}

impl Selection {
    /// The selection of `events`, which must be in revision order.
    pub fn new(events: impl IntoIterator<Item = SharedEvent>) -> Selection {
        let events: Arc<[SharedEvent]> = events.into_iter().collect();
        let revision_starts = (0..events.len())
            .filter(|&i| i == 0 || events[i - 1].revision() != events[i].revision())
            .collect();
        Selection {
            events,
            revision_starts,
        }
    }

    /// The events of revisions `floor..next`, in runs of at most `max_revisions` revisions,
    /// each with the first revision after it (`next` for the last run).
    pub fn runs(
        &self,
        floor: i64,
        next: i64,
        max_revisions: usize,
    ) -> impl Iterator<Item = (EventRun, i64)> + '_ {
        let max_revisions = max_revisions.max(1);
        let end = self.events.partition_point(|e| e.revision() < next);
        let first = self.events.partition_point(|e| e.revision() < floor);
        // `first` starts a revision, so it is in `revision_starts` (or is `end`).
        let mut k = self.revision_starts.partition_point(|&i| i < first);
        std::iter::from_fn(move || {
            let start = *self.revision_starts.get(k).filter(|&&i| i < end)?;
            k += max_revisions;
            let stop = self.revision_starts.get(k).map_or(end, |&i| i.min(end));
            let after = self.events.get(stop).filter(|_| stop < end);
            let after = after.map_or(next, SharedEvent::revision);
            Some((EventRun::new(self.events.clone(), start..stop), after))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::mvccpb::{Event, KeyValue};

    fn event(rev: i64) -> SharedEvent {
        SharedEvent::new(Event {
            kv: Some(KeyValue {
                key: b"k".to_vec(),
                mod_revision: rev,
                create_revision: 1,
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// Each run as (revisions of its events, revision after it).
    fn runs(s: &Selection, floor: i64, next: i64, max: usize) -> Vec<(Vec<i64>, i64)> {
        s.runs(floor, next, max)
            .map(|(run, after)| (run.iter().map(SharedEvent::revision).collect(), after))
            .collect()
    }

    #[test]
    fn runs_hold_whole_revisions_and_respect_the_bounds() {
        let s = Selection::new([2, 2, 3, 5, 5, 5, 6, 9].map(event));
        assert_eq!(
            runs(&s, 0, 10, 2),
            vec![(vec![2, 2, 3], 5), (vec![5, 5, 5, 6], 9), (vec![9], 10)]
        );
        assert_eq!(runs(&s, 3, 9, 2), vec![(vec![3, 5, 5, 5], 6), (vec![6], 9)]);
        assert_eq!(runs(&s, 4, 6, 1000), vec![(vec![5, 5, 5], 6)]);
        assert_eq!(runs(&s, 7, 9, 1000), vec![]);
        assert_eq!(runs(&s, 10, 12, 1000), vec![]);
        assert_eq!(runs(&Selection::new([]), 0, 5, 1000), vec![]);
    }

    #[test]
    fn runs_match_a_plain_walk() {
        let revs: Vec<i64> = (1..200).flat_map(|r| vec![r; (r % 3) as usize]).collect();
        let s = Selection::new(revs.iter().map(|&r| event(r)));
        for (floor, next, max) in [(0, 300, 7), (5, 150, 1), (50, 51, 3), (17, 190, 1000)] {
            let got: Vec<i64> = runs(&s, floor, next, max)
                .into_iter()
                .flat_map(|r| r.0)
                .collect();
            let want: Vec<i64> = revs
                .iter()
                .copied()
                .filter(|r| (floor..next).contains(r))
                .collect();
            assert_eq!(got, want, "{floor}..{next} by {max}");
            for (run, after) in runs(&s, floor, next, max) {
                let distinct = run.windows(2).filter(|w| w[0] != w[1]).count() + 1;
                assert!(distinct <= max);
                assert!(after > *run.last().unwrap());
            }
        }
    }
}
