//! The synced watchers indexed by what they watch, so a committed event finds its watchers
//! without visiting the others: single keys by hash, and every distinct range once however
//! many watchers share it (10,000 watchers on one prefix cost one range check per event).

use std::collections::{BTreeSet, HashMap};

use super::range::WatchRange;

/// A watcher's address: its stream and its watch id on that stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatcherRef {
    /// The stream.
    pub stream: u64,
    /// The watch id on the stream.
    pub id: i64,
}

/// Watchers grouped by their key or range.
#[derive(Debug, Default)]
pub struct WatcherGroups {
    keys: HashMap<Vec<u8>, BTreeSet<WatcherRef>>,
    ranges: HashMap<WatchRange, BTreeSet<WatcherRef>>,
    len: usize,
}

impl WatcherGroups {
    /// Adds a watcher of `range`.
    pub fn add(&mut self, range: &WatchRange, w: WatcherRef) {
        let set = match range {
            WatchRange::Key(k) => self.keys.entry(k.clone()).or_default(),
            other => self.ranges.entry(other.clone()).or_default(),
        };
        if set.insert(w) {
            self.len += 1;
        }
    }

    /// Removes a watcher of `range`; whether it was there.
    pub fn remove(&mut self, range: &WatchRange, w: WatcherRef) -> bool {
        let removed = match range {
            WatchRange::Key(k) => remove_from(&mut self.keys, k.as_slice(), w),
            other => remove_from(&mut self.ranges, other, w),
        };
        if removed {
            self.len -= 1;
        }
        removed
    }

    /// Calls `f` with every watcher whose range holds `key`.
    pub fn for_each_match(&self, key: &[u8], mut f: impl FnMut(WatcherRef)) {
        if let Some(set) = self.keys.get(key) {
            set.iter().copied().for_each(&mut f);
        }
        for (range, set) in &self.ranges {
            if range.contains(key) {
                set.iter().copied().for_each(&mut f);
            }
        }
    }

    /// Number of watchers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no watcher.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

fn remove_from<K, Q>(map: &mut HashMap<K, BTreeSet<WatcherRef>>, key: &Q, w: WatcherRef) -> bool
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
{
    let Some(set) = map.get_mut(key) else {
        return false;
    };
    let removed = set.remove(&w);
    if set.is_empty() {
        map.remove(key);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_key_and_range_watchers() {
        let mut g = WatcherGroups::default();
        let w = |id| WatcherRef { stream: 1, id };
        g.add(&WatchRange::Key(b"a".to_vec()), w(0));
        g.add(&WatchRange::Span(b"a".to_vec(), b"b".to_vec()), w(1));
        g.add(&WatchRange::Span(b"a".to_vec(), b"b".to_vec()), w(2));
        g.add(&WatchRange::From(b"c".to_vec()), w(3));
        let matches = |key: &[u8]| {
            let mut out = Vec::new();
            g.for_each_match(key, |r| out.push(r.id));
            out.sort();
            out
        };
        assert_eq!(matches(b"a"), vec![0, 1, 2]);
        assert_eq!(matches(b"ab"), vec![1, 2]);
        assert_eq!(matches(b"d"), vec![3]);
        assert_eq!(g.len(), 4);
        assert!(g.remove(&WatchRange::Span(b"a".to_vec(), b"b".to_vec()), w(1)));
        assert!(!g.remove(&WatchRange::Span(b"a".to_vec(), b"b".to_vec()), w(1)));
        assert_eq!(g.len(), 3);
    }
}
