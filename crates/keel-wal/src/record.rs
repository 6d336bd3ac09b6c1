//! The record format: encoding, checked decoding and torn-tail classification.
//!
//! Every record is laid out as (integers little-endian):
//!
//! ```text
//! 0       4       8                      8 + body_len        padded to a multiple of 8
//! +-------+-------+------+---------------+-------------------+
//! | len   | crc   | type | payload       | zero padding      |
//! +-------+-------+------+---------------+-------------------+
//! ```
//!
//! - `len` (u32): bits 0..31 hold `body_len` (type byte + payload, at least 1); bit 31 is the
//!   end-of-batch flag, set on the last record of every batch.
//! - `crc` (u32): CRC32C of the `len` field, the body and the padding, seeded with the previous
//!   record's `crc`. Every byte of a segment except the `crc` fields themselves is covered.
//! - `type` (u8) and payload:
//!   - `1` Seed: `seed: u32`. Always the first record of a segment; its own CRC is seeded with
//!     `seed`, which is the last CRC of the previous segment (0 for the very first segment), so
//!     the chain restarts per segment yet links consecutive segments.
//!   - `2` Entry: `index: u64`, then the entry bytes.
//!   - `3` Truncate: `from: u64` (drop entries with index >= from).
//!   - `4` Purge: `upto: u64` (drop entries with index <= upto).
//!   - `5` State: the state bytes.

use crc32c::crc32c_append;

/// Size of the `len` + `crc` header.
const HEADER: usize = 8;
/// End-of-batch flag in the `len` field.
const END_OF_BATCH: u32 = 1 << 31;
/// Largest body a record may carry.
pub(crate) const MAX_BODY: usize = (END_OF_BATCH - 1) as usize;

const SEED: u8 = 1;
const ENTRY: u8 = 2;
const TRUNCATE: u8 = 3;
const PURGE: u8 = 4;
const STATE: u8 = 5;

/// One decoded (or to-be-encoded) record, borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    /// Segment start; carries the CRC chain seed.
    Seed(u32),
    /// A log entry.
    Entry(u64, &'a [u8]),
    /// Drop entries with index >= the value.
    Truncate(u64),
    /// Drop entries with index <= the value.
    Purge(u64),
    /// The latest state blob.
    State(&'a [u8]),
}

impl Record<'_> {
    /// Length of type byte + payload.
    pub(crate) fn body_len(&self) -> usize {
        1 + match self {
            Record::Seed(_) => 4,
            Record::Entry(_, data) => 8 + data.len(),
            Record::Truncate(_) | Record::Purge(_) => 8,
            Record::State(data) => data.len(),
        }
    }
}

/// Bytes a record with `body_len` occupies on disk, padding included.
fn padded(body_len: usize) -> Option<usize> {
    HEADER.checked_add(body_len)?.checked_add(7).map(|n| n & !7)
}

/// Appends `rec` to `buf`, chaining its CRC from `*crc` and leaving the new CRC in `*crc`.
/// The caller guarantees `rec.body_len() <= MAX_BODY`.
pub(crate) fn encode(buf: &mut Vec<u8>, crc: &mut u32, rec: &Record<'_>, end: bool) {
    let body_len = rec.body_len();
    debug_assert!(body_len <= MAX_BODY);
    let start = buf.len();
    let len_field = body_len as u32 | if end { END_OF_BATCH } else { 0 };
    buf.extend_from_slice(&len_field.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    match rec {
        Record::Seed(seed) => {
            buf.push(SEED);
            buf.extend_from_slice(&seed.to_le_bytes());
        }
        Record::Entry(index, data) => {
            buf.push(ENTRY);
            buf.extend_from_slice(&index.to_le_bytes());
            buf.extend_from_slice(data);
        }
        Record::Truncate(from) => {
            buf.push(TRUNCATE);
            buf.extend_from_slice(&from.to_le_bytes());
        }
        Record::Purge(upto) => {
            buf.push(PURGE);
            buf.extend_from_slice(&upto.to_le_bytes());
        }
        Record::State(data) => {
            buf.push(STATE);
            buf.extend_from_slice(data);
        }
    }
    let end_at = start + padded(body_len).unwrap_or(usize::MAX);
    buf.resize(end_at, 0);
    let c = crc32c_append(
        crc32c_append(*crc, &buf[start..start + 4]),
        &buf[start + HEADER..],
    );
    buf[start + 4..start + HEADER].copy_from_slice(&c.to_le_bytes());
    *crc = c;
}

/// A record decoded from a segment.
#[derive(Debug)]
pub(crate) struct Decoded<'a> {
    /// The record itself.
    pub rec: Record<'a>,
    /// Whether it ends its batch.
    pub end: bool,
    /// Offset just past it (padding included).
    pub next: usize,
    /// Its CRC, the seed of the next record.
    pub crc: u32,
}

