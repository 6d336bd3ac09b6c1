//! keel's segmented write-ahead log: the source of truth for durability.
//!
//! The log is a directory of segment files named `{seq:016x}-{first_index:016x}.wal` (`seq`
//! grows by one per segment, `first_index` is the last index + 1 when the segment was created),
//! each a sequence of length-prefixed records with a chained CRC32C (byte layout in the `record`
//! module). A [`Batch`] is encoded into one buffer, written with one `write_all` and made durable
//! with one `fdatasync`; its last record carries an end-of-batch flag, so recovery applies
//! batches whole or not at all.
//!
//! Every segment begins with a header batch: a Seed record (the CRC chain seed, equal to the
//! previous segment's last CRC), then copies of the current Purge point and State, so deleting
//! old segments never loses them. A new segment is started before a write once the current one
//! has reached [`WalOptions::segment_bytes`]; batches never span segments.
//!
//! On [`Wal::open`] every segment is read and verified in order. A torn write (the last batch
//! cut short, or with sectors that never reached the disk and read back as zeros) can only
//! damage the tail of the last segment: such damage is an unacknowledged write, and the file is
//! truncated to the end of the last complete batch and fsynced. After a bad record the rest of
//! the segment is scanned for valid records at every aligned offset (not only where the bad
//! record's possibly damaged length points). Any other damage is [`WalError::Corrupt`] and
//! nothing is truncated: in a non-last segment, in a segment header, a broken chain between
//! segments, a missing segment, a bad record followed by a valid record of a later batch, or
//! a bad record without a zeroed sector followed by any valid record.
//!
//! The live segment is kept zero-filled ahead of the write position, a few MiB at a time, so
//! an append overwrites blocks that already exist: its fdatasync then flushes data only, with
//! no file-size or block-allocation metadata to journal (measured here: ~1.5x faster syncs).
//! Each extension is made durable (written and fdatasynced) before any batch is written into
//! it, and always reaches at least [`TAIL_ZEROS`] bytes past the batch, so on disk a live
//! segment's file always extends past every write made to it. Hence a torn write can only
//! leave zeros or a partial batch *inside* the file, and a last segment that ends within
//! [`TAIL_ZEROS`] of its last complete batch, or inside a record, has been truncated after
//! the fact: [`WalError::Corrupt`], as acknowledged batches may be gone. On open, a torn
//! tail is overwritten with zeros (the file keeps its length). A new segment is created
//! zero-filled; the finished one is cut to its exact length after that, so a crash between
//! the two leaves zeros at the end of a non-last segment, which the CRC chain into the next
//! segment shows to be harmless.
//!
//! Without zero-fill ([`WalOptions::zero_fill`] false) the file grows with each write, a
//! torn write may also cut the file short, and the tail is trimmed on open; a truncation at a
//! batch boundary then cannot be told from a clean end.

pub mod dir;
mod record;
mod segment;
pub mod staging;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use record::Record;
use segment::Segment;

/// Tuning knobs of a [`Wal`].
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// Size at which the current segment is closed and a new one started.
    pub segment_bytes: u64,
    /// Keep the live segment zero-filled ahead of the write position (see the crate docs).
    pub zero_fill: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        Self {
            segment_bytes: 64 * 1024 * 1024,
            zero_fill: true,
        }
    }
}

/// What [`Wal::open`] found on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// The latest State written, if any.
    pub state: Option<Vec<u8>>,
    /// Highest index passed to purge (0 if never).
    pub purged: u64,
    /// Surviving entries, ascending, contiguous, all > `purged`.
    pub entries: Vec<(u64, Vec<u8>)>,
}

/// One durable append: applied in the order truncate, entries, state; one fdatasync.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Drop entries with index >= this first.
    pub truncate_from: Option<u64>,
    /// Entries continuing the log: the first index is last surviving index + 1 (or anything
    /// above the purge point when the log is empty), then ascending by one.
    pub entries: Vec<(u64, Vec<u8>)>,
    /// New state to record.
    pub state: Option<Vec<u8>>,
}

/// Cost of one [`Wal::append`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendStats {
    /// Bytes written to the segment.
    pub bytes: u64,
    /// Time spent in fdatasync.
    pub sync: Duration,
}

