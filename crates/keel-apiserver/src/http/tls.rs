//! Serving certificates, kept as k3s keeps them: a self-signed CA (`ca.crt`, `ca.key`) made once
//! and reused on every start, so a kubeconfig that trusts it stays valid, and a serving
//! certificate (`apiserver.crt`, `apiserver.key`) signed by that CA for every name and address
//! clients use, re-issued from the same CA when a name is added or it nears expiry. Also loads
//! an operator's own pair (`--tls-cert-file`, `--tls-private-key-file`).

use std::fs::{self, DirBuilder};
use std::io;
use std::net::IpAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::sign::CertifiedKey;
use rustls::{InconsistentKeys, RootCertStore};

/// File name of the CA certificate in the certificate directory.
pub const CA_CERT: &str = "ca.crt";
/// File name of the CA private key in the certificate directory.
pub const CA_KEY: &str = "ca.key";
/// File name of the serving certificate in the certificate directory.
pub const SERVING_CERT: &str = "apiserver.crt";
/// File name of the serving private key in the certificate directory.
pub const SERVING_KEY: &str = "apiserver.key";

/// Names every serving certificate covers, whatever the operator adds (as k3s and kubeadm do).
pub const DEFAULT_HOSTS: &[&str] = &[
    "localhost",
    "127.0.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
];

const CA_COMMON_NAME: &str = "keel-ca";
const SERVING_COMMON_NAME: &str = "kube-apiserver";
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
const SERVING_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// A serving certificate that expires within this window is re-issued on start (k3s: 90 days).
const RENEW_BEFORE: Duration = Duration::from_secs(90 * 24 * 60 * 60);
/// Backdating of `notBefore`, for clients whose clocks run a little behind.
const BACKDATE: Duration = Duration::from_secs(60 * 60);

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

/// A CA and the serving certificate it signed, kept in a certificate directory.
pub struct ServingCerts {
    dir: PathBuf,
    ca_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for ServingCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCerts")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl ServingCerts {
    /// Loads the CA and serving certificate from `cert_dir`, making whatever is missing: a new
    /// CA when the directory is empty, a new serving certificate (from the same CA) when there
    /// is none, when it does not cover one of `hosts` (or a default host), or when it expires
    /// within 90 days. A CA file without its partner, or one serving file without the other,
    /// is an error.
    pub fn load_or_create(cert_dir: &Path, hosts: &[String]) -> Result<ServingCerts, TlsError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(cert_dir)
            .map_err(|source| TlsError::CreateDir {
                path: cert_dir.to_path_buf(),
                source,
            })?;
        let hosts = normalize_hosts(hosts)?;
        let provider = provider();
        let present =
            [CA_CERT, CA_KEY, SERVING_CERT, SERVING_KEY].map(|name| cert_dir.join(name).exists());
        let incomplete = |present: &'static str, missing: &'static str| TlsError::Incomplete {
            dir: cert_dir.to_path_buf(),
            present,
            missing,
        };
        let (ca_pem, issuer) = match present {
            [false, false, false, false] => {
                let (ca_pem, ca_key_pem, issuer) = new_ca()?;
                write_file(&cert_dir.join(CA_KEY), ca_key_pem.as_bytes(), 0o600)?;
                write_file(&cert_dir.join(CA_CERT), ca_pem.as_bytes(), 0o644)?;
                tracing::info!(dir = %cert_dir.display(), "created a new CA");
                (ca_pem, issuer)
            }
            [true, false, ..] => return Err(incomplete(CA_CERT, CA_KEY)),
            [false, true, ..] => return Err(incomplete(CA_KEY, CA_CERT)),
            [false, false, true, _] => return Err(incomplete(SERVING_CERT, CA_CERT)),
            [false, false, false, true] => return Err(incomplete(SERVING_KEY, CA_CERT)),
            [true, true, true, false] => return Err(incomplete(SERVING_CERT, SERVING_KEY)),
            [true, true, false, true] => return Err(incomplete(SERVING_KEY, SERVING_CERT)),
            [true, true, _, _] => load_ca(cert_dir, &provider)?,
        };
        let ca_der = first_cert(&cert_dir.join(CA_CERT), ca_pem.as_bytes())?;
        let mut roots = RootCertStore::empty();
        roots
            .add(ca_der)
            .map_err(|e| pem_error(&cert_dir.join(CA_CERT), format!("is not a usable CA: {e}")))?;

