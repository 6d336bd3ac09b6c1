//! CertificateSigningRequest defaults, validation and printing, expected as upstream's
//! strategy, `validation.go` and `printCertificateSigningRequest` give them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::*;
use crate::registry::rules::messages;

/// A real PKCS#10 request (rcgen), base64 as the JSON `request` field holds it.
fn request_b64() -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let params =
        rcgen::CertificateParams::new(vec!["web.example.com".to_string()]).expect("params");
    let csr = params.serialize_request(&key).expect("csr");
    STANDARD.encode(csr.pem().expect("pem"))
}

fn sample() -> Value {
    json!({"metadata": {"name": "web", "creationTimestamp": "2026-05-28T20:16:40Z"},
        "spec": {"request": request_b64(), "signerName": "example.com/serving",
            "usages": ["digital signature", "server auth"], "expirationSeconds": 86400,
            "username": "mallory", "groups": ["system:masters"]},
        "status": {"conditions": [{"type": "Approved", "status": "True"}]}})
}

/// A real certificate (self-signed, rcgen), base64 as `status.certificate` holds it.
fn certificate_b64() -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["web.example.com".to_string()]).unwrap();
    STANDARD.encode(params.self_signed(&key).expect("cert").pem())
}

fn alice() -> User {
    User {
        name: "alice".into(),
        uid: "a1".into(),
        groups: vec!["devs".into(), "system:authenticated".into()],
        extra: [("scopes".to_string(), vec!["x".to_string()])].into(),
    }
}

/// `sample()` as created by `user`.
fn created(user: Option<&User>) -> Value {
    let mut csr = sample();
    CertificateSigningRequests.prepare_for_create(&mut csr);
    CertificateSigningRequests.prepare_for_create_by(&mut csr, user);
    csr
}

#[test]
fn create_sets_the_requestor_from_the_user_and_empties_the_status() {
    let csr = created(Some(&alice()));
    assert_eq!(csr["spec"]["username"], "alice");
    assert_eq!(csr["spec"]["uid"], "a1");
    assert_eq!(
        csr["spec"]["groups"],
        json!(["devs", "system:authenticated"])
    );
    assert_eq!(csr["spec"]["extra"], json!({"scopes": ["x"]}));
    assert_eq!(csr["status"], json!({}));
    assert!(CertificateSigningRequests.validate(&csr).is_empty());
    // Without a user (the server's own create) the client's values are gone all the same;
    // a user without uid or groups leaves them out.
    let anonymous = created(None);
    assert!(anonymous["spec"].get("username").is_none());
    assert!(anonymous["spec"].get("groups").is_none());
    let bare = created(Some(&User {
        name: "bob".into(),
        ..User::default()
    }));
    assert_eq!(bare["spec"]["username"], "bob");
    assert!(bare["spec"].get("uid").is_none() && bare["spec"].get("extra").is_none());
    let mut update = csr.clone();
    update["spec"]["signerName"] = json!("other.io/x");
    CertificateSigningRequests.prepare_for_update(&mut update, &csr);
    assert_eq!(update["spec"], csr["spec"]);
}

#[test]
fn validation_is_worded_as_upstream() {
    let bad = json!({"spec": {"request": STANDARD.encode("-\n"), "signerName": "nodomain/x",
        "usages": ["server auth", "flying", "server auth"], "expirationSeconds": 599},
        "status": {"conditions": [{"type": "Approved", "status": "False"}, {"type": "Denied", "status": "True"},
            {"type": "Pending", "status": "Maybe"}, {"type": "Pending", "status": ""}]}});
    assert_eq!(
        messages(&CertificateSigningRequests.validate(&bad)),
        vec![
            "spec.request: Invalid value: []byte{0x2d, 0xa}: PEM block type must be CERTIFICATE REQUEST",
            "spec.usages[1]: Unsupported value: \"flying\": supported values: \"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\"",
            "spec.usages[2]: Duplicate value: \"server auth\"",
            "spec.signerName: Invalid value: \"nodomain\": should be a domain with at least two segments separated by dots",
            "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)",
            "status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\"",
            "status.conditions: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive",
            "status.conditions[2].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
            "status.conditions[3].status: Required value",
            "status.conditions[3].type: Duplicate value: \"Pending\"",
        ]
    );
    let missing = json!({"spec": {"request": request_b64()}});
    assert_eq!(
        messages(&CertificateSigningRequests.validate(&missing)),
        vec![
            "spec.usages: Required value",
            "spec.signerName: Required value"
        ]
    );
    let legacy = json!({"spec": {"request": request_b64(), "usages": ["any"],
        "signerName": "kubernetes.io/legacy-unknown"}});
    assert_eq!(
        messages(&CertificateSigningRequests.validate(&legacy)),
        vec![
            "spec.signerName: Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version"
        ]
    );
    // What the stored object already breaks, its update may keep.
    assert!(
        CertificateSigningRequests
            .validate_update(&legacy, &legacy)
            .is_empty()
    );
}

#[test]
fn approvals_stay_and_conditions_default_true() {
    let mut csr = sample();
    let old = csr.clone();
    csr["status"]["conditions"] = json!([{"type": "Failed"}]);
    CertificateSigningRequests.set_defaults(&mut csr);
    assert_eq!(csr["status"]["conditions"][0]["status"], json!("True"));
    assert_eq!(
        messages(&CertificateSigningRequests.validate_update(&csr, &old)),
        vec![
            "status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
        ]
    );
}