/// Errors of the write-ahead log.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// An I/O error from the file system.
    #[error("wal i/o: {0}")]
    Io(#[from] io::Error),
    /// A damaged or inconsistent record that cannot be a torn tail write.
    #[error("wal corrupt: {} at offset {offset}", segment.display())]
    Corrupt {
        /// The segment file holding the damage.
        segment: PathBuf,
        /// Byte offset of the first bad record in it.
        offset: u64,
    },
    /// An entry index that does not continue the log.
    #[error("wal gap: expected index {expected}, got {got}")]
    Gap {
        /// The index that would continue the log (the lowest allowed when the log is empty).
        expected: u64,
        /// The index given.
        got: u64,
    },
    /// An entry or state too large for one record.
    #[error("wal record too large: {len} bytes")]
    TooLarge {
        /// Size of the offending payload.
        len: usize,
    },
    /// An earlier write or segment rollover failed; the log must be reopened.
    #[error("wal unusable after an earlier write failure; reopen it")]
    Failed,
}

/// How far ahead of the write position the live segment is zero-filled.
const ZERO_FILL_BYTES: u64 = 4 * 1024 * 1024;

/// Zeros a zero-filled live segment always holds after its last batch (one record header).
pub const TAIL_ZEROS: u64 = 8;

/// A segmented write-ahead log open for appending.
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    opts: WalOptions,
    /// Segments on disk, ascending; the last one is being appended to.
    segments: Vec<Segment>,
    /// The last segment, positioned at `offset`.
    file: File,
    /// Bytes of valid records in the last segment.
    offset: u64,
    /// Length of the last segment's file: valid records, then zeros.
    allocated: u64,
    /// CRC of the last record written.
    crc: u32,
    /// First and last surviving entry index, if any.
    range: Option<(u64, u64)>,
    purged: u64,
    state: Option<Vec<u8>>,
    /// Reused encoding buffer.
    buf: Vec<u8>,
    failed: bool,
}

impl Wal {
    /// Whether `dir` holds a log: at least one segment. [`Wal::open`] starts an empty log
    /// where there is none, so a caller that knows a log was created before checks this first.
    pub fn exists(dir: &Path) -> Result<bool, WalError> {
        Ok(segment::any(dir)?)
    }