        if present[2] && present[3] {
            let cert_path = cert_dir.join(SERVING_CERT);
            let key_path = cert_dir.join(SERVING_KEY);
            // A serving pair that is unreadable as PEM, whose key does not match, or that does
            // not cover every host is replaced; one that cannot be read at all is an error.
            let reason = match read_pair(&cert_path, &key_path, &provider) {
                Ok((chain, key)) => match check_serving(&chain, &hosts, &roots, &provider) {
                    Ok(()) => {
                        return Ok(ServingCerts {
                            dir: cert_dir.to_path_buf(),
                            ca_pem,
                            chain,
                            key,
                        });
                    }
                    Err(reason) => reason,
                },
                Err(e @ TlsError::Read { .. }) => return Err(e),
                Err(e) => e.to_string(),
            };
            tracing::info!(file = %cert_path.display(), %reason, "re-issuing the serving certificate");
        }

        let (cert_pem, key_pem) = issue_serving(&issuer, &hosts)?;
        let cert_path = cert_dir.join(SERVING_CERT);
        let chain = vec![first_cert(&cert_path, cert_pem.as_bytes())?];
        check_serving(&chain, &hosts, &roots, &provider).map_err(|reason| TlsError::ForeignCa {
            dir: cert_dir.to_path_buf(),
            reason,
        })?;
        let key_path = cert_dir.join(SERVING_KEY);
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| pem_error(&key_path, format!("was generated unreadable: {e}")))?;
        write_file(&key_path, key_pem.as_bytes(), 0o600)?;
        write_file(&cert_path, cert_pem.as_bytes(), 0o644)?;
        Ok(ServingCerts {
            dir: cert_dir.to_path_buf(),
            ca_pem,
            chain,
            key,
        })
    }

    /// The CA certificate (PEM), for kubeconfigs and clients to trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A rustls server configuration serving the certificate, offering `h2` and `http/1.1`.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        server_config(
            self.chain.clone(),
            self.key.clone_key(),
            &self.dir.join(SERVING_CERT),
            &self.dir.join(SERVING_KEY),
        )
    }
}

/// A rustls server configuration from an operator's PEM files (`--tls-cert-file`, leaf first,
/// then any intermediates; `--tls-private-key-file`, PKCS#8, PKCS#1 or SEC1), offering `h2`
/// and `http/1.1`.
pub fn load_files(
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (chain, key) = read_pair(cert_file, key_file, &provider())?;
    server_config(chain, key, cert_file, key_file)
}

fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let config_error = |source| TlsError::Config {
        cert: cert_file.to_path_buf(),
        key: key_file.to_path_buf(),
        source,
    };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()
        .map_err(config_error)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch) => {
                TlsError::KeyMismatch {
                    cert: cert_file.to_path_buf(),
                    key: key_file.to_path_buf(),
                }
            }
            other => config_error(other),
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The hosts to certify: the defaults, then the operator's, trimmed, without brackets around
/// IPv6 addresses, DNS names lowercased, duplicates dropped.
fn normalize_hosts(hosts: &[String]) -> Result<Vec<String>, TlsError> {
    let mut out: Vec<String> = Vec::new();
    for host in DEFAULT_HOSTS
        .iter()
        .copied()
        .chain(hosts.iter().map(String::as_str))
    {
        let trimmed = host.trim();
        let unbracketed = trimmed
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(trimmed);
        let normalized = match unbracketed.parse::<IpAddr>() {
            Ok(ip) => ip.to_string(),
            Err(_) => {
                let name = unbracketed.trim_end_matches('.').to_ascii_lowercase();
                if name.is_empty() || ServerName::try_from(name.as_str()).is_err() {
                    return Err(TlsError::InvalidHost {
                        host: host.to_string(),
                    });
                }
                name
            }
        };
        if !out.contains(&normalized) {
            out.push(normalized);
        }
    }
    Ok(out)
}

