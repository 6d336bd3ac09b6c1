//! Keys and values as etcd's `benchmark` makes them, and a small fast random number generator.
//!
//! A key is `key-size` bytes: the key number written as a Go `binary.PutVarint` (zig-zag
//! varint) followed by zero bytes, so there are exactly `key-space-size` distinct keys.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;

/// Number of bytes `binary.PutVarint(n)` writes.
pub fn varint_len(n: i64) -> usize {
    let mut zigzag = ((n << 1) ^ (n >> 63)) as u64;
    let mut len = 1;
    while zigzag >= 0x80 {
        zigzag >>= 7;
        len += 1;
    }
    len
}

/// Writes `n` like Go's `binary.PutVarint` into the front of `buf`, zeroing the rest.
///
/// `buf` must be at least [`varint_len`]`(n)` bytes long.
pub fn put_varint(buf: &mut [u8], n: i64) {
    buf.fill(0);
    let mut zigzag = ((n << 1) ^ (n >> 63)) as u64;
    let mut i = 0;
    while zigzag >= 0x80 {
        buf[i] = (zigzag as u8) | 0x80;
        zigzag >>= 7;
        i += 1;
    }
    buf[i] = zigzag as u8;
}

/// Makes the keys of a benchmark: `prefix` followed by a `key_size`-byte key number.
#[derive(Debug, Clone)]
pub struct KeyMaker {
    prefix: Vec<u8>,
    key_size: usize,
    key_space_size: u64,
}

impl KeyMaker {
    /// Checks that every key number below `key_space_size` fits in `key_size` bytes.
    pub fn new(prefix: &[u8], key_size: usize, key_space_size: u64) -> anyhow::Result<Self> {
        if key_space_size == 0 {
            bail!("expected positive --key-space-size, got 0");
        }
        let largest = i64::try_from(key_space_size - 1)
            .map_err(|_| anyhow::anyhow!("--key-space-size {key_space_size} is too large"))?;
        let needed = varint_len(largest);
        if key_size < needed {
            bail!(
                "--key-size {key_size} is too small for --key-space-size {key_space_size}: \
                 keys need at least {needed} bytes"
            );
        }
        Ok(Self {
            prefix: prefix.to_vec(),
            key_size,
            key_space_size,
        })
    }

    /// The key with number `n mod key-space-size`.
    pub fn key(&self, n: u64) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.prefix.len() + self.key_size);
        key.extend_from_slice(&self.prefix);
        key.resize(self.prefix.len() + self.key_size, 0);
        put_varint(
            &mut key[self.prefix.len()..],
            (n % self.key_space_size) as i64,
        );
        key
    }

    /// Number of distinct keys.
    pub fn key_space_size(&self) -> u64 {
        self.key_space_size
    }
}

/// A SplitMix64 generator: fast, small, and plenty for picking keys and filling values.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded from the clock and `stream`, so that workers draw different keys.
    pub fn seeded(stream: u64) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self(nanos ^ stream.wrapping_mul(0xA076_1D64_78BD_642F))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number uniformly drawn from `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_matches_go() {
        // Go: binary.PutVarint(buf, n) for n = 0, 1, 63, 64, 999999.
        let cases: [(i64, &[u8]); 5] = [
            (0, &[0x00]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (64, &[0x80, 0x01]),
            (999_999, &[0xfe, 0x88, 0x7a]),
        ];
        for (n, want) in cases {
            let mut buf = [0xffu8; 8];
            put_varint(&mut buf, n);
            assert_eq!(&buf[..want.len()], want, "n = {n}");
            assert!(buf[want.len()..].iter().all(|&b| b == 0));
            assert_eq!(varint_len(n), want.len());
        }
    }

    #[test]
    fn keys_are_distinct_and_sized() {
        let maker = KeyMaker::new(b"p/", 8, 1000).unwrap();
        let keys: std::collections::HashSet<_> = (0..2000).map(|n| maker.key(n)).collect();
        assert_eq!(keys.len(), 1000);
        assert!(keys.iter().all(|k| k.len() == 10 && k.starts_with(b"p/")));
    }

    #[test]
    fn key_size_too_small() {
        assert!(KeyMaker::new(b"", 2, 1_000_000).is_err());
        assert!(KeyMaker::new(b"", 3, 1_000_000).is_ok());
        assert!(KeyMaker::new(b"", 8, 0).is_err());
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = Rng::seeded(7);
        assert!((0..10_000).all(|_| rng.below(13) < 13));
        assert_eq!(rng.bytes(13).len(), 13);
    }
}
