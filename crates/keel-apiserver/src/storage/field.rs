//! Field errors, as apimachinery's `field` package words them: what a validation found
//! wrong with one field of a request or an object. A list of them becomes one 422 Invalid
//! `Status` ([`super::Status::invalid`]), each error one of its causes.

use std::fmt;

/// Go's `%q`, kept at this path for the modules that name it here.
use crate::apimachinery::quote::go_quote;

/// What is wrong with the field (the cause's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `FieldValueNotFound`: "Not found".
    NotFound,
    /// `FieldValueRequired`: "Required value".
    Required,
    /// `FieldValueDuplicate`: "Duplicate value".
    Duplicate,
    /// `FieldValueInvalid`: "Invalid value".
    Invalid,
    /// `FieldValueNotSupported`: "Unsupported value".
    NotSupported,
    /// `FieldValueForbidden`: "Forbidden".
    Forbidden,
    /// `FieldValueTooLong`: "Too long".
    TooLong,
    /// `FieldValueTooMany`: "Too many".
    TooMany,
    /// `FieldValueTypeInvalid`: "Invalid value" (the value is not of the field's type).
    TypeInvalid,
}

impl Kind {
    /// The cause type a client sees.
    pub fn cause_type(self) -> &'static str {
        match self {
            Kind::NotFound => "FieldValueNotFound",
            Kind::Required => "FieldValueRequired",
            Kind::Duplicate => "FieldValueDuplicate",
            Kind::Invalid => "FieldValueInvalid",
            Kind::NotSupported => "FieldValueNotSupported",
            Kind::Forbidden => "FieldValueForbidden",
            Kind::TooLong => "FieldValueTooLong",
            Kind::TooMany => "FieldValueTooMany",
            Kind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Kind::NotFound => "Not found",
            Kind::Required => "Required value",
            Kind::Duplicate => "Duplicate value",
            Kind::Invalid => "Invalid value",
            Kind::NotSupported => "Unsupported value",
            Kind::Forbidden => "Forbidden",
            Kind::TooLong => "Too long",
            Kind::TooMany => "Too many",
            Kind::TypeInvalid => "Invalid value",
        }
    }

    /// Whether the message leaves the bad value out (as Go's `ErrorBody` does).
    fn omits_value(self) -> bool {
        matches!(self, Kind::Required | Kind::Forbidden | Kind::TooLong)
    }
}

/// One field error.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: Kind,
    /// The field's path (`metadata.name`, `spec.containers[0].image`).
    pub field: String,
    /// The bad value (JSON), if the message shows it.
    pub value: Option<serde_json::Value>,
    /// The bad value as Go's `json.Marshal` wrote it, when a JSON value cannot say it (the
    /// fields of a struct in their declared order): shown instead of `value`.
    pub printed: Option<String>,
    /// More words.
    pub detail: String,
}

impl FieldError {
    /// `<field>: Invalid value: <value>: <detail>`.
    pub fn invalid(field: &str, value: impl Into<serde_json::Value>, detail: &str) -> Self {
        Self::new(Kind::Invalid, field, Some(value.into()), detail)
    }

    /// `<field>: Invalid value: <printed>: <detail>`, the value as Go's `json.Marshal` wrote
    /// it.
    pub fn invalid_printed(field: &str, printed: String, detail: &str) -> Self {
        FieldError {
            printed: Some(printed),
            ..Self::new(Kind::Invalid, field, None, detail)
        }
    }

    /// `<field>: Invalid value: <detail>`, the value left out (Go's `field.OmitValueType`).
    pub fn invalid_omitted(field: &str, detail: &str) -> Self {
        Self::new(Kind::Invalid, field, None, detail)
    }

    /// `<field>: Required value[: <detail>]`.
    pub fn required(field: &str, detail: &str) -> Self {
        Self::new(Kind::Required, field, None, detail)
    }