    /// Opens (creating `dir`, durably, and a first segment if missing) the log in `dir`,
    /// repairing a torn tail, and returns it with everything it holds.
    pub fn open(dir: &Path, opts: WalOptions) -> Result<(Wal, Recovered), WalError> {
        dir::create_all(dir)?;
        let segments = segment::list(dir)?;
        let mut replay = Replay::default();
        let Some(last) = segments.last() else {
            let (header, crc) = header(0, 0, None);
            let len = header.len() as u64;
            let alloc = opts.initial_allocation(len);
            let (seg, file) = segment::create(dir, 0, 1, &header, alloc)?;
            let wal = Self::assemble(dir, opts, vec![seg], file, len, alloc, crc, replay);
            return Ok(wal);
        };
        let mut end = SegmentEnd { len: 0, crc: 0 };
        let mut allocated = 0;
        for (i, seg) in segments.iter().enumerate() {
            let corrupt = |offset: usize| WalError::Corrupt {
                segment: seg.path.clone(),
                offset: offset as u64,
            };
            if i > 0 && segments[i - 1].seq.checked_add(1) != Some(seg.seq) {
                return Err(corrupt(0));
            }
            let data = fs::read(&seg.path)?;
            let is_last = i + 1 == segments.len();
            let tail = match (is_last, opts.zero_fill) {
                (false, _) => Tail::Closed,
                (true, true) => Tail::ZeroFilled,
                (true, false) => Tail::Grown,
            };
            end = replay
                .segment(&data, (i > 0).then_some(end.crc), tail)
                .map_err(corrupt)?;
            if is_last {
                allocated = repair_tail(&seg.path, &data, end.len, opts.zero_fill)?;
            } else if end.len < data.len() {
                // Finish a cut a crash interrupted (only zeros follow `end`): a finished
                // segment ends at its records, so losing the segments after it later is
                // still seen as corruption rather than as a clean end.
                cut(
                    &OpenOptions::new().write(true).open(&seg.path)?,
                    end.len as u64,
                )?;
            }
        }
        // A first segment other than seq 0 exists only because purge removed the ones before
        // it, which it does only up to the durable purge point: missing oldest segments.
        let first = &segments[0];
        if first.seq != 0 && first.first_index.saturating_sub(1) > replay.purged {
            return Err(WalError::Corrupt {
                segment: first.path.clone(),
                offset: 0,
            });
        }
        let file = OpenOptions::new().read(true).write(true).open(&last.path)?;
        let offset = end.len as u64;
        Ok(Self::assemble(
            dir, opts, segments, file, offset, allocated, end.crc, replay,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        dir: &Path,
        opts: WalOptions,
        segments: Vec<Segment>,
        file: File,
        offset: u64,
        allocated: u64,
        crc: u32,
        replay: Replay,
    ) -> (Wal, Recovered) {
        let range = match (replay.entries.first(), replay.entries.last()) {
            (Some(f), Some(l)) => Some((f.0, l.0)),
            _ => None,
        };
        let wal = Wal {
            dir: dir.to_path_buf(),
            opts,
            segments,
            file,
            offset,
            allocated,
            crc,
            range,
            purged: replay.purged,
            state: replay.state.clone(),
            buf: Vec::new(),
            failed: false,
        };
        let rec = Recovered {
            state: replay.state,
            purged: replay.purged,
            entries: replay.entries,
        };
        (wal, rec)
    }

    /// Durably appends `batch` (truncate, entries, state) with one write and one fdatasync.
    /// A gap or an index going backwards is [`WalError::Gap`] and writes nothing.
    pub fn append(&mut self, batch: &Batch) -> Result<AppendStats, WalError> {
        self.check_usable()?;
        let mut range = self.range;
        if let Some(from) = batch.truncate_from {
            range =
                range.and_then(|(first, last)| (from > first).then(|| (first, last.min(from - 1))));
        }
        let mut last = range.map(|r| r.1);
        for (index, data) in &batch.entries {
            let ok = match last {
                Some(l) => l.checked_add(1) == Some(*index),
                None => *index > self.purged,
            };
            if !ok {
                let expected = last.unwrap_or(self.purged).saturating_add(1);
                return Err(WalError::Gap {
                    expected,
                    got: *index,
                });
            }
            check_size(&Record::Entry(*index, data))?;
            last = Some(*index);
        }
        if let Some(state) = &batch.state {
            check_size(&Record::State(state))?;
        }
        if let (Some(first), Some(last)) = (batch.entries.first(), last) {
            range = Some((range.map_or(first.0, |r| r.0), last));
        }

        let truncate = batch.truncate_from.map(Record::Truncate);
        let entries = batch.entries.iter().map(|(i, d)| Record::Entry(*i, d));
        let state = batch.state.as_deref().map(Record::State);
        let mut records = truncate.into_iter().chain(entries).chain(state).peekable();
        if records.peek().is_none() {
            return Ok(AppendStats::default());
        }
        self.roll_if_full()?;
        self.buf.clear();
        let mut crc = self.crc;
        while let Some(rec) = records.next() {
            record::encode(&mut self.buf, &mut crc, &rec, records.peek().is_none());
        }
        let sync = self.write_buf(crc)?;
        self.range = range;
        if let Some(state) = &batch.state {
            let kept = self.state.get_or_insert_with(Vec::new);
            kept.clear();
            kept.extend_from_slice(state);
        }
        Ok(AppendStats {
            bytes: self.buf.len() as u64,
            sync,
        })
    }

    /// Drops entries with index <= `upto` (durably, with a Purge record) and deletes the oldest
    /// segment files holding nothing beyond the purge point, never the current one.
    pub fn purge(&mut self, upto: u64) -> Result<(), WalError> {
        self.check_usable()?;
        if upto > self.purged {
            self.roll_if_full()?;
            self.buf.clear();
            let mut crc = self.crc;
            record::encode(&mut self.buf, &mut crc, &Record::Purge(upto), true);
            self.write_buf(crc)?;
            self.purged = upto;
            self.range = self
                .range
                .filter(|&(_, last)| last > upto)
                .map(|(first, last)| (first.max(upto + 1), last));
        }
        // Everything surviving in segments before `segments[1]` was <= its first_index - 1 when
        // it was created; later truncations only removed entries. Delete a prefix only.
        let mut removed = 0;
        while self.segments.len() > removed + 1
            && self.segments[removed + 1].first_index.saturating_sub(1) <= self.purged
        {
            fs::remove_file(&self.segments[removed].path)?;
            removed += 1;
        }
        if removed > 0 {
            self.segments.drain(..removed);
            dir::sync(&self.dir)?;
        }
        Ok(())
    }

    /// Index of the last surviving entry: 0 if the log is empty, the purge point if everything
    /// has been purged.
    pub fn last_index(&self) -> u64 {
        self.range.map_or(self.purged, |r| r.1)
    }

    /// Number of segment files on disk.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The directory holding the segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn check_usable(&self) -> Result<(), WalError> {
        if self.failed {
            Err(WalError::Failed)
        } else {
            Ok(())
        }
    }

    /// Writes `self.buf` at the end of the current segment and fdatasyncs it; `crc` is the
    /// chain value after it. Any failure leaves the log unusable.
    fn write_buf(&mut self, crc: u32) -> Result<Duration, WalError> {
        let result = self
            .zero_fill_ahead()
            .and_then(|()| self.file.write_all_at(&self.buf, self.offset))
            .and_then(|()| {
                let start = Instant::now();
                self.file.sync_data().map(|()| start.elapsed())
            });
        match result {
            Ok(sync) => {
                self.offset += self.buf.len() as u64;
                self.crc = crc;
                Ok(sync)
            }
            Err(e) => {
                self.failed = true;
                Err(e.into())
            }
        }
    }

    /// Extends the zero-filled region of the live segment, durably, to cover the pending
    /// write and [`TAIL_ZEROS`] after it.
    fn zero_fill_ahead(&mut self) -> io::Result<()> {
        let needed = self.offset + self.buf.len() as u64 + TAIL_ZEROS;
        if !self.opts.zero_fill || needed <= self.allocated {
            return Ok(());
        }
        let target = needed.max(self.allocated + self.opts.zero_fill_chunk());
        let zeros = vec![0u8; (target - self.allocated) as usize];
        self.file.write_all_at(&zeros, self.allocated)?;
        self.file.sync_data()?;
        self.allocated = target;
        Ok(())
    }

    /// Starts a new segment if the current one has reached the size limit.
    fn roll_if_full(&mut self) -> Result<(), WalError> {
        if self.offset < self.opts.segment_bytes {
            return Ok(());
        }
        let seq = self.segments.last().map_or(0, |s| s.seq + 1);
        let first_index = self.last_index().saturating_add(1);
        let (header, crc) = header(self.crc, self.purged, self.state.as_deref());
        let len = header.len() as u64;
        let alloc = self.opts.initial_allocation(len);
        let (seg, file) = match segment::create(&self.dir, seq, first_index, &header, alloc) {
            Ok(created) => created,
            Err(e) => {
                self.failed = true;
                return Err(e.into());
            }
        };
        // The finished segment keeps exactly its records; a crash before this cut leaves
        // zeros after them, which open accepts in a non-last segment.
        let finished = std::mem::replace(&mut self.file, file);
        if self.allocated > self.offset
            && let Err(e) = cut(&finished, self.offset)
        {
            self.failed = true;
            return Err(e.into());
        }
        self.segments.push(seg);
        self.offset = len;
        self.allocated = alloc;
        self.crc = crc;
        Ok(())
    }
}

impl WalOptions {
    /// How much a zero-filled segment grows at a time.
    fn zero_fill_chunk(&self) -> u64 {
        ZERO_FILL_BYTES.min(self.segment_bytes.max(1))
    }