/// Whether `chain` verifies against `roots` for every host, now and [`RENEW_BEFORE`] from now;
/// the reason when not.
fn check_serving(
    chain: &[CertificateDer<'static>],
    hosts: &[String],
    roots: &RootCertStore,
    provider: &CryptoProvider,
) -> Result<(), String> {
    let Some((leaf, intermediates)) = chain.split_first() else {
        return Err("it holds no certificate".to_string());
    };
    let parsed = ParsedCertificate::try_from(leaf).map_err(|e| e.to_string())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    for (at, when) in [(now, "now"), (now + RENEW_BEFORE, "in 90 days")] {
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &parsed,
            roots,
            intermediates,
            UnixTime::since_unix_epoch(at),
            provider.signature_verification_algorithms.all,
        )
        .map_err(|e| format!("it does not verify against the CA {when}: {e}"))?;
    }
    for host in hosts {
        let name = ServerName::try_from(host.as_str()).map_err(|e| format!("{host}: {e}"))?;
        rustls::client::verify_server_name(&parsed, &name)
            .map_err(|_| format!("it does not cover {host}"))?;
    }
    Ok(())
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// A new CA: its certificate (PEM), its key (PEM) and the issuer that signs with it.
fn new_ca() -> Result<(String, String, Issuer<'static, KeyPair>), TlsError> {
    let generate = |source| TlsError::Generate {
        what: "the CA",
        source,
    };
    let key = KeyPair::generate().map_err(generate)?;
    let mut params = ca_params();
    set_validity(&mut params, CA_VALIDITY)?;
    let cert = params.self_signed(&key).map_err(generate)?;
    let key_pem = key.serialize_pem();
    Ok((cert.pem(), key_pem, Issuer::new(params, key)))
}

/// The CA of `dir`: its certificate (PEM) and an issuer signing with its key, after checking
/// that the key belongs to the certificate.
fn load_ca(
    dir: &Path,
    provider: &CryptoProvider,
) -> Result<(String, Issuer<'static, KeyPair>), TlsError> {
    let cert_path = dir.join(CA_CERT);
    let key_path = dir.join(CA_KEY);
    read_pair(&cert_path, &key_path, provider)?;
    let ca_pem = read_string(&cert_path)?;
    let key_pem = read_string(&key_path)?;
    let key = KeyPair::from_pem(&key_pem).map_err(|e| {
        pem_error(
            &key_path,
            format!("holds a key keel cannot sign with ({e}); it needs a PKCS#8 ECDSA P-256/P-384 or Ed25519 key"),
        )
    })?;
    Ok((ca_pem, Issuer::new(ca_params(), key)))
}

/// A new serving certificate for `hosts` signed by `issuer`, and its key, both PEM.
fn issue_serving(
    issuer: &Issuer<'_, KeyPair>,
    hosts: &[String],
) -> Result<(String, String), TlsError> {
    let generate = |source| TlsError::Generate {
        what: "the serving certificate",
        source,
    };
    let mut params = CertificateParams::new(hosts.to_vec()).map_err(generate)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, SERVING_COMMON_NAME);
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, SERVING_VALIDITY)?;
    let key = KeyPair::generate().map_err(generate)?;
    let cert = params.signed_by(&key, issuer).map_err(generate)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Validity from an hour ago for `validity`, and a random positive serial number.
fn set_validity(params: &mut CertificateParams, validity: Duration) -> Result<(), TlsError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + now.saturating_sub(BACKDATE);
    params.not_after = epoch + now + validity;
    let mut serial = random_bytes::<16>()?;
    serial[0] = (serial[0] & 0x7f) | 0x40;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    Ok(())
}

/// A certificate chain and its key read from PEM files, after checking that they match.
fn read_pair(
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

fn first_cert(path: &Path, pem: &[u8]) -> Result<CertificateDer<'static>, TlsError> {
    CertificateDer::from_pem_slice(pem)
        .map_err(|e| pem_error(path, format!("holds no PEM CERTIFICATE block ({e})")))
}

