//! What a watcher watches: one key, a key range, or every key from a key on.

/// The keys of one watcher, normalised as etcd's watch server does (`range_end` of `"\0"`
/// means "from `key` on").
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WatchRange {
    /// Exactly one key.
    Key(Vec<u8>),
    /// Keys in `[start, end)`.
    Span(Vec<u8>, Vec<u8>),
    /// Keys at or after the key.
    From(Vec<u8>),
}

/// A range etcd refuses: `range_end` set and not after `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("mvcc: watcher range is empty")]
pub struct EmptyRange;

impl WatchRange {
    /// The range of a create request (an empty `key` already rewritten to `"\0"`).
    pub fn new(key: Vec<u8>, range_end: Vec<u8>) -> Result<WatchRange, EmptyRange> {
        match range_end.as_slice() {
            [] => Ok(WatchRange::Key(key)),
            [0] => Ok(WatchRange::From(key)),
            end if key.as_slice() < end => Ok(WatchRange::Span(key, range_end)),
            _ => Err(EmptyRange),
        }
    }

    /// Whether `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            WatchRange::Key(k) => k.as_slice() == key,
            WatchRange::Span(start, end) => start.as_slice() <= key && key < end.as_slice(),
            WatchRange::From(start) => start.as_slice() <= key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_like_etcd() {
        let r = WatchRange::new(b"a".to_vec(), vec![]).unwrap();
        assert!(r.contains(b"a") && !r.contains(b"ab"));
        let r = WatchRange::new(b"a".to_vec(), b"b".to_vec()).unwrap();
        assert!(r.contains(b"a") && r.contains(b"az") && !r.contains(b"b"));
        let r = WatchRange::new(vec![0], vec![0]).unwrap();
        assert!(r.contains(b"\0") && r.contains(b"zzz"));
        assert_eq!(
            WatchRange::new(b"b".to_vec(), b"a".to_vec()),
            Err(EmptyRange)
        );
        assert_eq!(
            WatchRange::new(b"a".to_vec(), b"a".to_vec()),
            Err(EmptyRange)
        );
    }
}
