//! Certificate directories made, reused and repaired, operators' files refused with the
//! reason, and handshakes against the CA.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

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
    let err =
        ServingCerts::load_or_create(tmp.path(), &hosts(&["not a host"])).expect_err("bad host");
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
