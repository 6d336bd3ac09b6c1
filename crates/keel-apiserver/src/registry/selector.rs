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
//! Label selectors and their matching are here, `parse` reads them as `labels.Parse` does,
//! and `fields` holds field selectors.

mod fields;
mod object;
mod parse;

use std::fmt;

use serde_json::{Map, Value};

use crate::apimachinery::quote::go_quote;
use crate::apimachinery::validation::{is_qualified_name, is_valid_label_value};

pub use fields::FieldSelector;
pub use object::validate_label_selector;

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

// ---------------------------------------------------------------------------------------
// Label selectors.

/// A label selector requirement's operator (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key in (a,b)`.
    In,
    /// `key notin (a,b)`: also matches when the label is missing.
    NotIn,
    /// `key=value`.
    Equals,
    /// `key==value`.
    DoubleEquals,
    /// `key!=value`: also matches when the label is missing.
    NotEquals,
    /// `key`: the label is set.
    Exists,
    /// `!key`: the label is not set.
    DoesNotExist,
    /// `key>n`: the label is an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label is an integer less than `n`.
    LessThan,
}

/// One requirement of a label selector (`labels.Requirement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and without duplicates, as Go's `sets.String.List()` gives them.
    values: Vec<String>,
}

impl Requirement {
    /// `labels.NewRequirement` with no field path, as the parser calls it.
    pub(super) fn new(
        key: String,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Self, String> {
        let mut errs = Vec::new();
        let key_errs = is_qualified_name(&key);
        if !key_errs.is_empty() {
            errs.push(invalid("key", &key, &key_errs.join("; ")));
        }
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(invalid_list(
                        "values",
                        &values,
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(invalid_list(
                        "values",
                        &values,
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(invalid_list(
                        "values",
                        &values,
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(invalid_list(
                        "values",
                        &values,
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(invalid(
                            &format!("values[{i}]"),
                            v,
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = is_valid_label_value(v);
            if !value_errs.is_empty() {
                errs.push(invalid(
                    &format!("values[{i}][{key}]"),
                    v,
                    &value_errs.join("; "),
                ));
            }
        }
        match aggregate(errs) {
            Some(e) => Err(e),
            None => Ok(Requirement {
                key,
                operator,
                values,
            }),
        }
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted (empty for `Exists` and `DoesNotExist`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement (`Requirement.Matches`).
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        // A label that is not a string (never so in a valid object) counts as set to "".
        let get = |k: &str| labels.get(k).map(|v| v.as_str().unwrap_or(""));
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                get(&self.key).is_some_and(has)
            }
            Operator::NotIn | Operator::NotEquals => !get(&self.key).is_some_and(has),
            Operator::Exists => labels.contains_key(&self.key),
            Operator::DoesNotExist => !labels.contains_key(&self.key),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(Ok(have)) = get(&self.key).map(str::parse::<i64>) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Ok(want) = want.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// `Requirement.String()`: `!k`, `k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k>1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
            Operator::Exists => return write!(f, "{}", self.key),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::In | Operator::NotIn => {
                let op = if self.operator == Operator::In {
                    "in"
                } else {
                    "notin"
                };
                return write!(f, "{} {op} ({})", self.key, self.values.join(","));
            }
        };
        write!(f, "{}{op}{}", self.key, self.values.join(","))
    }
}

/// A parsed label selector (`labels.Selector`): requirements, all of which must hold, sorted
/// by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector as `labels.Parse` does; the error is Go's error text, word for word
    /// (kube-apiserver answers it as the message of a 400 `BadRequest`).
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut requirements = parse::requirements(s)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` (a `metadata.labels` map of string values) satisfy every requirement.
    /// The empty selector matches everything.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no requirements (it then selects everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for LabelSelector {
    /// `Selector.String()`: the requirements joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn label_selectors_match_as_go() {
        let cases = [
            // TestSelectorMatches.
            ("", json!({"x": "y"}), true),
            ("x=y", json!({"x": "y"}), true),
            ("x=y,z=w", json!({"x": "y", "z": "w"}), true),
            ("x!=y,z!=w", json!({"x": "z", "z": "a"}), true),
            ("notin=in", json!({"notin": "in"}), true),
            ("x", json!({"x": "z"}), true),
            ("!x", json!({"y": "z"}), true),
            ("x>1", json!({"x": "2"}), true),
            ("x<1", json!({"x": "0"}), true),
            ("x=z", json!({}), false),
            ("x=y", json!({"x": "z"}), false),
            ("x=y,z=w", json!({"x": "w", "z": "w"}), false),
            ("x!=y,z!=w", json!({"x": "z", "z": "w"}), false),
            ("x", json!({"y": "z"}), false),
            ("!x", json!({"x": "z"}), false),
            ("x>1", json!({"x": "0"}), false),
            ("x<1", json!({"x": "2"}), false),
            ("foo=bar", json!({"foo": "bar", "baz": "blah"}), true),
            ("baz=blah", json!({"foo": "bar", "baz": "blah"}), true),
            (
                "foo=bar,baz=blah",
                json!({"foo": "bar", "baz": "blah"}),
                true,
            ),
            ("foo=blah", json!({"foo": "bar", "baz": "blah"}), false),
            ("baz=bar", json!({"foo": "bar", "baz": "blah"}), false),
            (
                "foo=bar,foobar=bar,baz=blah",
                json!({"foo": "bar", "baz": "blah"}),
                false,
            ),
            // TestRequirementSelectorMatching.
            (
                "x in (foo),y notin (alpha)",
                json!({"x": "foo", "y": "baz"}),
                true,
            ),
            (
                "x in (foo),y in (alpha)",
                json!({"x": "foo", "y": "baz"}),
                false,
            ),
            ("x notin (),y", json!({"y": ""}), true),
            ("!x,y", json!({"y": ""}), true),
            ("x notin (),!y", json!({"y": ""}), false),
            ("x in ()", json!({"y": "baz"}), false),
            ("z>1", json!({"z": "2"}), true),
            ("z>1", json!({"z": "v2"}), false),
            // Missing labels: != and notin match, in and = do not, > and < do not.
            ("x!=a", json!({}), true),
            ("x notin (a,b)", json!({}), true),
            ("x in (a,b)", json!({}), false),
            ("x>0", json!({}), false),
            ("x in (a,b)", json!({"x": "b"}), true),
            ("x notin (a,b)", json!({"x": "b"}), false),
            ("x=", json!({"x": ""}), true),
            ("x=", json!({}), false),
            ("a = b , c", json!({"a": "b", "c": "d"}), true),
            ("a = b , c", json!({"a": "b"}), false),
            ("x>1", json!({"x": "02"}), true),
            ("x>1", json!({"x": "+5"}), true),
            ("x<10", json!({"x": "-3"}), true),
        ];
        for (s, l, want) in cases {
            let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.matches(&labels(l.clone())), want, "{s} on {l}");
        }
    }
}
