//! JSON as Go's `encoding/json` writes the autoscaling/v1 types kube-apiserver keeps in an
//! HPA's round-trip annotations: struct fields in their declared order (one order fits every
//! struct involved, [`FIELD_ORDER`]), map keys sorted.

use serde_json::Value;

/// Field names in the order the Go structs declare them: autoscaling/v1 `MetricSpec`,
/// `MetricStatus` and their sources, `CrossVersionObjectReference`, `LabelSelector`,
/// `HorizontalPodAutoscalerCondition`, and the internal `HorizontalPodAutoscalerBehavior`
/// (whose fields have no JSON tags). Keys not listed (a map's) follow, sorted.
const FIELD_ORDER: &[&str] = &[
    "type",
    "status",
    "lastTransitionTime",
    "reason",
    "message",
    "object",
    "pods",
    "resource",
    "containerResource",
    "external",
    "kind",
    "target",
    "name",
    "apiVersion",
    "metricName",
    "metricSelector",
    "targetValue",
    "targetAverageUtilization",
    "targetAverageValue",
    "currentValue",
    "currentAverageUtilization",
    "currentAverageValue",
    "selector",
    "averageValue",
    "container",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "ScaleUp",
    "ScaleDown",
    "StabilizationWindowSeconds",
    "SelectPolicy",
    "Policies",
    "Tolerance",
    "Type",
    "Value",
    "PeriodSeconds",
];

/// `v` written as Go writes the struct it holds.
pub fn encode(v: &Value) -> String {
    let mut out = String::new();
    write(v, &mut out);
    out
}

fn write(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            let rank = |k: &str| {
                FIELD_ORDER
                    .iter()
                    .position(|f| *f == k)
                    .unwrap_or(usize::MAX)
            };
            keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                write(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_follow_the_go_structs() {
        let spec =
            json!({"resource": {"targetAverageValue": "1", "name": "memory"}, "type": "Resource"});
        assert_eq!(
            encode(&spec),
            r#"{"type":"Resource","resource":{"name":"memory","targetAverageValue":"1"}}"#
        );
        let sel = json!({"matchLabels": {"b": "1", "a": "2"}});
        assert_eq!(encode(&sel), r#"{"matchLabels":{"a":"2","b":"1"}}"#);
    }
}
