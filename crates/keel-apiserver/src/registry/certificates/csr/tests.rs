//! CertificateSigningRequest defaults, validation and printing, expected as upstream's
//! strategy, `validation.go` and `printCertificateSigningRequest` give them.

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

#[test]
fn create_clears_the_requestor_and_status() {
    let mut csr = sample();
    CertificateSigningRequests.prepare_for_create(&mut csr);
    assert!(csr["spec"].get("username").is_none() && csr["spec"].get("groups").is_none());
    assert_eq!(csr["status"], json!({}));
    assert!(CertificateSigningRequests.validate(&csr).is_empty());
    let mut update = csr.clone();
    update["spec"]["signerName"] = json!("other.io/x");
    CertificateSigningRequests.prepare_for_update(&mut update, &csr);
    assert_eq!(update["spec"], csr["spec"]);
}

#[test]
fn validation_is_worded_as_upstream() {
    let bad = json!({"spec": {"request": STANDARD.encode("-\n"), "signerName": "nodomain/x",
        "usages": ["server auth", "flying", "server auth"], "expirationSeconds": 599},
        "status": {"conditions": [{"type": "Approved", "status": "False"}, {"type": "Denied", "status": "True"}]}});
    assert_eq!(
        messages(&CertificateSigningRequests.validate(&bad)),
        vec![
            "spec.request: Invalid value: []byte{0x2d, 0xa}: PEM block type must be CERTIFICATE REQUEST",
            "spec.usages[1]: Unsupported value: \"flying\": supported values: \"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\"",
            "spec.usages[2]: Duplicate value: \"server auth\"",
            "spec.signerName: Invalid value: \"nodomain\": should be a domain with at least two segments separated by dots",
            "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)",
            "status.conditions[0].status: Invalid value: \"False\": Approved condition may only be set to True",
            "status.conditions: Invalid value: [{\"status\":\"False\",\"type\":\"Approved\"},{\"status\":\"True\",\"type\":\"Denied\"}]: Approved and Denied conditions are mutually exclusive",
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
