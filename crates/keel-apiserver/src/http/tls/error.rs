//! [`TlsError`]: why certificates could not be loaded, made or used, each worded for the
//! operator with the file and what to do.

use std::io;
use std::path::PathBuf;

/// Why certificates could not be loaded, made or used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate directory could not be created.
    #[error(
        "cannot create the certificate directory {}: {source}; check that its parent exists and is writable",
        path.display()
    )]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}: {source}; check that its directory is writable", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The certificate directory holds some of its files but not all.
    #[error(
        "the certificate directory {} has {present} but not {missing}; restore {missing}, or remove \
         the directory to start over with a new CA (kubeconfigs that trust the old CA must then be \
         rewritten)",
        dir.display()
    )]
    Incomplete {
        /// The certificate directory.
        dir: PathBuf,
        /// A file that is there.
        present: &'static str,
        /// The file that is missing.
        missing: &'static str,
    },
    /// A file is not the PEM it should be.
    #[error("{} {problem}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong, and what the file should hold.
        problem: String,
    },
    /// A private key does not belong to its certificate.
    #[error(
        "the private key in {} does not belong to the certificate in {}; give the key the \
         certificate was issued for",
        key.display(),
        cert.display()
    )]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// The CA in the certificate directory cannot issue certificates that verify against it.
    #[error(
        "the CA in {} cannot issue a serving certificate that verifies against it ({reason}); \
         if the CA expires soon or was not made by keel, remove the directory to start over \
         with a new CA, or give your own serving pair with --tls-cert-file and \
         --tls-private-key-file",
        dir.display()
    )]
    ForeignCa {
        /// The certificate directory.
        dir: PathBuf,
        /// Why the issued certificate did not verify.
        reason: String,
    },
    /// A host name or address cannot go into a certificate.
    #[error(
        "cannot put {host:?} in the serving certificate: it is neither an IP address nor a DNS \
         name; give addresses like 10.0.0.1 or ::1 and names like api.example.com"
    )]
    InvalidHost {
        /// The host as given.
        host: String,
    },
    /// Certificate generation failed.
    #[error("cannot generate {what}: {source}")]
    Generate {
        /// What was being made.
        what: &'static str,
        /// The cause.
        source: rcgen::Error,
    },
    /// The system random number generator failed.
    #[error("cannot get random bytes from the operating system: {0}")]
    Random(String),
    /// rustls refused the certificate and key.
    #[error("cannot use the certificate {} with the key {}: {source}", cert.display(), key.display())]
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// The cause.
        source: rustls::Error,
    },
}