fn pem_error(path: &Path, problem: String) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        problem,
    }
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_string(path: &Path) -> Result<String, TlsError> {
    fs::read_to_string(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), TlsError> {
    write_atomic(path, contents, mode).map_err(|source| TlsError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// `N` bytes from the operating system's random number generator (through ring).
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N], TlsError> {
    let mut bytes = [0u8; N];
    provider()
        .secure_random
        .fill(&mut bytes)
        .map_err(|e| TlsError::Random(format!("{e:?}")))?;
    Ok(bytes)
}

pub(crate) use keel_wal::dir::write_atomic;

/// A client configuration that accepts any server certificate (handshake signatures are
/// still checked), as kube-apiserver's health probes of other components connect.
pub fn insecure_client_config() -> rustls::ClientConfig {
    let provider = Arc::new(provider());
    let verifier = Arc::new(keel_tls::AcceptAnyCertificate::new(provider.clone()));
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the default provider supports the default versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn read(dir: &Path, name: &str) -> String {
        fs::read_to_string(dir.join(name)).expect("read")
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn creates_then_reuses_the_ca() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("tls");
        let first = ServingCerts::load_or_create(&dir, &hosts(&["10.0.0.1"])).expect("create");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(CA_KEY)), 0o600);
        assert_eq!(mode(&dir.join(SERVING_KEY)), 0o600);
        assert_eq!(first.ca_pem(), read(&dir, CA_CERT));
        let serving = read(&dir, SERVING_CERT);
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .expect("list")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");

        let second = ServingCerts::load_or_create(&dir, &hosts(&["10.0.0.1"])).expect("reload");
        assert_eq!(second.ca_pem(), first.ca_pem());
        assert_eq!(read(&dir, SERVING_CERT), serving, "a covering cert is kept");
        second.server_config().expect("server config");
    }

    #[test]
    fn a_new_host_reissues_under_the_same_ca() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        let first = ServingCerts::load_or_create(dir, &[]).expect("create");
        let serving = read(dir, SERVING_CERT);
        let ca_key = read(dir, CA_KEY);
        let second = ServingCerts::load_or_create(dir, &hosts(&["api.example.com", "[fd00::1]"]))
            .expect("reissue");
        assert_eq!(second.ca_pem(), first.ca_pem());
        assert_eq!(read(dir, CA_KEY), ca_key);
        assert_ne!(read(dir, SERVING_CERT), serving);

        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(first.ca_pem().as_bytes()).expect("ca"))
            .expect("root");
        let all = normalize_hosts(&hosts(&["API.example.com", "fd00::1"])).expect("hosts");
        assert!(all.contains(&"kubernetes.default.svc".to_string()));
        check_serving(&second.chain, &all, &roots, &provider()).expect("covers every host");
        // Without the new host the re-issued cert still covers the defaults: nothing changes.
        let reissued = read(dir, SERVING_CERT);
        ServingCerts::load_or_create(dir, &[]).expect("reload");
        assert_eq!(read(dir, SERVING_CERT), reissued);
    }

    #[test]
    fn a_serving_key_that_does_not_match_is_reissued() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        let first = ServingCerts::load_or_create(&a, &[]).expect("a");
        ServingCerts::load_or_create(&b, &[]).expect("b");
        fs::copy(b.join(SERVING_KEY), a.join(SERVING_KEY)).expect("copy");
        let err = load_files(&a.join(SERVING_CERT), &a.join(SERVING_KEY)).expect_err("mismatch");
        assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err}");
        let second = ServingCerts::load_or_create(&a, &[]).expect("reissue");
        assert_eq!(second.ca_pem(), first.ca_pem());
        load_files(&a.join(SERVING_CERT), &a.join(SERVING_KEY)).expect("matching pair");
    }

    #[test]
    fn a_missing_file_is_named() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        ServingCerts::load_or_create(dir, &[]).expect("create");
        fs::remove_file(dir.join(CA_KEY)).expect("remove");
        let err = ServingCerts::load_or_create(dir, &[]).expect_err("partial set");
        let message = err.to_string();
        assert!(
            matches!(
                err,
                TlsError::Incomplete {
                    missing: CA_KEY,
                    ..
                }
            ),
            "{message}"
        );
        assert!(message.contains("not ca.key"), "{message}");
        assert!(message.contains("remove the directory"), "{message}");

        // The CA pair alone is enough: the serving pair is issued from it.
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        let first = ServingCerts::load_or_create(dir, &[]).expect("create");
        fs::remove_file(dir.join(SERVING_CERT)).expect("remove");
        fs::remove_file(dir.join(SERVING_KEY)).expect("remove");
        let second = ServingCerts::load_or_create(dir, &[]).expect("reissue");
        assert_eq!(first.ca_pem(), second.ca_pem());
    }

    #[test]
    fn bad_hosts_and_bad_files_are_explained() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let err = ServingCerts::load_or_create(tmp.path(), &hosts(&["not a host"]))
            .expect_err("bad host");
        assert!(matches!(err, TlsError::InvalidHost { .. }), "{err}");

        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        ServingCerts::load_or_create(&a, &[]).expect("a");
        ServingCerts::load_or_create(&b, &[]).expect("b");
        load_files(&a.join(SERVING_CERT), &a.join(SERVING_KEY)).expect("own pair");
        let err = load_files(&a.join(SERVING_CERT), &b.join(SERVING_KEY)).expect_err("mismatch");
        assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err}");
        let err = load_files(&a.join(SERVING_KEY), &a.join(SERVING_KEY)).expect_err("no cert");
        assert!(err.to_string().contains("no CERTIFICATE"), "{err}");
        let err = load_files(&a.join(SERVING_CERT), &a.join(SERVING_CERT)).expect_err("no key");
        assert!(err.to_string().contains("no private key"), "{err}");
        let err = load_files(&a.join("nope"), &a.join(SERVING_KEY)).expect_err("missing");
        assert!(matches!(err, TlsError::Read { .. }), "{err}");

        // A chain (leaf, then the CA) is accepted.
        let chained = tmp.path().join("chain.crt");
        let chain = read(&a, SERVING_CERT) + &read(&a, CA_CERT);
        fs::write(&chained, chain).expect("write");
        load_files(&chained, &a.join(SERVING_KEY)).expect("chain");
    }

    /// Serves one TLS connection with `config` and reports whether a client trusting
    /// `trusted_ca` completes a handshake (and an echo) for `server_name`.
    async fn handshake(
        config: Arc<rustls::ServerConfig>,
        trusted_ca: &str,
        server_name: &str,
    ) -> Result<Vec<u8>, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut tls = acceptor.accept(tcp).await.map_err(|e| e.to_string())?;
            let mut buf = [0u8; 4];
            tls.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
            tls.write_all(&buf).await.map_err(|e| e.to_string())?;
            tls.shutdown().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(())
        });

        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(trusted_ca.as_bytes()) {
            roots.add(cert.expect("ca")).expect("root");
        }
        let mut client = rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"h2".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let name = ServerName::try_from(server_name.to_string()).expect("name");
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let result = async {
            let mut tls = connector
                .connect(name, tcp)
                .await
                .map_err(|e| e.to_string())?;
            let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
            tls.write_all(b"ping").await.map_err(|e| e.to_string())?;
            let mut buf = [0u8; 4];
            tls.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
            assert_eq!(&buf, b"ping");
            Ok(alpn.unwrap_or_default())
        }
        .await;
        let served = server.await.expect("server task");
        if result.is_ok() {
            served?;
        }
        result
    }

    #[tokio::test]
    async fn clients_trusting_the_ca_connect_and_others_do_not() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let certs = ServingCerts::load_or_create(&tmp.path().join("a"), &[]).expect("certs");
        let other = ServingCerts::load_or_create(&tmp.path().join("b"), &[]).expect("other");
        let config = certs.server_config().expect("config");
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        for name in ["127.0.0.1", "localhost", "kubernetes.default.svc"] {
            let alpn = handshake(config.clone(), certs.ca_pem(), name)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(alpn, b"h2");
        }
        let err = handshake(config.clone(), other.ca_pem(), "127.0.0.1")
            .await
            .expect_err("a client trusting another CA must fail");
        // Both CAs are named keel-ca, so the client finds the other one by name and rejects
        // the signature.
        assert!(
            err.contains("BadSignature") || err.contains("UnknownIssuer"),
            "{err}"
        );
        let err = handshake(config, certs.ca_pem(), "example.com")
            .await
            .expect_err("a name the cert does not cover must fail");
        assert!(err.contains("not valid for name"), "{err}");
    }
}
