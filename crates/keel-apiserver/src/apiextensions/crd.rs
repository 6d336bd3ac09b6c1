//! The CustomResourceDefinition object itself (`apiextensions.k8s.io/v1`): its defaults
//! (`SetDefaults_CustomResourceDefinition`), its validation
//! (`ValidateCustomResourceDefinition` and `...Update`, upstream's words), and its status as
//! the naming controller and the establishing controller write it (accepted names,
//! `NamesAccepted`, `Established`, stored versions).
//!
//! Where a message shows a whole Go value (`spec.versions: Invalid value:
//! []apiextensions.CustomResourceDefinitionVersion{...}`), keel shows it as JSON. Conversion
//! webhooks are refused (`Forbidden`): keel does not call webhooks, and a CRD that needs one
//! would answer wrongly rather than fail.

use serde_json::{Value, json};

use super::structural;
use crate::apimachinery::quote::go_quote;
use crate::registry::names::NameRule;
use crate::storage::FieldError;

/// The printer column types a CRD may name.
const COLUMN_TYPES: [&str; 5] = ["integer", "number", "string", "boolean", "date"];
/// The printer column formats a CRD may name.
const COLUMN_FORMATS: [&str; 8] = [
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
];

/// `obj.spec.<pointer>` as a string ("" when unset).
fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The name of the version a CRD's objects are stored in (the one with `storage: true`).
pub fn storage_version(crd: &Value) -> Option<&str> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage") == Some(&Value::Bool(true)))?
        .get("name")?
        .as_str()
}

/// Sets the defaults a CRD gets: `names.singular` the lower-case kind, `names.listKind`
/// `<kind>List`, `conversion.strategy` `None`.
pub fn set_defaults(crd: &mut Value) {
    let kind = text(crd, "/spec/names/kind").to_string();
    let Some(names) = crd
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if !kind.is_empty() {
        if names
            .get("singular")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            names.insert("singular".into(), kind.to_lowercase().into());
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            names.insert("listKind".into(), format!("{kind}List").into());
        }
    }
    if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) {
        let conversion = spec.entry("conversion").or_insert_with(|| json!({}));
        if let Some(conversion) = conversion.as_object_mut() {
            conversion
                .entry("strategy")
                .or_insert_with(|| "None".into());
        }
    }
}

/// apimachinery's `IsDNS1035Label`: what is wrong with `value` as an RFC 1035 label.
pub fn dns1035_label(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 63 {
        problems.push("must be no more than 63 characters".to_string());
    }
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !ok {
        problems.push(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character (e.g. \
             'my-name',  or 'abc-123', regex used for validation is \
             '[a-z]([-a-z0-9]*[a-z0-9])?')"
                .to_string(),
        );
    }
    problems
}

fn label(errors: &mut Vec<FieldError>, field: &str, value: &str, prefix: &str) {
    let problems = dns1035_label(value);
    if !problems.is_empty() {
        errors.push(FieldError::invalid(
            field,
            value,
            &format!("{prefix}{}", problems.join(",")),
        ));
    }
}

/// The errors of a CRD about to be created (its defaults set).
pub fn validate(crd: &Value) -> Vec<FieldError> {
    let mut errors = validate_spec(crd);
    errors.extend(validate_api_approval(crd, None));
    errors
}

/// The annotation a CRD in a protected group (`k8s.io`, `kubernetes.io` and their
/// subdomains) must have.
const API_APPROVED: &str = "api-approved.kubernetes.io";

/// Whether `annotation` is a URL with a scheme and a host, as Go's `url.ParseRequestURI`
/// finds them.
fn is_url(annotation: &str) -> bool {
    let Some((scheme, rest)) = annotation.split_once("://") else {
        return false;
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    scheme_ok && !host.is_empty() && !annotation.chars().any(|c| c.is_ascii_control())
}

/// The approval state of a CRD's annotations, as apiextensions' `GetAPIApprovalState`: 0
/// missing, 1 bypassed (`unapproved...`), 2 approved (a URL), 3 invalid; and its reason.
fn api_approval_state(crd: &Value) -> (u8, String) {
    let annotation = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED))
        .and_then(Value::as_str)
        .unwrap_or("");
    if annotation.is_empty() {
        let reason = format!(
            "protected groups must have approval annotation \"{API_APPROVED}\", see https://github.com/kubernetes/enhancements/pull/1111"
        );
        (0, reason)
    } else if annotation.starts_with("unapproved") {
        (1, format!("not approved: {}", go_quote(annotation)))
    } else if is_url(annotation) {
        (2, format!("approved in {annotation}"))
    } else {
        let reason = format!(
            "protected groups must have approval annotation \"{API_APPROVED}\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
        );
        (3, reason)
    }
}

