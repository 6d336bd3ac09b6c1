//! Serving certificates, kept as k3s keeps them: a self-signed CA (`ca.crt`, `ca.key`) made once
//! and reused on every start, so a kubeconfig that trusts it stays valid, and a serving
//! certificate (`apiserver.crt`, `apiserver.key`) signed by that CA for every name and address
//! clients use, re-issued from the same CA when a name is added or it nears expiry. Also loads
//! an operator's own pair (`--tls-cert-file`, `--tls-private-key-file`).

mod error;
mod files;

use std::fs::DirBuilder;
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
use rustls::{InconsistentKeys, RootCertStore};

pub use error::TlsError;
use files::{first_cert, pem_error, read_pair, read_string, write_file};

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
mod tests;
