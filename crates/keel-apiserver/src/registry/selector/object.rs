//! Label selectors as objects carry them (`metav1.LabelSelector`: `matchLabels` and
//! `matchExpressions`, in a Deployment's, a Job's or a PodDisruptionBudget's spec): read as a
//! selector (`LabelSelectorAsSelector`), printed (`FormatLabelSelector`) and validated
//! (`ValidateLabelSelector`), as apimachinery's `pkg/apis/meta/v1` does.

use serde_json::Value;

use super::{LabelSelector, Operator, Requirement};
use crate::apimachinery::validation::{is_qualified_name, is_valid_label_value};
use crate::registry::meta::validate_labels;
use crate::storage::FieldError;

/// The operators a `matchExpressions` requirement may name.
const OPERATORS: [(&str, Operator); 4] = [
    ("In", Operator::In),
    ("NotIn", Operator::NotIn),
    ("Exists", Operator::Exists),
    ("DoesNotExist", Operator::DoesNotExist),
];

/// The strings of a JSON list (none if it is not a list).
fn strings(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

impl LabelSelector {
    /// `LabelSelectorAsSelector`: an empty selector object selects everything (a missing
    /// one, which selects nothing, is the caller's to tell apart); the error is Go's text.
    pub fn from_object(selector: &Value) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value.as_str().unwrap_or("").to_string();
                requirements.push(Requirement::new(
                    key.clone(),
                    Operator::Equals,
                    vec![value],
                )?);
            }
        }
        let expressions = selector.get("matchExpressions").and_then(Value::as_array);
        for expression in expressions.into_iter().flatten() {
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or("");
            let Some((_, op)) = OPERATORS.iter().find(|(name, _)| *name == operator) else {
                return Err(format!(
                    "{} is not a valid label selector operator",
                    crate::apimachinery::quote::go_quote(operator)
                ));
            };
            let key = expression.get("key").and_then(Value::as_str).unwrap_or("");
            let mut values = strings(expression.get("values"));
            values.sort();
            values.dedup();
            requirements.push(Requirement::new(key.to_string(), *op, values)?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// `FormatLabelSelector`: the selector's text, `<none>` when it is empty and `<error>`
    /// when it does not read.
    pub fn format_object(selector: &Value) -> String {
        match LabelSelector::from_object(selector) {
            Ok(s) if s.is_empty() => "<none>".to_string(),
            Ok(s) => s.to_string(),
            Err(_) => "<error>".to_string(),
        }
    }
}

/// `ValidateLabelSelector` of the selector at `path`: its labels, and each requirement's
/// operator, key and values.
pub fn validate_label_selector(selector: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(labels) = selector.get("matchLabels") {
        errors.extend(validate_labels(labels, &format!("{path}.matchLabels")));
    }
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    for (i, expression) in expressions.into_iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = strings(expression.get("values"));
        let operator = expression
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or("");
        match operator {
            "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(
                &format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
                &format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(FieldError::invalid(
                &format!("{at}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = expression.get("key").and_then(Value::as_str).unwrap_or("");
        for problem in is_qualified_name(key) {
            errors.push(FieldError::invalid(&format!("{at}.key"), key, &problem));
        }
        for (j, value) in values.iter().enumerate() {
            for problem in is_valid_label_value(value) {
                errors.push(FieldError::invalid(
                    &format!("{at}.values[{j}]"),
                    value.as_str(),
                    &problem,
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::{Map, json};

    #[test]
    fn objects_read_print_and_match_as_apimachinery_does() {
        let selector = json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]});
        assert_eq!(
            LabelSelector::format_object(&selector),
            "app=web,!gone,tier in (a,b)"
        );
        let parsed = LabelSelector::from_object(&selector).unwrap();
        let labels: Map<String, Value> =
            serde_json::from_value(json!({"app": "web", "tier": "a"})).unwrap();
        assert!(parsed.matches(&labels));
        assert_eq!(LabelSelector::format_object(&json!({})), "<none>");
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(
            LabelSelector::from_object(&bad).unwrap_err(),
            "\"Gt\" is not a valid label selector operator"
        );
        assert_eq!(LabelSelector::format_object(&bad), "<error>");
    }

    #[test]
    fn selectors_are_validated_in_upstream_words() {
        let selector = json!({"matchLabels": {"app": "-x"}, "matchExpressions": [
            {"key": "a", "operator": "In"},
            {"key": "b", "operator": "Exists", "values": ["x"]},
            {"key": "c/d/e", "operator": "Near"}]});
        let errors = messages(&validate_label_selector(&selector, "spec.selector"));
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert!(errors[0].starts_with("spec.selector.matchLabels: Invalid value: \"-x\": "));
        assert_eq!(
            errors[1],
            "spec.selector.matchExpressions[0].values: Required value: must be specified when \
             `operator` is 'In' or 'NotIn'"
        );
        assert_eq!(
            errors[2],
            "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when \
             `operator` is 'Exists' or 'DoesNotExist'"
        );
        assert_eq!(
            errors[3],
            "spec.selector.matchExpressions[2].operator: Invalid value: \"Near\": not a valid \
             selector operator"
        );
        assert!(errors[4].starts_with("spec.selector.matchExpressions[2].key: Invalid value: "));
    }
}
