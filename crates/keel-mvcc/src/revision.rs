//! Revisions and their on-disk encoding.
//!
//! A revision is etcd's `(main, sub)` pair: `main` is the store revision of a write (one per
//! Put / DeleteRange / Txn that changed something), `sub` orders the changes inside it.
//! In the backend a revision is stored exactly as etcd lays it out, so that `HashKV` hashes
//! the same bytes as etcd: 8 bytes big-endian `main`, `'_'`, 8 bytes big-endian `sub`, and a
//! trailing `'t'` for a tombstone (a deletion).

/// Length of an encoded revision without the tombstone mark.
pub const REV_BYTES_LEN: usize = 17;
/// Length of an encoded tombstone revision.
pub const MARKED_REV_BYTES_LEN: usize = REV_BYTES_LEN + 1;
/// The byte appended to a tombstone's backend key.
pub const MARK_TOMBSTONE: u8 = b't';

/// One etcd revision: the main revision and the sub revision inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rev {
    /// The store revision of the write.
    pub main: i64,
    /// The position of the change inside the write.
    pub sub: i64,
}

impl Rev {
    /// Builds a revision.
    pub const fn new(main: i64, sub: i64) -> Rev {
        Rev { main, sub }
    }

    /// Encodes the revision as a backend key, with the tombstone mark if `tombstone`.
    pub fn to_key(self, tombstone: bool) -> RevKey {
        let mut b = [0u8; MARKED_REV_BYTES_LEN];
        b[..8].copy_from_slice(&(self.main as u64).to_be_bytes());
        b[8] = b'_';
        b[9..17].copy_from_slice(&(self.sub as u64).to_be_bytes());
        let len = if tombstone {
            b[17] = MARK_TOMBSTONE;
            MARKED_REV_BYTES_LEN
        } else {
            REV_BYTES_LEN
        };
        RevKey { bytes: b, len }
    }

    /// Decodes the revision part of a backend key; `None` if the key is too short.
    pub fn from_key(key: &[u8]) -> Option<Rev> {
        if key.len() < REV_BYTES_LEN {
            return None;
        }
        let main = u64::from_be_bytes(key[..8].try_into().ok()?) as i64;
        let sub = u64::from_be_bytes(key[9..17].try_into().ok()?) as i64;
        Some(Rev { main, sub })
    }
}

/// Whether a backend key carries the tombstone mark.
pub fn is_tombstone_key(key: &[u8]) -> bool {
    key.len() == MARKED_REV_BYTES_LEN && key[REV_BYTES_LEN] == MARK_TOMBSTONE
}

/// An encoded backend key (17 bytes, or 18 for a tombstone), kept on the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RevKey {
    bytes: [u8; MARKED_REV_BYTES_LEN],
    len: usize,
}

impl RevKey {
    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_etcd() {
        let k = Rev::new(2, 1).to_key(false);
        assert_eq!(k.as_bytes(), b"\0\0\0\0\0\0\0\x02_\0\0\0\0\0\0\0\x01");
        let t = Rev::new(2, 1).to_key(true);
        assert_eq!(t.as_bytes().len(), 18);
        assert!(is_tombstone_key(t.as_bytes()));
        assert!(!is_tombstone_key(k.as_bytes()));
        assert_eq!(Rev::from_key(t.as_bytes()), Some(Rev::new(2, 1)));
    }

    #[test]
    fn key_order_is_revision_order() {
        let a = Rev::new(3, 9).to_key(false);
        let b = Rev::new(4, 0).to_key(true);
        let c = Rev::new(4, 1).to_key(false);
        assert!(a.as_bytes() < b.as_bytes());
        assert!(b.as_bytes() < c.as_bytes());
        assert!(Rev::new(3, 9) < Rev::new(4, 0));
    }
}
