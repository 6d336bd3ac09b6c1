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
    let next = span(data, off)?;
    let hdr = &data[off..off + HEADER];
    let len_field = u32::from_le_bytes(hdr[..4].try_into().ok()?);
    let stored = u32::from_le_bytes(hdr[4..].try_into().ok()?);
    let body_len = (len_field & !END_OF_BATCH) as usize;
    let rest = &data[off + HEADER..next];
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

/// Where the record claimed by the header at `off` ends, if the header is plausible: a known
/// type with a size that fits it, inside `data`. Checked before any CRC is computed.
fn span(data: &[u8], off: usize) -> Option<usize> {
    let hdr = data.get(off..off.checked_add(HEADER + 1)?)?;
    let body_len = (u32::from_le_bytes(hdr[..4].try_into().ok()?) & !END_OF_BATCH) as usize;
    let fits = match hdr[HEADER] {
        SEED => body_len == 5,
        TRUNCATE | PURGE => body_len == 9,
        ENTRY => body_len >= 9,
        STATE => body_len >= 1,
        _ => false,
    };
    let next = off.checked_add(padded(body_len)?)?;
    (fits && next <= data.len()).then_some(next)
}

/// Whether the length field at `off` carries the end-of-batch flag.
fn ends_batch(data: &[u8], off: usize) -> bool {
    data.get(off + 3).is_some_and(|b| b & 0x80 != 0)
}

/// The CRC stored in the header at `off`.
fn stored_crc(data: &[u8], off: usize) -> Option<u32> {
    let b = data.get(off + 4..off + HEADER)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

/// How many bytes, per byte scanned, [`scan_after_damage`] may checksum before it gives up.
const SCAN_BUDGET_PER_BYTE: usize = 4;

/// The sector size a torn write is assumed to be made of: a sector is written whole or not at
/// all, and one never written reads back as zeros.
const SECTOR: usize = 512;

/// What follows a bad record, as found by [`scan_after_damage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterDamage {
    /// No valid record: the damage reaches the end of the data.
    Nothing,
    /// Valid records that may belong to the bad record's own batch; the first starts here.
    SameBatch(usize),
    /// A valid record of a later batch (or the scan gave up, which counts the same).
    LaterBatch,
}

/// Looks for valid records after the bad record at `off` (the chain standing at `prev` before
/// it). A record of a *later* batch means the bad record's batch was acknowledged, so the
/// damage is corruption; records of its own batch only are possible for a torn write.
///
/// Every 8-aligned offset `q` after `off` is tried as the start of a record, chained from an
/// anchor: the stored CRC of a header that ends right before `q` by its own length field, or
/// the bad record's stored CRC at any `q` (its length field may be the damaged part), or the
/// bad record's recomputed CRC right after it (when only its CRC field is damaged). A record
/// that decodes belongs to a later batch if its anchor carries the end-of-batch flag, or if its
/// own chain passes a batch end and continues with another valid record. Zeros never decode
/// (a length of 0 is no record). Chains already followed are not followed again, and the work
/// is capped: past the cap the damage cannot be shown to be torn and counts as corruption.
pub(crate) fn scan_after_damage(data: &[u8], off: usize, prev: u32) -> AfterDamage {
    let Some(bad_crc) = stored_crc(data, off) else {
        return AfterDamage::Nothing;
    };
    let bad_end = ends_batch(data, off);
    let mut budget = SCAN_BUDGET_PER_BYTE * (data.len() - off) + (1 << 20);
    let mut walked = std::collections::HashSet::new();
    let mut first = None;
    // Follows the chain from `q`, seeded by `seed`, after an anchor that ends its batch if
    // `boundary`. `true` if it proves a later batch or the budget is spent.
    let mut later = |q: usize, seed: u32, mut boundary: bool| -> bool {
        let (mut at, mut prev) = (q, seed);
        while !walked.contains(&at) {
            let Some(next) = span(data, at) else {
                break;
            };
            let Some(rest) = budget.checked_sub(next - at) else {
                return true;
            };
            budget = rest;
            let Some(d) = decode(data, at, prev).filter(|d| !matches!(d.rec, Record::Seed(_)))
            else {
                break;
            };
            if boundary {
                return true;
            }
            walked.insert(at);
            first = Some(first.map_or(at, |f: usize| f.min(at)));
            (boundary, prev, at) = (d.end, d.crc, d.next);
        }
        false
    };
    let mut found = false;
    if let Some(next) = span(data, off) {
        let hdr = &data[off..off + HEADER];
        let computed = crc32c_append(crc32c_append(prev, &hdr[..4]), &data[off + HEADER..next]);
        found = later(next, computed, bad_end);
    }
    let mut q = off + HEADER;
    while !found && q + HEADER <= data.len() {
        found = later(q, bad_crc, bad_end)
            || match (span(data, q), stored_crc(data, q)) {
                (Some(next), Some(crc)) => later(next, crc, ends_batch(data, q)),
                _ => false,
            };
        q += HEADER;
    }
    match (found, first) {
        (true, _) => AfterDamage::LaterBatch,
        (false, Some(at)) => AfterDamage::SameBatch(at),
        (false, None) => AfterDamage::Nothing,
    }
}

/// Whether the bad record at `off`, with nothing valid after it, is what a torn write leaves:
/// part of it was never written (a zeroed sector, see [`zeroed_sector`]) or, only where the
/// file grows with its writes (`may_end_early`), it runs past the end of the data by its own
/// length field (the write was cut short). A record that is all there with no such gap has
/// been damaged after it was written: corruption (etcd's `isTornEntry` draws the same line).
pub(crate) fn torn_record(data: &[u8], off: usize, may_end_early: bool) -> bool {
    match record_end(data, off) {
        Some(end) => zeroed_sector(data, off, end),
        None => may_end_early,
    }
}

/// Where the record whose header is at `off` ends by its length field, if that is inside
/// `data`.
fn record_end(data: &[u8], off: usize) -> Option<usize> {
    let hdr = data.get(off..off.checked_add(HEADER)?)?;
    let body_len = (u32::from_le_bytes(hdr[..4].try_into().ok()?) & !END_OF_BATCH) as usize;
    off.checked_add(padded(body_len)?)
        .filter(|&end| end <= data.len())
}

/// Whether `data[from..to]` holds a whole never-written sector: a piece between two sector
/// boundaries (or `from`/`to`) that is all zeros. Damage without one is not a torn write.
pub(crate) fn zeroed_sector(data: &[u8], from: usize, to: usize) -> bool {
    let mut at = from;
    while at < to {
        let end = (at / SECTOR + 1) * SECTOR;
        let piece = &data[at..end.min(to)];
        if piece.iter().all(|&b| b == 0) {
            return true;
        }
        at = end;
    }
    false
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