/// Decodes the record at `off`, chained from `prev`. `None` if it is incomplete, fails its CRC
/// or is malformed.
pub(crate) fn decode(data: &[u8], off: usize, prev: u32) -> Option<Decoded<'_>> {
    let hdr = data.get(off..off.checked_add(HEADER)?)?;
    let len_field = u32::from_le_bytes(hdr[..4].try_into().ok()?);
    let stored = u32::from_le_bytes(hdr[4..].try_into().ok()?);
    let body_len = (len_field & !END_OF_BATCH) as usize;
    let next = off.checked_add(padded(body_len)?)?;
    let rest = data.get(off + HEADER..next)?;
    let crc = crc32c_append(crc32c_append(prev, &hdr[..4]), rest);
    if crc != stored {
        return None;
    }
    let rec = parse(&rest[..body_len])?;
    Some(Decoded {
        rec,
        end: len_field & END_OF_BATCH != 0,
        next,
        crc,
    })
}

fn parse(body: &[u8]) -> Option<Record<'_>> {
    let (&ty, payload) = body.split_first()?;
    let u64_of = |b: &[u8]| b.try_into().ok().map(u64::from_le_bytes);
    Some(match ty {
        SEED => Record::Seed(u32::from_le_bytes(payload.try_into().ok()?)),
        ENTRY if payload.len() >= 8 => Record::Entry(u64_of(&payload[..8])?, &payload[8..]),
        TRUNCATE => Record::Truncate(u64_of(payload)?),
        PURGE => Record::Purge(u64_of(payload)?),
        STATE => Record::State(payload),
        _ => return None,
    })
}

/// The seed a segment's first record claims (0 if it does not look like a Seed record; its
/// CRC check then fails).
pub(crate) fn peek_seed(data: &[u8]) -> u32 {
    match (data.get(HEADER), data.get(HEADER + 1..HEADER + 5)) {
        (Some(&SEED), Some(b)) => b.try_into().map(u32::from_le_bytes).unwrap_or(0),
        _ => 0,
    }
}

/// Whether the bad record at `off` (the chain standing at `prev` before it) is followed by a
/// valid record of a *later* batch. If so, its batch was acknowledged and the damage is
/// corruption; if not, it is a torn tail write. Successors are found through the bad record's
/// length field and chained from its stored CRC, or from its recomputed CRC when only the stored
/// CRC field is damaged. A damaged length field makes successors unreachable, so such damage
/// reads as a torn tail.
pub(crate) fn later_batch_follows(data: &[u8], off: usize, prev: u32) -> bool {
    let Some(hdr) = data.get(off..off + HEADER) else {
        return false;
    };
    let len_field = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
    let stored = u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
    let body_len = (len_field & !END_OF_BATCH) as usize;
    let Some(next) = padded(body_len).and_then(|p| off.checked_add(p)) else {
        return false;
    };
    let Some(rest) = data.get(off + HEADER..next) else {
        return false;
    };
    let computed = crc32c_append(crc32c_append(prev, &hdr[..4]), rest);
    [stored, computed].into_iter().any(|seed| {
        let (mut boundary, mut prev, mut at) = (len_field & END_OF_BATCH != 0, seed, next);
        while let Some(d) = decode(data, at, prev) {
            if boundary {
                return true;
            }
            (boundary, prev, at) = (d.end, d.crc, d.next);
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_chain() {
        let recs = [
            Record::Seed(7),
            Record::Entry(3, b"abc"),
            Record::Truncate(2),
            Record::Purge(1),
            Record::State(b""),
        ];
        let (mut buf, mut crc) = (Vec::new(), 7);
        for (i, r) in recs.iter().enumerate() {
            encode(&mut buf, &mut crc, r, i == 1 || i == 4);
        }
        assert_eq!(buf.len() % 8, 0);
        assert_eq!(peek_seed(&buf), 7);
        let (mut off, mut prev) = (0, 7);
        for (i, r) in recs.iter().enumerate() {
            let d = decode(&buf, off, prev).expect("valid record");
            assert_eq!(&d.rec, r);
            assert_eq!(d.end, i == 1 || i == 4);
            (off, prev) = (d.next, d.crc);
        }
        assert_eq!((off, prev), (buf.len(), crc));
        // Breaking the chain seed breaks the first record.
        assert!(decode(&buf, 0, 8).is_none());
        assert!(decode(&buf, buf.len(), crc).is_none());
    }
}
