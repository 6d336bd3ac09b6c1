//! The sha256 etcd appends to a snapshot: `etcdctl snapshot save` writes the database and
//! then the digest the server streamed last, and `etcdutl snapshot restore` takes a file
//! whose size is 32 more than a multiple of 512 (etcd's `hasChecksum`: pages are multiples
//! of 512 bytes) to end in one, which it checks unless told `--skip-hash-check`; a file
//! without it (a database copied from a data directory) needs that flag.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::RestoreError;

/// Bytes of the digest.
pub const HASH_LEN: u64 = 32;

/// Whether a snapshot of `len` bytes ends in a sha256 (etcd's `hasChecksum`).
pub fn has_checksum(len: u64) -> bool {
    len % 512 == HASH_LEN
}

/// Checks the snapshot at `path` as etcdutl's restore does: a file that ends in a sha256
/// must match it unless `skip_hash_check`; one that does not is refused unless
/// `skip_hash_check`. Returns the length of the database, the digest left out.
pub fn verify(path: &Path, skip_hash_check: bool) -> Result<u64, RestoreError> {
    let len = std::fs::metadata(path)
        .map_err(RestoreError::io(path))?
        .len();
    match (has_checksum(len), skip_hash_check) {
        (false, true) => Ok(len),
        (false, false) => Err(RestoreError::MissingHash),
        (true, true) => Ok(len - HASH_LEN),
        (true, false) => sealed_hash(path).map(|_| len - HASH_LEN),
    }
}

/// The sha256 the snapshot at `path` ends in, once checked against the database before it
/// (a file without one is refused).
pub fn sealed_hash(path: &Path) -> Result<[u8; HASH_LEN as usize], RestoreError> {
    let io = || RestoreError::io(path);
    let mut file = File::open(path).map_err(io())?;
    let len = file.metadata().map_err(io())?.len();
    if !has_checksum(len) {
        return Err(RestoreError::MissingHash);
    }
    let db_len = len - HASH_LEN;
    let mut hasher = Sha256::new();
    let copied = std::io::copy(&mut (&mut file).take(db_len), &mut hasher).map_err(io())?;
    let mut expected = [0u8; HASH_LEN as usize];
    file.read_exact(&mut expected).map_err(io())?;
    let got = hasher.finalize();
    if copied != db_len || got.as_slice() != expected {
        return Err(RestoreError::HashMismatch {
            expected: go_bytes(&expected),
            got: go_bytes(&got),
        });
    }
    Ok(expected)
}

/// Appends the sha256 of the file at `path` (a database) to it and makes it durable.
pub fn seal(path: &Path) -> std::io::Result<()> {
    let mut file = File::options().read(true).append(true).open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    file.write_all(&hasher.finalize())?;
    file.sync_all()
}

/// A byte slice as Go's `%v` prints it: `[1 2 255]`.
fn go_bytes(bytes: &[u8]) -> String {
    let items: Vec<String> = bytes.iter().map(u8::to_string).collect();
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_file_verifies_and_a_changed_byte_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snap");
        std::fs::write(&path, vec![7u8; 1024]).unwrap();
        assert!(matches!(
            verify(&path, false),
            Err(RestoreError::MissingHash)
        ));
        assert_eq!(verify(&path, true).unwrap(), 1024);
        seal(&path).unwrap();
        assert_eq!(verify(&path, false).unwrap(), 1024);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[5] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = verify(&path, false).unwrap_err().to_string();
        assert!(err.starts_with("expected sha256 ["), "{err}");
        assert_eq!(verify(&path, true).unwrap(), 1024);
        assert_eq!(go_bytes(&[1, 2, 255]), "[1 2 255]");
    }
}
