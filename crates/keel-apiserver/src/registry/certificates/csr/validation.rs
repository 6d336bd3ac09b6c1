//! CertificateSigningRequest validation, as `pkg/apis/certificates/validation/validation.go`
//! words it: `ValidateCertificateSigningRequestCreate` and the update validations of the
//! object, its `status` and its `approval` (each with its own
//! `certificateValidationOptions`: what the path may set, and what an old object already
//! breaking a rule lets its update keep).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::super::pem::{blocks, go_bytes, is_der_sequence};
use crate::apimachinery::quote::go_quote;
use crate::apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use crate::registry::storage_k8s_io::fields::{items, present, str_at};
use crate::storage::FieldError;

/// `allValidUsages`, sorted.
pub(super) const USAGES: [&str; 23] = [
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

/// The condition types whose status may only be True (`trueConditionTypes`).
const TRUE_ONLY: [&str; 3] = ["Approved", "Denied", "Failed"];

/// `certificateValidationOptions`: what an update path may set, and what is tolerated for
/// compatibility with an old object that already has it.
#[derive(Debug, Default, Clone, Copy)]
struct Options {
    /// Approved and Denied conditions may be added or changed (the `approval` path).
    setting_approval: bool,
    /// `status.certificate` may be set (the `status` path).
    setting_certificate: bool,
    both_approved_and_denied: bool,
    legacy_signer_name: bool,
    duplicate_condition_types: bool,
    empty_condition_type: bool,
    arbitrary_certificate: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
}

/// The bytes of a `[]byte` field (base64 in JSON); empty when unset or not base64.
fn bytes_at(obj: &Value, pointer: &str) -> Vec<u8> {
    present(obj, pointer)
        .and_then(Value::as_str)
        .and_then(|s| STANDARD.decode(s).ok())
        .unwrap_or_default()
}

/// The object's conditions of type `kind` (`findConditions`).
pub(super) fn conditions_of<'a>(obj: &'a Value, kind: &str) -> Vec<&'a Value> {
    items(obj, "/status/conditions")
        .iter()
        .filter(|c| str_at(c, "/type") == kind)
        .collect()
}

fn usages(obj: &Value) -> Vec<&str> {
    items(obj, "/spec/usages")
        .iter()
        .map(|u| u.as_str().unwrap_or(""))
        .collect()
}

fn has_duplicates<'a>(values: impl IntoIterator<Item = &'a str>) -> bool {
    let mut seen = Vec::new();
    values.into_iter().any(|v| {
        let again = seen.contains(&v);
        seen.push(v);
        again
    })
}

/// `getValidationOptions`: what `old` (None on create) already breaks, its update may keep.
fn options(new: &Value, old: Option<&Value>) -> Options {
    let Some(old) = old else {
        return Options::default();
    };
    let types = || {
        items(old, "/status/conditions")
            .iter()
            .map(|c| str_at(c, "/type"))
    };
    let same_certificate =
        bytes_at(new, "/status/certificate") == bytes_at(old, "/status/certificate");
    Options {
        both_approved_and_denied: types().any(|t| t == "Approved")
            && types().any(|t| t == "Denied"),
        legacy_signer_name: str_at(old, "/spec/signerName") == LEGACY_UNKNOWN,
        duplicate_condition_types: has_duplicates(types()),
        empty_condition_type: types().any(str::is_empty),
        arbitrary_certificate: same_certificate
            || certificate_problem(&bytes_at(old, "/status/certificate")).is_some(),
        unknown_usages: usages(old).iter().any(|u| !USAGES.contains(u)),
        duplicate_usages: has_duplicates(usages(old)),
        ..Options::default()
    }
}