    /// `<field>: Forbidden: <detail>`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self::new(Kind::Forbidden, field, None, detail)
    }

    /// `<field>: Unsupported value: "<value>": supported values: "<a>", "<b>"`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|v| go_quote(v)).collect();
        let detail = format!("supported values: {}", quoted.join(", "));
        Self::new(Kind::NotSupported, field, Some(value.into()), &detail)
    }

    /// `<field>: Too long: may not be more than <max> bytes`.
    pub fn too_long(field: &str, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        let detail = format!("may not be more than {max} {unit}");
        Self::new(Kind::TooLong, field, None, &detail)
    }

    /// `<field>: Too many: <actual>: must have at most <max> items`.
    pub fn too_many(field: &str, actual: usize, max: usize) -> Self {
        let detail = format!("must have at most {max} items");
        Self::new(Kind::TooMany, field, Some(actual.into()), &detail)
    }

    /// `<field>: Invalid value: <value>: <detail>`, a value not of the field's type.
    pub fn type_invalid(field: &str, value: impl Into<serde_json::Value>, detail: &str) -> Self {
        Self::new(Kind::TypeInvalid, field, Some(value.into()), detail)
    }

    /// `<field>: Duplicate value: <value>`.
    pub fn duplicate(field: &str, value: impl Into<serde_json::Value>) -> Self {
        Self::new(Kind::Duplicate, field, Some(value.into()), "")
    }

    /// `<field>: Not found: <value>`.
    pub fn not_found(field: &str, value: impl Into<serde_json::Value>) -> Self {
        Self::new(Kind::NotFound, field, Some(value.into()), "")
    }

    fn new(kind: Kind, field: &str, value: Option<serde_json::Value>, detail: &str) -> Self {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            printed: None,
            detail: detail.to_string(),
        }
    }

    /// The message without the field (a cause's `message`; Go's `ErrorBody`).
    pub fn body(&self) -> String {
        let mut s = self.kind.words().to_string();
        if let (false, Some(printed)) = (self.kind.omits_value(), &self.printed) {
            s.push_str(": ");
            s.push_str(printed);
        } else if !self.kind.omits_value() {
            match &self.value {
                // No value at all is an omitted one (`field.OmitValueType`).
                None => {}
                Some(serde_json::Value::Null) => s.push_str(": null"),
                Some(serde_json::Value::String(v)) => {
                    s.push_str(": ");
                    s.push_str(&go_quote(v));
                }
                Some(v) => s.push_str(&format!(": {v}")),
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Several errors as Go's `ErrorList.ToAggregate` prints them: one alone, or `[a, b]`, each
/// message once.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut messages: Vec<String> = Vec::new();
    for e in errors {
        let m = e.to_string();
        if !messages.contains(&m) {
            messages.push(m);
        }
    }
    match messages.len() {
        1 => messages.swap_remove(0),
        _ => format!("[{}]", messages.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_errors_read_as_apimachinery_writes_them() {
        let cases = [
            (
                FieldError::invalid(
                    "metadata.name",
                    "Bad_Name",
                    "a lowercase RFC 1123 subdomain must consist of ...",
                ),
                r#"metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of ..."#,
            ),
            (
                FieldError::invalid("spec.replicas", -1, "must be greater than or equal to 0"),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                FieldError::required("metadata.name", ""),
                "metadata.name: Required value",
            ),
            (
                FieldError::required("metadata.name", "name or generateName is required"),
                "metadata.name: Required value: name or generateName is required",
            ),
            (
                FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ),
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
            ),
            (
                FieldError::not_supported(
                    "resourceVersionMatch",
                    "Newest",
                    &["Exact", "NotOlderThan", ""],
                ),
                r#"resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", """#,
            ),
            (
                FieldError::too_many("spec.items", 3, 2),
                "spec.items: Too many: 3: must have at most 2 items",
            ),
            (
                FieldError::type_invalid(
                    "spec.n",
                    "string",
                    "spec.n in body must be of type integer: \"string\"",
                ),
                r#"spec.n: Invalid value: "string": spec.n in body must be of type integer: "string""#,
            ),
            (
                FieldError::duplicate("spec.ports[1].name", "http"),
                r#"spec.ports[1].name: Duplicate value: "http""#,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
        let one = [cases_first()];
        assert_eq!(aggregate(&one), "a: Required value");
        let two = [
            cases_first(),
            FieldError::forbidden("b", "no"),
            cases_first(),
        ];
        assert_eq!(aggregate(&two), "[a: Required value, b: Forbidden: no]");
    }

    fn cases_first() -> FieldError {
        FieldError::required("a", "")
    }
}