/// A CRD of a protected group needs the approval annotation (a URL, or a reason starting
/// with `unapproved`); an update that leaves the annotation's state as it was passes, as
/// upstream's `validateAPIApproval`.
fn validate_api_approval(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let group = text(new, "/spec/group");
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|g| group == *g || group.ends_with(&format!(".{g}")));
    if !protected {
        return Vec::new();
    }
    let (state, reason) = api_approval_state(new);
    if old.is_some_and(|old| api_approval_state(old).0 == state) {
        return Vec::new();
    }
    let field = format!("metadata.annotations[{API_APPROVED}]");
    match state {
        0 => vec![FieldError::required(&field, &reason)],
        3 => {
            let value = new
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(API_APPROVED))
                .and_then(Value::as_str)
                .unwrap_or("");
            vec![FieldError::invalid(&field, value, &reason)]
        }
        _ => Vec::new(),
    }
}

/// What [`validate`] and [`validate_update`] both check.
fn validate_spec(crd: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    let name = text(crd, "/metadata/name");
    if name != format!("{plural}.{group}") {
        errors.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errors.push(FieldError::required("spec.group", ""));
    } else {
        for problem in NameRule::Subdomain.check(group, false) {
            errors.push(FieldError::invalid("spec.group", group, &problem));
        }
        if group.split('.').count() < 2 {
            errors.push(FieldError::invalid(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    match text(crd, "/spec/scope") {
        "" => errors.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errors.push(FieldError::not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }
    validate_names(crd, &mut errors);
    validate_versions(crd, &mut errors);
    validate_conversion(crd, &mut errors);
    errors
}

fn validate_names(crd: &Value, errors: &mut Vec<FieldError>) {
    for field in ["plural", "singular", "kind", "listKind"] {
        if text(crd, &format!("/spec/names/{field}")).is_empty() {
            errors.push(FieldError::required(&format!("spec.names.{field}"), ""));
        }
    }
    let empty = Value::Null;
    errors.extend(names_errors(
        crd.pointer("/spec/names").unwrap_or(&empty),
        "spec.names",
    ));
}

/// `ValidateCustomResourceDefinitionNames` of the names at `path` (`spec.names`,
/// `status.acceptedNames`): each set name a DNS-1035 label (the kinds in lower case), and
/// the kind and list kind not the same.
pub fn names_errors(names: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = |field: &str| names.get(field).and_then(Value::as_str).unwrap_or("");
    for field in ["plural", "singular"] {
        if !name(field).is_empty() {
            label(&mut errors, &format!("{path}.{field}"), name(field), "");
        }
    }
    for field in ["kind", "listKind"] {
        let value = name(field);
        if !value.is_empty() && !dns1035_label(&value.to_lowercase()).is_empty() {
            let problems = dns1035_label(&value.to_lowercase()).join(",");
            errors.push(FieldError::invalid(
                &format!("{path}.{field}"),
                value,
                &format!("may have mixed case, but should otherwise match: {problems}"),
            ));
        }
    }
    let list = |field: &str| {
        names
            .get(field)
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
    };
    for (i, v) in list("shortNames").iter().enumerate() {
        let at = format!("{path}.shortNames[{i}]");
        label(&mut errors, &at, v.as_str().unwrap_or(""), "");
    }
    if !name("kind").is_empty() && name("kind") == name("listKind") {
        errors.push(FieldError::invalid(
            &format!("{path}.listKind"),
            name("listKind"),
            "kind and listKind may not be the same or parsing become ambiguous",
        ));
    }
    for (i, v) in list("categories").iter().enumerate() {
        let at = format!("{path}.categories[{i}]");
        label(&mut errors, &at, v.as_str().unwrap_or(""), "");
    }
    errors
}

fn validate_versions(crd: &Value, errors: &mut Vec<FieldError>) {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        errors.push(FieldError::required(
            "spec.versions",
            "must have at least one version",
        ));
        return;
    }
    let mut seen = Vec::new();
    let mut storage = 0;
    for (i, version) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        let name = text(version, "/name");
        label(errors, &format!("{at}.name"), name, "");
        if seen.contains(&name) {
            errors.push(FieldError::invalid(
                "spec.versions",
                Value::Array(versions.clone()),
                "must contain unique version names",
            ));
        }
        seen.push(name);
        if version.get("storage") == Some(&Value::Bool(true)) {
            storage += 1;
        }
        for flag in ["served", "storage"] {
            if !version.get(flag).is_some_and(Value::is_boolean) {
                errors.push(FieldError::required(&format!("{at}.{flag}"), ""));
            }
        }
        let schema_at = format!("{at}.schema.openAPIV3Schema");
        match version.pointer("/schema/openAPIV3Schema") {
            None | Some(Value::Null) => {
                errors.push(FieldError::required(&schema_at, "schemas are required"))
            }
            Some(schema) => errors.extend(structural::check(schema, &schema_at)),
        }
        validate_subresources(version, &at, errors);
        validate_columns(version, &at, errors);
        validate_selectable_fields(version, &at, errors);
    }
    if storage != 1 {
        errors.push(FieldError::invalid(
            "spec.versions",
            Value::Array(versions),
            "must have exactly one version marked as storage version",
        ));
    }
}

fn validate_subresources(version: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let Some(scale) = version.pointer("/subresources/scale") else {
        return;
    };
    let at = format!("{at}.subresources.scale");
    let path = |field: &str| text(scale, &format!("/{field}"));
    let mut under = |field: &str, prefixes: &[&str], what: &str, required: bool| {
        let value = path(field);
        if value.is_empty() {
            if required {
                errors.push(FieldError::required(&format!("{at}.{field}"), ""));
            }
        } else if !prefixes.iter().any(|p| value.starts_with(p)) {
            errors.push(FieldError::invalid(
                &format!("{at}.{field}"),
                value,
                &format!("should be a json path under {what}"),
            ));
        }
    };
    under("specReplicasPath", &[".spec."], ".spec", true);
    under("statusReplicasPath", &[".status."], ".status", true);
    under(
        "labelSelectorPath",
        &[".spec.", ".status."],
        "either .spec or .status",
        false,
    );
}

fn validate_columns(version: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let columns = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array);
    for (i, column) in columns.into_iter().flatten().enumerate() {
        let at = format!("{at}.additionalPrinterColumns[{i}]");
        if text(column, "/name").is_empty() {
            errors.push(FieldError::required(&format!("{at}.name"), ""));
        }
        let ty = text(column, "/type");
        if !COLUMN_TYPES.contains(&ty) {
            errors.push(FieldError::not_supported(
                &format!("{at}.type"),
                ty,
                &COLUMN_TYPES,
            ));
        }
        let format = text(column, "/format");
        if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
            errors.push(FieldError::not_supported(
                &format!("{at}.format"),
                format,
                &COLUMN_FORMATS,
            ));
        }
        if column.get("priority").and_then(Value::as_i64).unwrap_or(0) < 0 {
            errors.push(FieldError::invalid(
                &format!("{at}.priority"),
                column["priority"].clone(),
                "must be non-negative",
            ));
        }
        let path = text(column, "/jsonPath");
        if path.is_empty() {
            errors.push(FieldError::required(&format!("{at}.jsonPath"), ""));
        } else if !path.starts_with('.') {
            errors.push(FieldError::invalid(
                &format!("{at}.jsonPath"),
                path,
                "must be a simple json path starting with .",
            ));
        }
    }
}

fn validate_selectable_fields(version: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let fields = version.get("selectableFields").and_then(Value::as_array);
    let fields: Vec<&Value> = fields.into_iter().flatten().collect();
    if fields.len() > 8 {
        errors.push(FieldError::too_many(
            &format!("{at}.selectableFields"),
            fields.len(),
            8,
        ));
    }
    for (i, field) in fields.iter().enumerate() {
        let path = text(field, "/jsonPath");
        let here = format!("{at}.selectableFields[{i}].jsonPath");
        if path.is_empty() {
            errors.push(FieldError::required(&here, ""));
        } else if !path.starts_with('.')
            || path == ".metadata.name"
            || path == ".metadata.namespace"
        {
            errors.push(FieldError::invalid(
                &here,
                path,
                "must be a simple json path to a field other than metadata.name or metadata.namespace",
            ));
        }
    }
}

fn validate_conversion(crd: &Value, errors: &mut Vec<FieldError>) {
    match text(crd, "/spec/conversion/strategy") {
        "None" | "" => {}
        "Webhook" => errors.push(FieldError::forbidden(
            "spec.conversion.strategy",
            "keel does not call conversion webhooks: use None, which converts by setting apiVersion",
        )),
        other => errors.push(FieldError::not_supported(
            "spec.conversion.strategy",
            other,
            &["None", "Webhook"],
        )),
    }
}

/// The errors of an update of `old` to `new` (both with their defaults set).
pub fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = validate_spec(new);
    errors.extend(validate_api_approval(new, Some(old)));
    for (field, pointer) in [("spec.group", "/spec/group"), ("spec.scope", "/spec/scope")] {
        if text(new, pointer) != text(old, pointer) {
            errors.push(FieldError::invalid(
                field,
                text(new, pointer),
                "field is immutable",
            ));
        }
    }
    let versions: Vec<&str> = new
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| text(v, "/name"))
        .collect();
    let stored = old
        .pointer("/status/storedVersions")
        .and_then(Value::as_array);
    for (i, v) in stored.into_iter().flatten().enumerate() {
        let v = v.as_str().unwrap_or("");
        if !versions.contains(&v) {
            errors.push(FieldError::invalid(
                &format!("status.storedVersions[{i}]"),
                v,
                "must appear in spec.versions",
            ));
        }
    }
    errors
}

