//! Segment files: naming, listing and atomic, durable creation.
//!
//! A segment is named `{seq:016x}-{first_index:016x}.wal`. It is first written in full (its
//! header batch) as `<name>.tmp`, fsynced, renamed into place and the directory fsynced, so a
//! segment under its final name always holds a complete header. Leftover `.tmp` files are
//! removed on open.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One segment file of the log.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// Sequence number, one more than the previous segment's.
    pub seq: u64,
    /// Index of the first entry that may be written in it (last index + 1 when it was created).
    pub first_index: u64,
    /// Full path of the file.
    pub path: PathBuf,
}

/// The file name of segment `seq` starting at `first_index`.
fn file_name(seq: u64, first_index: u64) -> String {
    format!("{seq:016x}-{first_index:016x}.wal")
}

fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (seq, first) = name.strip_suffix(".wal")?.split_once('-')?;
    let hex = |s: &str| {
        (s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    };
    Some((hex(seq)?, hex(first)?))
}

/// Whether `dir` holds at least one segment (a missing `dir` holds none). Changes nothing.
pub(crate) fn any(dir: &Path) -> io::Result<bool> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    for dent in entries {
        if dent?.file_name().to_str().and_then(parse_name).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Lists the segments in `dir` by ascending sequence number, removing leftover `.tmp` files.
pub(crate) fn list(dir: &Path) -> io::Result<Vec<Segment>> {
    let mut segments = Vec::new();
    let mut removed_tmp = false;
    for dent in fs::read_dir(dir)? {
        let dent = dent?;
        let name = dent.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".wal.tmp") {
            fs::remove_file(dent.path())?;
            removed_tmp = true;
        } else if let Some((seq, first_index)) = parse_name(name) {
            segments.push(Segment {
                seq,
                first_index,
                path: dent.path(),
            });
        }
    }
    if removed_tmp {
        crate::dir::sync(dir)?;
    }
    segments.sort_by_key(|s| s.seq);
    Ok(segments)
}

/// Creates segment `seq` holding `header` followed by zeros up to `len` bytes, durably, and
/// returns it open for appending.
pub(crate) fn create(
    dir: &Path,
    seq: u64,
    first_index: u64,
    header: &[u8],
    len: u64,
) -> io::Result<(Segment, File)> {
    let path = dir.join(file_name(seq, first_index));
    let tmp = path.with_extension("wal.tmp");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    file.write_all(header)?;
    if let Some(zeros) = (len as usize).checked_sub(header.len()).filter(|&n| n > 0) {
        file.write_all(&vec![0; zeros])?;
    }
    file.sync_all()?;
    fs::rename(&tmp, &path)?;
    crate::dir::sync(dir)?;
    let segment = Segment {
        seq,
        first_index,
        path,
    };
    Ok((segment, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let name = file_name(3, 0xabc);
        assert_eq!(name, "0000000000000003-0000000000000abc.wal");
        assert_eq!(parse_name(&name), Some((3, 0xabc)));
        assert_eq!(parse_name("3-abc.wal"), None);
        assert_eq!(parse_name("000000000000000+-0000000000000abc.wal"), None);
        assert_eq!(parse_name(&format!("{name}.tmp")), None);
    }
}