    /// The length a new segment whose header is `header_len` bytes is created with.
    fn initial_allocation(&self, header_len: u64) -> u64 {
        if self.zero_fill {
            header_len + self.zero_fill_chunk().max(TAIL_ZEROS)
        } else {
            header_len
        }
    }
}

/// How the end of a segment may look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// A finished segment: its records, then possibly zeros (a crash before it was cut).
    Closed,
    /// The live, zero-filled segment: the file extends past every write made to it.
    ZeroFilled,
    /// The live segment without zero-fill: a torn write may also cut the file short.
    Grown,
}

/// Whether the bad record at `off` of the last segment (the chain standing at `prev` before
/// it) is a torn write: nothing valid follows it and it holds a never-written (zeroed) sector
/// or, only where the file grows with its writes, was cut short by the end of the file; or
/// only records that may be the rest of its own batch follow while the damage holds such a
/// sector. A bit flip in a record written whole, or any valid later batch, is corruption.
fn torn_tail(data: &[u8], off: usize, prev: u32, tail: Tail) -> bool {
    match record::scan_after_damage(data, off, prev) {
        record::AfterDamage::Nothing => record::torn_record(data, off, tail == Tail::Grown),
        record::AfterDamage::SameBatch(next) => record::zeroed_sector(data, off, next),
        record::AfterDamage::LaterBatch => false,
    }
}

/// Makes the last segment's bytes after its last complete batch (`end`) safe to append to,
/// durably, and returns the file's length. Zero-filled, the tail is overwritten with zeros
/// (the file keeps its length); otherwise the file is cut at `end`.
fn repair_tail(path: &Path, data: &[u8], end: usize, zero_fill: bool) -> Result<u64, WalError> {
    let tail = &data[end..];
    if tail.iter().all(|&b| b == 0) {
        return Ok(data.len() as u64);
    }
    let f = OpenOptions::new().write(true).open(path)?;
    if zero_fill {
        f.write_all_at(&vec![0; tail.len()], end as u64)?;
        f.sync_data()?;
        Ok(data.len() as u64)
    } else {
        cut(&f, end as u64)?;
        Ok(end as u64)
    }
}

