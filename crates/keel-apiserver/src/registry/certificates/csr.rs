//! certificates.k8s.io/v1 CertificateSigningRequests (`csr`), cluster-scoped, with a
//! `status` subresource. `pkg/registry/certificates/certificates/strategy.go`: a new request's
//! requestor fields (`username`, `uid`, `groups`, `extra`) are cleared (upstream then sets
//! them from the request's user, which a [`Strategy`] does not see) and its status is
//! emptied; an update of the object keeps the stored spec and status. Defaults from
//! `pkg/apis/certificates/v1/defaults.go` (a condition's `status` True); validation from
//! `pkg/apis/certificates/validation/validation.go` (the request a PEM `CERTIFICATE REQUEST`,
//! `usages` required and known, `signerName` a domain-qualified path, `expirationSeconds` at
//! least 600, conditions, an issued certificate's PEM); printed as
//! `printCertificateSigningRequest` (NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION
//! CONDITION).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::pem::{blocks, go_bytes, is_der_sequence};
use crate::apimachinery::time::{Time, human_duration_secs};
use crate::apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use crate::registry::defaults::{as_map, default_value, object_entry};
use crate::registry::storage_k8s_io::fields::{items, present, str_at};
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, age, meta_str};
use crate::storage::FieldError;

/// The CertificateSigningRequest strategy.
pub struct CertificateSigningRequests;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["csr"],
    namespaced: false,
    status: true,
    ..ResourceInfo::new(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        "certificatesigningrequest",
    )
};

static COLUMNS: [Column; 6] = [
    NAME_COLUMN,
    AGE_COLUMN,
    Column::string(
        "SignerName",
        0,
        "Requested signer for the request. It is a qualified name in the form: \
            `scope-hostname.io/name`.",
    ),
    Column::string("Requestor", 0, "Base64-encoded PKCS#10 CSR data"),
    Column::string(
        "RequestedDuration",
        0,
        "expirationSeconds is the requested duration of validity of the issued certificate.",
    ),
    Column::string(
        "Condition",
        0,
        "Conditions applied to the request, such as approval or denial.",
    ),
];

/// `allValidUsages`, sorted.
const USAGES: [&str; 23] = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// `certificates.LegacyUnknownSignerName`.
const LEGACY_UNKNOWN: &str = "kubernetes.io/legacy-unknown";

/// The bytes of a `[]byte` field (base64 in JSON); None when unset or not base64.
fn bytes_at(obj: &Value, pointer: &str) -> Option<Vec<u8>> {
    present(obj, pointer)
        .and_then(Value::as_str)
        .and_then(|s| STANDARD.decode(s).ok())
}

/// `ParseCSR` and the DER framing `x509.ParseCertificateRequest` needs: the error text.
fn request_problem(request: &[u8]) -> Option<&'static str> {
    match blocks(request).into_iter().next() {
        Some(b) if b.kind == "CERTIFICATE REQUEST" => {
            (!is_der_sequence(&b.bytes)).then_some("x509: malformed certificate request")
        }
        _ => Some("PEM block type must be CERTIFICATE REQUEST"),
    }
}

/// `validateCertificate` of an issued certificate (PEM CERTIFICATE blocks only).
fn certificate_problem(cert: &[u8]) -> Option<String> {
    if cert.is_empty() {
        return None;
    }
    let found = blocks(cert);
    if found.is_empty() {
        return Some("must contain at least one CERTIFICATE PEM block".to_string());
    }
    for b in found {
        if b.kind != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found {}",
                crate::apimachinery::quote::go_quote(&b.kind)
            ));
        }
        if !is_der_sequence(&b.bytes) {
            return Some("x509: malformed certificate".to_string());
        }
    }
    None
}