/// `validateCSR` (`ParseCSR`, and the DER framing `x509.ParseCertificateRequest` needs):
/// the error text.
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
                go_quote(&b.kind)
            ));
        }
        if b.headers {
            return Some("no PEM block headers are permitted".to_string());
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

/// `validateConditions`.
fn conditions(obj: &Value, opts: Options) -> Vec<FieldError> {
    const PATH: &str = "status.conditions";
    let mut errors = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in items(obj, "/status/conditions").iter().enumerate() {
        let at = format!("{PATH}[{i}]");
        let (ty, status) = (str_at(c, "/type"), str_at(c, "/status"));
        if !opts.empty_condition_type && ty.is_empty() {
            errors.push(FieldError::required(&format!("{at}.type"), ""));
        }
        let allowed: &[&str] = if TRUE_ONLY.contains(&ty) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            errors.push(FieldError::required(&format!("{at}.status"), ""));
        } else if !allowed.contains(&status) {
            errors.push(FieldError::not_supported(
                &format!("{at}.status"),
                status,
                allowed,
            ));
        }
        if !opts.both_approved_and_denied {
            approved |= ty == "Approved";
            denied |= ty == "Denied";
            if (ty == "Approved" && denied) || (ty == "Denied" && approved) {
                errors.push(FieldError::invalid(
                    PATH,
                    ty,
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !opts.duplicate_condition_types {
            if seen.contains(&ty) {
                errors.push(FieldError::duplicate(&format!("{at}.type"), ty));
            }
            seen.push(ty);
        }
    }
    errors
}

/// `validateCertificateSigningRequest` (object metadata is validated for every kind).
fn validate(obj: &Value, opts: Options) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let request = bytes_at(obj, "/spec/request");
    if let Some(problem) = request_problem(&request) {
        errors.push(FieldError::invalid_printed(
            "spec.request",
            go_bytes(&request),
            problem,
        ));
    }
    let usages = usages(obj);
    if usages.is_empty() {
        errors.push(FieldError::required("spec.usages", ""));
    }
    if !opts.unknown_usages {
        for (i, u) in usages.iter().enumerate() {
            if !USAGES.contains(u) {
                errors.push(FieldError::not_supported(
                    &format!("spec.usages[{i}]"),
                    u,
                    &USAGES,
                ));
            }
        }
    }
    if !opts.duplicate_usages {
        for (i, u) in usages.iter().enumerate() {
            if usages[..i].contains(u) {
                errors.push(FieldError::duplicate(&format!("spec.usages[{i}]"), *u));
            }
        }
    }
    let signer = str_at(obj, "/spec/signerName");
    if !opts.legacy_signer_name && signer == LEGACY_UNKNOWN {
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
    errors.extend(conditions(obj, opts));
    if !opts.arbitrary_certificate
        && let Some(problem) = certificate_problem(&bytes_at(obj, "/status/certificate"))
    {
        errors.push(FieldError::invalid(
            "status.certificate",
            "<certificate data>",
            &problem,
        ));
    }
    errors
}

/// `ValidateCertificateSigningRequestCreate`.
pub fn validate_create(obj: &Value) -> Vec<FieldError> {
    validate(obj, options(obj, None))
}

/// `ValidateCertificateSigningRequestUpdate`: an update of the object.
pub fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    validate_update_with(new, old, options(new, Some(old)))
}

/// `ValidateCertificateSigningRequestStatusUpdate`: `status.certificate` may be set.
pub fn validate_status_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let opts = Options {
        setting_certificate: true,
        ..options(new, Some(old))
    };
    validate_update_with(new, old, opts)
}

/// `ValidateCertificateSigningRequestApprovalUpdate`: Approved and Denied conditions may be
/// added.
pub fn validate_approval_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let opts = Options {
        setting_approval: true,
        ..options(new, Some(old))
    };
    validate_update_with(new, old, opts)
}

/// `validateCertificateSigningRequestUpdate`.
fn validate_update_with(new: &Value, old: &Value, opts: Options) -> Vec<FieldError> {
    let mut errors = validate(new, opts);
    for kind in TRUE_ONLY {
        if conditions_of(new, kind).len() < conditions_of(old, kind).len() {
            errors.push(FieldError::forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {kind:?}"),
            ));
        }
    }
    if !opts.setting_approval {
        for kind in ["Approved", "Denied"] {
            let (old, new) = (conditions_of(old, kind), conditions_of(new, kind));
            if new.len() > old.len() {
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type {kind:?}"),
                ));
            } else if new.len() == old.len() && new != old {
                // Upstream follows this with its `diff.Diff` of the two; keel shows both.
                let shown = |c: &[&Value]| serde_json::to_string(c).unwrap_or_default();
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!(
                        "updates may not modify a condition of type {kind:?}\n- {}\n+ {}",
                        shown(&old),
                        shown(&new)
                    ),
                ));
            }
        }
    }
    let certificate = bytes_at(new, "/status/certificate");
    let old_certificate = bytes_at(old, "/status/certificate");
    if certificate != old_certificate {
        if !opts.setting_certificate {
            errors.push(FieldError::forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !old_certificate.is_empty() {
            errors.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
    errors
}