/// Cuts `file` to `len` bytes, durably (its size is metadata: `sync_all`).
fn cut(file: &File, len: u64) -> io::Result<()> {
    file.set_len(len)?;
    file.sync_all()
}

fn check_size(rec: &Record<'_>) -> Result<(), WalError> {
    let len = rec.body_len();
    if len > record::MAX_BODY {
        return Err(WalError::TooLarge { len });
    }
    Ok(())
}

/// Encodes a segment's header batch; returns it and the CRC after it.
fn header(seed: u32, purged: u64, state: Option<&[u8]>) -> (Vec<u8>, u32) {
    let recs = [
        Some(Record::Seed(seed)),
        (purged > 0).then_some(Record::Purge(purged)),
        state.map(Record::State),
    ];
    let count = recs.iter().flatten().count();
    let (mut buf, mut crc) = (Vec::new(), seed);
    for (i, rec) in recs.iter().flatten().enumerate() {
        record::encode(&mut buf, &mut crc, rec, i + 1 == count);
    }
    (buf, crc)
}

/// Where the valid part of a segment ends.
struct SegmentEnd {
    /// Length up to the end of the last complete batch.
    len: usize,
    /// CRC of the last record of that batch.
    crc: u32,
}

/// The log state rebuilt while reading segments.
#[derive(Default)]
struct Replay {
    entries: Vec<(u64, Vec<u8>)>,
    purged: u64,
    state: Option<Vec<u8>>,
}

impl Replay {
    /// Verifies and applies one segment. `seed` is the expected chain seed (the previous
    /// segment's last CRC) when the previous segment is present. Returns the end of its valid
    /// part, or the offset of the corruption.
    fn segment(&mut self, data: &[u8], seed: Option<u32>, tail: Tail) -> Result<SegmentEnd, usize> {
        let own_seed = record::peek_seed(data);
        if seed.is_some_and(|s| s != own_seed) {
            return Err(0);
        }
        let (mut off, mut prev) = (0, own_seed);
        let mut good = SegmentEnd {
            len: 0,
            crc: own_seed,
        };
        let mut pending = Vec::new();
        while off < data.len() {
            let Some(d) = record::decode(data, off, prev) else {
                let ok = match tail {
                    Tail::Closed => off == good.len && data[off..].iter().all(|&b| b == 0),
                    _ => good.len > 0 && torn_tail(data, off, prev, tail),
                };
                if !ok {
                    return Err(off);
                }
                break;
            };
            if matches!(d.rec, Record::Seed(_)) != (off == 0) {
                return Err(off);
            }
            pending.push((off, d.rec));
            (off, prev) = (d.next, d.crc);
            if d.end {
                for (at, rec) in pending.drain(..) {
                    self.apply(rec).map_err(|()| at)?;
                }
                good = SegmentEnd {
                    len: off,
                    crc: prev,
                };
            }
        }
        // An incomplete batch at the very end is torn only in the last segment, and only after
        // a complete header. A zero-filled live segment's records never run to the end of the
        // file: at least TAIL_ZEROS zeros follow (a shorter rest fails to decode above and is
        // not a torn write).
        let short = match tail {
            Tail::Closed => good.len != off,
            Tail::ZeroFilled => off >= data.len(),
            Tail::Grown => false,
        };
        if good.len == 0 || short {
            return Err(good.len);
        }
        Ok(good)
    }

    fn apply(&mut self, rec: Record<'_>) -> Result<(), ()> {
        match rec {
            Record::Seed(_) => {}
            Record::Entry(index, data) => {
                let ok = match self.entries.last() {
                    Some(&(last, _)) => last.checked_add(1) == Some(index),
                    None => index > self.purged,
                };
                if !ok {
                    return Err(());
                }
                self.entries.push((index, data.to_vec()));
            }
            Record::Truncate(from) => {
                let keep = self.entries.partition_point(|(i, _)| *i < from);
                self.entries.truncate(keep);
            }
            Record::Purge(upto) => {
                self.purged = self.purged.max(upto);
                let drop = self.entries.partition_point(|(i, _)| *i <= self.purged);
                self.entries.drain(..drop);
            }
            Record::State(state) => self.state = Some(state.to_vec()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