/// `old` updated through `subresource` (None: `status`) to `new`, prepared as the store
/// prepares it (the spec carried over) and validated.
fn through(subresource: Option<&str>, mut new: Value, old: &Value) -> (Value, Vec<String>) {
    new["spec"] = old["spec"].clone();
    let csrs = CertificateSigningRequests;
    let errors = match subresource {
        None => {
            csrs.prepare_for_status_update(&mut new, old);
            csrs.validate_status_update(&new, old)
        }
        Some(sub) => {
            csrs.prepare_for_subresource_update(sub, &mut new, old);
            csrs.validate_subresource_update(sub, &new, old)
        }
    };
    (new, messages(&errors))
}

#[test]
fn approval_sets_the_conditions_alone_with_their_times() {
    let old = created(Some(&alice()));
    let mut approve = old.clone();
    approve["status"] = json!({"certificate": certificate_b64(), "conditions": [{"type": "Approved",
        "status": "True", "reason": "KubectlApprove", "message": "ok"}]});
    let (approved, errors) = through(Some("approval"), approve, &old);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(approved["status"].get("certificate").is_none(), "kept");
    let condition = &approved["status"]["conditions"][0];
    assert_eq!(condition["reason"], "KubectlApprove");
    let stamped = condition["lastUpdateTime"].as_str().unwrap();
    assert!(Time::parse(stamped).is_some());
    assert_eq!(condition["lastTransitionTime"], stamped);
    // Denying what is approved: both, refused as kubectl's deny would send it.
    let mut deny = approved.clone();
    deny["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Denied", "status": "True", "reason": "KubectlDeny"}));
    assert_eq!(
        through(Some("approval"), deny, &approved).1,
        vec![
            "status.conditions: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
        ]
    );
    // Taking the approval back is refused.
    let mut withdraw = approved.clone();
    withdraw["status"]["conditions"] = json!([]);
    assert_eq!(
        through(Some("approval"), withdraw, &approved).1,
        vec![
            "status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
        ]
    );
}

#[test]
fn status_sets_the_certificate_and_keeps_the_approval() {
    let old = created(Some(&alice()));
    let (approved, _) = through(
        Some("approval"),
        json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "R"}]}}),
        &old,
    );
    let certificate = certificate_b64();
    // The Approved condition as sent is replaced by the stored one; Failed gets its times.
    let issue = json!({"status": {"certificate": certificate,
        "conditions": [{"type": "Approved", "status": "True", "reason": "Changed"},
            {"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let (issued, errors) = through(None, issue, &approved);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(issued["status"]["certificate"], json!(certificate));
    assert_eq!(
        issued["status"]["conditions"][0],
        approved["status"]["conditions"][0]
    );
    let failed = &issued["status"]["conditions"][1];
    assert_eq!(failed["lastTransitionTime"], "2026-01-01T00:00:00Z");
    assert!(failed["lastUpdateTime"].is_string());
    // A set certificate stays; Approved and Denied are approval's.
    let again = json!({"status": {"certificate": certificate_b64(),
        "conditions": issued["status"]["conditions"]}});
    assert_eq!(
        through(None, again, &issued).1,
        vec!["status.certificate: Forbidden: updates may not modify existing certificate content"]
    );
    let deny = json!({"status": {"conditions": [{"type": "Denied", "status": "True"}]}});
    assert_eq!(
        through(None, deny, &old).1,
        vec!["status.conditions: Forbidden: updates may not add a condition of type \"Denied\""]
    );
    // The certificate must be PEM CERTIFICATE blocks, without headers.
    for (pem, problem) in [
        ("junk", "must contain at least one CERTIFICATE PEM block"),
        (
            "-----BEGIN PRIVATE KEY-----\nMAMCAQE=\n-----END PRIVATE KEY-----\n",
            "only CERTIFICATE PEM blocks are allowed, found \"PRIVATE KEY\"",
        ),
        (
            "-----BEGIN CERTIFICATE-----\nA: b\n\nMAMCAQE=\n-----END CERTIFICATE-----\n",
            "no PEM block headers are permitted",
        ),
        (
            "-----BEGIN CERTIFICATE-----\nMAMC\n-----END CERTIFICATE-----\n",
            "x509: malformed certificate",
        ),
    ] {
        let bad = json!({"status": {"certificate": STANDARD.encode(pem),
            "conditions": approved["status"]["conditions"]}});
        assert_eq!(
            through(None, bad, &approved).1,
            vec![format!(
                "status.certificate: Invalid value: \"<certificate data>\": {problem}"
            )],
            "{pem}"
        );
    }
}

#[test]
fn printed_as_print_certificate_signing_request() {
    let mut csr = sample();
    assert_eq!(
        CertificateSigningRequests.cells(&csr, Time(1_780_000_000)),
        vec![
            json!("web"),
            json!("10m"),
            json!("example.com/serving"),
            json!("mallory"),
            json!("24h"),
            json!("Approved")
        ]
    );
    csr["status"]["certificate"] = json!("Zm9v");
    csr["status"]["conditions"] =
        json!([{"type": "Denied", "status": "True"}, {"type": "Failed", "status": "True"}]);
    csr["spec"] = json!({});
    let cells = CertificateSigningRequests.cells(&csr, Time(1_780_000_000));
    assert_eq!(
        (&cells[2], &cells[4], &cells[5]),
        (
            &json!("<none>"),
            &json!("<none>"),
            &json!("Denied,Failed,Issued")
        )
    );
}