/// `ValidateSignerName`.
fn signer_name(name: &str) -> Vec<FieldError> {
    const PATH: &str = "spec.signerName";
    if name.is_empty() {
        return vec![FieldError::required(PATH, "")];
    }
    let Some((domain, path)) = name.split_once('/').filter(|(_, p)| !p.contains('/')) else {
        return vec![FieldError::invalid(
            PATH,
            name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errors = Vec::new();
    if domain.len() > 253 {
        errors.push(FieldError::too_long(PATH, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some((label, problems)) = labels
        .iter()
        .map(|l| (l, is_dns1123_label(l)))
        .find(|(_, p)| !p.is_empty())
    {
        for p in problems {
            errors.push(FieldError::invalid(
                PATH,
                domain,
                &format!("validating label {label:?}: {p}"),
            ));
        }
    }
    if labels.len() < 2 {
        errors.push(FieldError::invalid(
            PATH,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    if let Some((part, problems)) = path
        .split('.')
        .map(|l| (l, is_dns1123_subdomain(l)))
        .find(|(_, p)| !p.is_empty())
    {
        for p in problems {
            errors.push(FieldError::invalid(
                PATH,
                path,
                &format!("validating component {part:?}: {p}"),
            ));
        }
    }
    if name.len() > 253 + 1 + 316 {
        errors.push(FieldError::too_long(PATH, 253 + 1 + 316));
    }
    errors
}

/// `validateConditions` (v1's options: types required, one of each, Approved and Denied
/// only True and never both).
fn conditions(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = items(obj, "/status/conditions");
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in list.iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let (ty, status) = (str_at(c, "/type"), str_at(c, "/status"));
        if ty.is_empty() {
            errors.push(FieldError::required(&format!("{at}.type"), ""));
        }
        if !["True", "False", "Unknown"].contains(&status) {
            errors.push(FieldError::not_supported(
                &format!("{at}.status"),
                status,
                &["False", "True", "Unknown"],
            ));
        }
        for (kind, flag) in [("Approved", &mut approved), ("Denied", &mut denied)] {
            if ty == kind {
                *flag = true;
                if status != "True" {
                    errors.push(FieldError::invalid(
                        &format!("{at}.status"),
                        status,
                        &format!("{kind} condition may only be set to True"),
                    ));
                }
            }
        }
        if seen.contains(&ty) {
            errors.push(FieldError::duplicate(&format!("{at}.type"), ty));
        }
        seen.push(ty);
    }
    if approved && denied {
        errors.push(FieldError::invalid(
            "status.conditions",
            Value::from(list.to_vec()),
            "Approved and Denied conditions are mutually exclusive",
        ));
    }
    errors
}

/// `validateCertificateSigningRequest` with v1's options.
fn validate_csr(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let request = bytes_at(obj, "/spec/request").unwrap_or_default();
    if let Some(problem) = request_problem(&request) {
        errors.push(FieldError::invalid_printed(
            "spec.request",
            go_bytes(&request),
            problem,
        ));
    }
    let usages = items(obj, "/spec/usages");
    if usages.is_empty() {
        errors.push(FieldError::required("spec.usages", ""));
    }
    for (i, u) in usages.iter().enumerate() {
        let u = u.as_str().unwrap_or("");
        if !USAGES.contains(&u) {
            errors.push(FieldError::not_supported(
                &format!("spec.usages[{i}]"),
                u,
                &USAGES,
            ));
        }
    }
    for (i, u) in usages.iter().enumerate() {
        if usages[..i].contains(u) {
            errors.push(FieldError::duplicate(
                &format!("spec.usages[{i}]"),
                u.clone(),
            ));
        }
    }
    let signer = str_at(obj, "/spec/signerName");
    if signer == LEGACY_UNKNOWN {
        errors.push(FieldError::invalid(
            "spec.signerName",
            signer,
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errors.extend(signer_name(signer));
    }
    if let Some(s) = present(obj, "/spec/expirationSeconds").and_then(Value::as_i64)
        && s < 600
    {
        errors.push(FieldError::invalid(
            "spec.expirationSeconds",
            s,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errors.extend(conditions(obj));
    let cert = bytes_at(obj, "/status/certificate").unwrap_or_default();
    if let Some(problem) = certificate_problem(&cert) {
        errors.push(FieldError::invalid(
            "status.certificate",
            "<certificate data>",
            &problem,
        ));
    }
    errors
}

/// `extractCSRStatus`: Denied, Approved or Pending, then `,Failed` and `,Issued`.
fn condition_text(obj: &Value) -> String {
    let has = |t: &str| {
        items(obj, "/status/conditions")
            .iter()
            .any(|c| str_at(c, "/type") == t)
    };
    let mut s = if has("Denied") {
        "Denied".to_string()
    } else if has("Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has("Failed") {
        s.push_str(",Failed");
    }
    if !str_at(obj, "/status/certificate").is_empty() {
        s.push_str(",Issued");
    }
    s
}

impl Strategy for CertificateSigningRequests {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        if let Some(Value::Array(list)) = obj.pointer_mut("/status/conditions") {
            for c in list.iter_mut() {
                let c = as_map(c);
                if c.get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    c.insert("status".into(), json!("True"));
                }
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        let m = as_map(obj);
        let spec = object_entry(m, "spec");
        for field in ["username", "uid", "groups", "extra"] {
            spec.remove(field);
        }
        m.insert("status".into(), json!({}));
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.set_defaults(new);
        let m = as_map(new);
        match old.get("spec") {
            Some(spec) => m.insert("spec".into(), spec.clone()),
            None => m.remove("spec"),
        };
        default_value(m, "status", json!({}));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_csr(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_csr(new);
        let old_cert = str_at(old, "/status/certificate");
        if !old_cert.is_empty() && str_at(new, "/status/certificate") != old_cert {
            errors.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
        for kind in ["Approved", "Denied", "Failed"] {
            let has = |o: &Value| {
                items(o, "/status/conditions")
                    .iter()
                    .any(|c| str_at(c, "/type") == kind)
            };
            if has(old) && !has(new) {
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!("updates may not remove a condition of type {kind:?}"),
                ));
            }
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let signer = match str_at(obj, "/spec/signerName") {
            "" => "<none>",
            s => s,
        };
        let duration = present(obj, "/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .map_or("<none>".to_string(), human_duration_secs);
        vec![
            Value::from(meta_str(obj, "name")),
            age(obj, now),
            Value::from(signer),
            Value::from(str_at(obj, "/spec/username")),
            Value::from(duration),
            Value::from(condition_text(obj)),
        ]
    }
}

#[cfg(test)]
mod tests;