/// One condition as upstream's controllers write it.
fn condition(kind: &str, status: bool, reason: &str, message: &str, now: &str) -> Value {
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    })
}

/// The status of `crd` beside the CRDs `others` (every other CRD stored): its accepted names
/// and conditions as the naming controller writes them (a name another CRD of the same group
/// already accepted is a conflict), `Established` once its names are accepted, and its
/// stored versions (what was stored before, and the storage version). A condition keeps its
/// `lastTransitionTime` while its status stays.
pub fn status(crd: &Value, others: &[Value], now: &str) -> Value {
    let group = text(crd, "/spec/group");
    let mine = text(crd, "/metadata/name");
    let taken = |field: &str, value: &str| {
        !value.is_empty()
            && others.iter().any(|o| {
                text(o, "/metadata/name") != mine
                    && text(o, "/spec/group") == group
                    && accepted_names(o)
                        .iter()
                        .any(|(f, v)| *f == field && v == value)
            })
    };
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut conflict = None;
    for (field, value) in accepted_names(crd) {
        if taken(field, &value) {
            let reason = match field {
                "plural" => "PluralConflict",
                "singular" => "SingularConflict",
                "shortNames" => "ShortNamesConflict",
                "kind" => "KindConflict",
                _ => "ListKindConflict",
            };
            conflict = Some((reason, format!("{value:?} is already in use")));
            break;
        }
    }
    let old = crd.get("status");
    let previous_accepted = old.and_then(|s| s.get("acceptedNames")).cloned();
    let (accepted, names_condition) = match &conflict {
        None => (
            names,
            condition(
                "NamesAccepted",
                true,
                "NoConflicts",
                "no conflicts found",
                now,
            ),
        ),
        Some((reason, message)) => (
            previous_accepted.unwrap_or(json!({"plural": "", "kind": ""})),
            condition("NamesAccepted", false, reason, message, now),
        ),
    };
    let established = conflict.is_none()
        || old
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
    let established_condition = if established {
        condition(
            "Established",
            true,
            "InitialNamesAccepted",
            "the initial names have been accepted",
            now,
        )
    } else {
        condition(
            "Established",
            false,
            "NotAccepted",
            "not all names are accepted",
            now,
        )
    };
    let mut conditions = vec![names_condition, established_condition];
    let previous = old
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array);
    for c in &mut conditions {
        if let Some(p) = previous
            .into_iter()
            .flatten()
            .find(|p| p["type"] == c["type"] && p["status"] == c["status"])
        {
            c["lastTransitionTime"] = p["lastTransitionTime"].clone();
        }
    }
    let mut stored: Vec<Value> = old
        .and_then(|s| s.get("storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(storage) = storage_version(crd)
        && !stored.iter().any(|v| v == storage)
    {
        stored.push(storage.into());
    }
    json!({"acceptedNames": accepted, "conditions": conditions, "storedVersions": stored})
}

/// The names a CRD has accepted (its spec's, if it has no status yet), field by field.
fn accepted_names(crd: &Value) -> Vec<(&'static str, String)> {
    let names = crd
        .pointer("/status/acceptedNames")
        .filter(|n| !text(n, "/plural").is_empty())
        .or_else(|| crd.pointer("/spec/names"));
    let Some(names) = names else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for field in ["plural", "singular", "kind", "listKind"] {
        let value = text(names, &format!("/{field}"));
        if !value.is_empty() {
            out.push((field, value.to_string()));
        }
    }
    for short in names
        .get("shortNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        out.push(("shortNames", short.to_string()));
    }
    out
}

#[cfg(test)]
mod tests;
