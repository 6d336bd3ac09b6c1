//! The volatile layer of one file: bytes written since its last fsync, over its durable bytes.
//!
//! A file's visible content is its durable content (the backing file, `durable_len` bytes)
//! with two things laid over it: the durable bytes at or past `cut_at` read as zeros (the file
//! was truncated below them since the last fsync), and the pending extents replace whatever
//! lies under them. Everything past the visible size is not there. An fsync applies the
//! layer to the backing file; a power cut drops it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Writes and truncations of one file not yet made durable.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// Written bytes by offset: no two extents overlap or touch.
    extents: BTreeMap<u64, Vec<u8>>,
    /// The lowest size the file had since its last fsync, if it was truncated below its
    /// durable length: durable bytes from here on are gone.
    cut_at: Option<u64>,
}

impl Pending {
    /// Whether there is nothing to make durable.
    pub(crate) fn is_empty(&self) -> bool {
        self.extents.is_empty() && self.cut_at.is_none()
    }

    /// Lays `data` at `offset` over everything below it.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        // Grow the extent that starts at or before `offset` and reaches it, if any.
        let start = match self.extents.range_mut(..=offset).next_back() {
            Some((&start, buf)) if start + buf.len() as u64 >= offset => {
                let at = (offset - start) as usize;
                if start + buf.len() as u64 >= end {
                    buf[at..at + data.len()].copy_from_slice(data);
                    return;
                }
                buf.truncate(at);
                buf.extend_from_slice(data);
                start
            }
            _ => {
                self.extents.insert(offset, data.to_vec());
                offset
            }
        };
        // Swallow the extents that start inside or right after the new bytes.
        let later: Vec<u64> = self
            .extents
            .range(start + 1..=end)
            .map(|(&s, _)| s)
            .collect();
        for s in later {
            let next = self.extents.remove(&s).expect("listed above");
            let tail = (end - s) as usize;
            if tail < next.len() {
                let buf = self.extents.get_mut(&start).expect("inserted above");
                buf.extend_from_slice(&next[tail..]);
            }
        }
    }

    /// Records that the file shrank to `size` (its durable length was `durable_len`).
    pub(crate) fn truncate(&mut self, size: u64, durable_len: u64) {
        let cut: Vec<u64> = self.extents.range(size..).map(|(&s, _)| s).collect();
        for s in cut {
            self.extents.remove(&s);
        }
        if let Some((&start, buf)) = self.extents.range_mut(..size).next_back() {
            buf.truncate(buf.len().min((size - start) as usize));
        }
        if size < durable_len {
            self.cut_at = Some(self.cut_at.map_or(size, |c| c.min(size)));
        }
    }

    /// Fills `buf` with the visible bytes at `offset` (the caller clips `buf` to the size).
    pub(crate) fn read(
        &self,
        durable: &File,
        durable_len: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        let limit = self.cut_at.map_or(durable_len, |c| c.min(durable_len));
        let from_disk = limit.saturating_sub(offset).min(buf.len() as u64) as usize;
        durable.read_exact_at(&mut buf[..from_disk], offset)?;
        buf[from_disk..].fill(0);
        let first = match self.extents.range(..=offset).next_back() {
            Some((&s, _)) => s,
            None => offset,
        };
        for (&s, data) in self.extents.range(first..end) {
            let (lo, hi) = (s.max(offset), (s + data.len() as u64).min(end));
            if lo < hi {
                buf[(lo - offset) as usize..(hi - offset) as usize]
                    .copy_from_slice(&data[(lo - s) as usize..(hi - s) as usize]);
            }
        }
        Ok(())
    }

    /// Makes the layer durable: applies it to `durable`, leaving it `size` bytes long.
    pub(crate) fn apply(&mut self, durable: &File, durable_len: u64, size: u64) -> io::Result<()> {
        if let Some(cut) = self.cut_at.take()
            && cut < durable_len
        {
            durable.set_len(cut)?;
        }
        for (s, data) in std::mem::take(&mut self.extents) {
            durable.write_all_at(&data, s)?;
        }
        if durable.metadata()?.len() != size {
            durable.set_len(size)?;
        }
        Ok(())
    }

    /// Bytes held in memory.
    pub(crate) fn bytes(&self) -> usize {
        self.extents.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A durable file holding `content` and a model of the visible bytes.
    fn durable(content: &[u8]) -> File {
        let f = tempfile::tempfile().unwrap();
        f.write_all_at(content, 0).unwrap();
        f
    }

    fn visible(p: &Pending, f: &File, durable_len: u64, size: u64) -> Vec<u8> {
        let mut buf = vec![0xee; size as usize];
        p.read(f, durable_len, 0, &mut buf).unwrap();
        buf
    }

    #[test]
    fn writes_overlay_durable_bytes_and_merge() {
        let f = durable(b"0123456789");
        let mut p = Pending::default();
        p.write(2, b"ab");
        p.write(4, b"cd"); // touches the first: merged
        p.write(8, b"xyz"); // grows the file
        p.write(3, b"Q"); // inside an extent
        assert_eq!(p.extents.len(), 2);
        assert_eq!(visible(&p, &f, 10, 11), b"01aQcd67xyz");
        p.write(0, b"__________"); // swallows both
        assert_eq!(p.extents.len(), 1);
        assert_eq!(visible(&p, &f, 10, 11), b"__________z");
        assert_eq!(p.bytes(), 11);
    }

    #[test]
    fn a_truncate_hides_durable_bytes_until_rewritten() {
        let f = durable(b"0123456789");
        let mut p = Pending::default();
        p.write(6, b"ab");
        p.truncate(4, 10);
        assert_eq!(visible(&p, &f, 10, 4), b"0123");
        // Growing again shows zeros, not the old durable bytes.
        assert_eq!(visible(&p, &f, 10, 8), b"0123\0\0\0\0");
        p.write(5, b"Z");
        assert_eq!(visible(&p, &f, 10, 8), b"0123\0Z\0\0");
        p.apply(&f, 10, 8).unwrap();
        assert!(p.is_empty());
        let mut back = vec![0; 8];
        f.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(back, b"0123\0Z\0\0");
        assert_eq!(f.metadata().unwrap().len(), 8);
    }

    #[test]
    fn reads_at_an_offset_see_only_their_window() {
        let f = durable(b"0123456789");
        let mut p = Pending::default();
        p.write(1, b"abc");
        p.write(7, b"xy");
        let mut buf = vec![0; 5];
        p.read(&f, 10, 2, &mut buf).unwrap();
        assert_eq!(buf, b"bc456");
    }
}
