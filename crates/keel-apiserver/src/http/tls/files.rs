//! The certificate directory's files: PEM certificates and keys read (and checked to match)
//! and written whole, every failure a [`TlsError`] naming the file.

use std::fs;
use std::path::Path;

use rustls::InconsistentKeys;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use keel_wal::dir::write_atomic;

use super::error::TlsError;

/// A certificate chain and its key read from PEM files, after checking that they match.
pub(super) fn read_pair(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let cert_bytes = read_bytes(cert_path)?;
    let chain = CertificateDer::pem_slice_iter(&cert_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(cert_path, format!("is not valid PEM ({e}); it should hold one or more CERTIFICATE blocks, the server's first")))?;
    if chain.is_empty() {
        return Err(pem_error(
            cert_path,
            "holds no CERTIFICATE block; it should hold the server's certificate in PEM, then any intermediates".to_string(),
        ));
    }
    let key_bytes = read_bytes(key_path)?;
    let key = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => pem_error(
            key_path,
            "holds no private key; it should hold a PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block".to_string(),
        ),
        other => pem_error(key_path, format!("is not a valid PEM private key ({other})")),
    })?;
    match CertifiedKey::from_der(chain.clone(), key.clone_key(), provider) {
        Ok(_) => Ok((chain, key)),
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            Err(TlsError::KeyMismatch {
                cert: cert_path.to_path_buf(),
                key: key_path.to_path_buf(),
            })
        }
        Err(source) => Err(TlsError::Config {
            cert: cert_path.to_path_buf(),
            key: key_path.to_path_buf(),
            source,
        }),
    }
}

/// The first certificate of `pem` (read from `path`).
pub(super) fn first_cert(path: &Path, pem: &[u8]) -> Result<CertificateDer<'static>, TlsError> {
    CertificateDer::from_pem_slice(pem)
        .map_err(|e| pem_error(path, format!("holds no PEM CERTIFICATE block ({e})")))
}

/// `path` holds something other than what it should (`problem` says what).
pub(super) fn pem_error(path: &Path, problem: String) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        problem,
    }
}

/// The bytes of `path`.
pub(super) fn read_bytes(path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The text of `path`.
pub(super) fn read_string(path: &Path) -> Result<String, TlsError> {
    fs::read_to_string(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `contents` to `path` at once (never half-written), with permissions `mode`.
pub(super) fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), TlsError> {
    write_atomic(path, contents, mode).map_err(|source| TlsError::Write {
        path: path.to_path_buf(),
        source,
    })
}
