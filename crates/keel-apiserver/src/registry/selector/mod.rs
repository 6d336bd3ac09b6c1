//! Label and field selectors, parsed, validated, matched and worded as apimachinery does
//! (`k8s.io/apimachinery/pkg/labels/selector.go` `Parse` and `pkg/fields/selector.go`
//! `ParseSelector`, Kubernetes 1.34, the same release the object-name messages in
//! [`super::names`] follow).
//!
//! How kube-apiserver answers a bad selector on a list, watch or deletecollection: the
//! `labelSelector` and `fieldSelector` query parameters are decoded into
//! `metainternalversion.ListOptions` (`Convert_string_To_labels_Selector` and
//! `Convert_string_To_fields_Selector`, neither wraps the parser's error), and a decoding
//! failure becomes `errors.NewBadRequest(err.Error())`: a `Status` with `code` 400, `reason`
//! `BadRequest` and `message` exactly the text [`LabelSelector::parse`] or
//! [`FieldSelector::parse`] returns, e.g. `unable to parse requirement: found '', expected:
//! ',' or ')'` for `a in (b`, or `invalid selector: 'x'; can't understand 'x'`. A field
//! selector that parses but names a field the kind does not know is then rejected by the
//! kind's field label conversion, again as a 400 `BadRequest` whose message is the text of
//! [`FieldSelector::check_supported`]. No extra wrapping happens anywhere, so the HTTP layer
//! puts these strings in the `Status` as they are.
//!
//! Kubernetes 1.35 changed three details: "must be no more than 63 bytes" (for
//! "characters"), "a valid label key" (for "a qualified name") in the message for a key with
//! more than one `/`, and `x in (a,,)` parses (1.34 rejects it with `found ')', expected:
//! ',', or identifier`).
//!
//! [`labels`] holds label selectors and their matching, [`parse`] reads them as `labels.Parse`
//! does, and [`fields`] holds field selectors.

mod fields;
mod labels;
mod parse;

use serde_json::Value;

use crate::apimachinery::quote::go_quote;

pub use fields::FieldSelector;
pub use labels::{LabelSelector, Operator, Requirement};

/// Which objects a list or a watch wants (label and field selectors, already parsed).
pub type Filter = dyn Fn(&Value) -> bool + Send + Sync;

/// A list's or a watch's selection: its label and field selectors as one filter, and the
/// field values the field selector requires exactly (which a key or an index can serve).
pub struct Selection {
    /// Whether an object is selected.
    pub filter: Box<Filter>,
    /// The `field=value` requirements.
    pub exact: Vec<(String, String)>,
}

/// `field.Invalid(path, value, detail).Error()` for a string value.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// `field.Invalid(path, values, detail).Error()` for a list of values (rendered as JSON).
fn invalid_list(path: &str, values: &[String], detail: &str) -> String {
    let json = serde_json::to_string(values).unwrap_or_default();
    format!("{path}: Invalid value: {json}: {detail}")
}

/// `field.ErrorList.ToAggregate().Error()`: duplicates dropped, one message as it is, more
/// in brackets separated by `, `.
fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => None,
        1 => seen.pop(),
        _ => Some(format!("[{}]", seen.join(", "))),
    }
}
