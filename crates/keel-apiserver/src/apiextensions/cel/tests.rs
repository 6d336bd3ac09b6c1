//! Cases from the Kubernetes docs' validation-rules examples, and the errors upstream gives.

use serde_json::{Value, json};

use super::{compile_rules, validate};
use crate::storage::FieldError;

const PATH: &str = "spec.validation.openAPIV3Schema";

fn strings(errors: Vec<FieldError>) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

/// A resource schema whose `spec` is `spec`.
fn resource(spec: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

fn rule(rule: &str) -> Value {
    json!({"rule": rule})
}

fn replicas(rules: Value) -> Value {
    resource(json!({
        "type": "object",
        "properties": {
            "minReplicas": {"type": "integer"},
            "replicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"}
        },
        "x-kubernetes-validations": rules
    }))
}

fn compiles(schema: &Value) {
    assert_eq!(strings(compile_rules(schema, PATH)), Vec::<String>::new());
}

/// The first error `compile_rules` gives starts with `<PATH>.<prefix>`.
fn first_error_starts(schema: &Value, prefix: &str) {
    let errors = strings(compile_rules(schema, PATH));
    let want = format!("{PATH}.{prefix}");
    assert!(
        errors.first().is_some_and(|e| e.starts_with(&want)),
        "{errors:#?}"
    );
}

fn run(schema: &Value, new: Value, old: Option<Value>) -> Vec<String> {
    strings(validate(schema, &new, old.as_ref(), ""))
}

#[test]
fn replicas_between_min_and_max() {
    let schema = replicas(json!([
        {"rule": "self.minReplicas <= self.replicas", "message": "replicas should be greater than or equal to minReplicas"},
        {"rule": "self.replicas <= self.maxReplicas", "message": "replicas should be smaller than or equal to maxReplicas"}
    ]));
    compiles(&schema);
    let ok = json!({"spec": {"minReplicas": 0, "replicas": 5, "maxReplicas": 10}});
    assert_eq!(run(&schema, ok, None), Vec::<String>::new());
    let bad = json!({"spec": {"minReplicas": 0, "replicas": 20, "maxReplicas": 10}});
    assert_eq!(
        run(&schema, bad, None),
        [
            r#"spec: Invalid value: "object": replicas should be smaller than or equal to maxReplicas"#
        ]
    );
}

#[test]
fn immutable_value_and_transition_rule_skipped_on_create() {
    let schema = resource(json!({
        "type": "object",
        "properties": {"name": {
            "type": "string",
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]
        }}
    }));
    compiles(&schema);
    let a = json!({"spec": {"name": "a"}});
    let b = json!({"spec": {"name": "b"}});
    assert_eq!(run(&schema, a.clone(), None), Vec::<String>::new());
    assert_eq!(
        run(&schema, a.clone(), Some(a.clone())),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&schema, b, Some(a)),
        [r#"spec.name: Invalid value: "string": Value is immutable"#]
    );
    // A whole spec with unbounded lists compares cheaply (a tenth of its size, as cel-go).
    let containers = json!({"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}});
    compiles(&resource(json!({
        "type": "object",
        "properties": {"containers": containers},
        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "spec is immutable"}]
    })));
}

#[test]
fn has_one_of_two_fields() {
    let schema = resource(json!({
        "type": "object",
        "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
        "x-kubernetes-validations": [rule("has(self.x) || has(self.y)")]
    }));
    compiles(&schema);
    assert_eq!(
        run(&schema, json!({"spec": {"y": "1"}}), None),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&schema, json!({"spec": {}}), None),
        [r#"spec: Invalid value: "object": failed rule: has(self.x) || has(self.y)"#]
    );
}

#[test]
fn property_names_are_escaped() {
    let schema = resource(json!({
        "type": "object",
        "properties": {"x-prop": {"type": "string"}, "namespace": {"type": "string"}, "a.b": {"type": "string"}},
        "x-kubernetes-validations": [rule("self.x__dash__prop == self.__namespace__ && has(self.a__dot__b)")]
    }));
    compiles(&schema);
    let ok = json!({"spec": {"x-prop": "n", "namespace": "n", "a.b": ""}});
    assert_eq!(run(&schema, ok, None), Vec::<String>::new());
    assert_eq!(
        run(
            &schema,
            json!({"spec": {"x-prop": "n", "namespace": "m"}}),
            None
        )
        .len(),
        1
    );
}

#[test]
fn all_keys_of_a_map() {
    let schema = resource(json!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "x-kubernetes-validations": [rule("self.all(k, k.startsWith('a'))")]
    }));
    compiles(&schema);
    assert_eq!(
        run(&schema, json!({"spec": {"ab": "1", "ac": "2"}}), None),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&schema, json!({"spec": {"ab": "1", "b": "2"}}), None),
        [r#"spec: Invalid value: "object": failed rule: self.all(k, k.startsWith('a'))"#]
    );
}

fn items(max_items: Option<u64>, rules: Value) -> Value {
    let mut list = json!({"type": "array", "items": {"type": "string"}});
    if let Some(n) = max_items {
        list["maxItems"] = json!(n);
        list["items"]["maxLength"] = json!(64);
    }
    resource(json!({
        "type": "object",
        "properties": {"items": list},
        "x-kubernetes-validations": rules
    }))
}

#[test]
fn list_comprehension_with_max_items_is_within_budget() {
    let schema = items(Some(100), json!([rule("self.items.all(i, i.size() < 10)")]));
    compiles(&schema);
    assert_eq!(
        run(&schema, json!({"spec": {"items": ["a", "b"]}}), None),
        Vec::<String>::new()
    );
    assert_eq!(
        run(
            &schema,
            json!({"spec": {"items": ["a", "bbbbbbbbbbbb"]}}),
            None
        ),
        [r#"spec: Invalid value: "object": failed rule: self.items.all(i, i.size() < 10)"#]
    );
}

#[test]
fn nested_iteration_over_unbounded_lists_is_refused() {
    let nested = "self.items.all(a, self.items.all(b, a == b || a != b))";
    let schema = items(None, json!([rule(nested)]));
    let errors = strings(compile_rules(&schema, PATH));
    let at = format!("{PATH}.properties[spec].x-kubernetes-validations[0].rule");
    assert!(
        errors.contains(&format!(
            "{at}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        )),
        "{errors:#?}"
    );
    assert!(errors.iter().any(|e| e.starts_with(&format!(
        "{PATH}: Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema exceeds budget"
    ))));
    // With maxItems (and maxLength, as the rule compares strings) the same rule fits.
    compiles(&items(Some(100), json!([rule(nested)])));
}

#[test]
fn rule_cost_multiplies_by_cardinality() {
    // A cheap rule on the items of an unbounded list of long strings runs once per item.
    let schema = resource(json!({
        "type": "array",
        "items": {"type": "string", "x-kubernetes-validations": [rule("self.matches('^[a-z]+$')")]}
    }));
    first_error_starts(
        &schema,
        "properties[spec].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of",
    );
    let bounded = resource(json!({
        "type": "array", "maxItems": 10,
        "items": {"type": "string", "maxLength": 64, "x-kubernetes-validations": [rule("self.matches('^[a-z]+$')")]}
    }));
    compiles(&bounded);
    assert_eq!(
        run(&bounded, json!({"spec": ["abc", "A"]}), None),
        [r#"spec[1]: Invalid value: "string": failed rule: self.matches('^[a-z]+$')"#]
    );
}

#[test]
fn message_expression_gives_the_message() {
    let schema = replicas(json!([{
        "rule": "self.replicas <= self.maxReplicas",
        "message": "too many",
        "messageExpression": "'replicas ' + string(self.replicas) + ' is more than ' + string(self.maxReplicas)"
    }]));
    compiles(&schema);
    let bad = json!({"spec": {"replicas": 20, "maxReplicas": 10}});
    assert_eq!(
        run(&schema, bad, None),
        [r#"spec: Invalid value: "object": replicas 20 is more than 10"#]
    );
    // A messageExpression that fails falls back to the message.
    let schema = replicas(json!([{
        "rule": "self.replicas <= self.maxReplicas",
        "message": "too many",
        "messageExpression": "'min ' + string(self.minReplicas)"
    }]));
    let bad = json!({"spec": {"replicas": 20, "maxReplicas": 10}});
    assert_eq!(
        run(&schema, bad, None),
        [r#"spec: Invalid value: "object": too many"#]
    );
}

#[test]
fn field_path_and_reason() {
    let schema = replicas(json!([
        {"rule": "has(self.replicas)", "fieldPath": ".replicas", "reason": "FieldValueRequired", "message": "replicas is required"},
        {"rule": "!has(self.minReplicas) || self.minReplicas >= 0", "fieldPath": ".minReplicas", "reason": "FieldValueForbidden", "message": "must not be negative"},
        {"rule": "!has(self.maxReplicas) || self.maxReplicas < 100", "reason": "FieldValueDuplicate"}
    ]));
    compiles(&schema);
    let bad = json!({"spec": {"minReplicas": -1, "maxReplicas": 100}});
    assert_eq!(
        run(&schema, bad, None),
        [
            "spec.replicas: Required value: replicas is required",
            "spec.minReplicas: Forbidden: must not be negative",
            r#"spec: Duplicate value: "object""#,
        ]
    );
}

#[test]
fn rule_fields_are_checked() {
    let schema = replicas(json!([
        {"rule": "self.replicas > 0", "message": "line\nbreak"},
        {"rule": "  "},
        {"rule": "self.replicas > 0", "reason": "Nope"},
        {"rule": "self.replicas > 0", "fieldPath": ".nope"},
        {"rule": "self.replicas > 0", "messageExpression": " "}
    ]));
    let at = format!("{PATH}.properties[spec].x-kubernetes-validations");
    assert_eq!(
        strings(compile_rules(&schema, PATH)),
        [
            format!(
                r#"{at}[0].message: Invalid value: "line\nbreak": message must not contain line breaks"#
            ),
            format!("{at}[1].rule: Required value: rule is not specified"),
            format!(
                r#"{at}[2].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
            ),
            format!(r#"{at}[3].fieldPath: Invalid value: ".nope": fieldPath must be a valid path"#),
            format!(
                "{at}[4].messageExpression: Required value: messageExpression must be non-empty if specified"
            ),
        ]
    );
}

#[test]
fn compile_errors_read_as_cel_go_writes_them() {
    let schema = replicas(json!([
        rule("self.replicas <"),
        rule("self.nope > 0"),
        rule("frobnicate(self) || self.replicas == 'one'"),
        rule("self.replicas"),
        {"rule": "self.replicas > 0", "messageExpression": "self.replicas + 1"}
    ]));
    let errors = strings(compile_rules(&schema, PATH));
    let at = format!("{PATH}.properties[spec].x-kubernetes-validations");
    let repr = |r: &str, m: &str| {
        format!(
            r#"apiextensions.ValidationRule{{Rule:"{r}", Message:"", MessageExpression:"{m}", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}}"#
        )
    };
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert!(
        errors[0].starts_with(&format!(
            "{at}[0].rule: Invalid value: {}: compilation failed: ERROR: <input>:1:",
            repr("self.replicas <", "")
        )),
        "{errors:#?}"
    );
    assert_eq!(
        errors[1],
        format!(
            "{at}[1].rule: Invalid value: {}: compilation failed: ERROR: <input>:1:5: undefined field 'nope'\n | self.nope > 0\n | ....^",
            repr("self.nope > 0", "")
        )
    );
    assert!(
        errors[2].contains("compilation failed: ERROR: <input>:1:")
            && errors[2].contains("undeclared reference to 'frobnicate' (in container '')")
            && errors[2].contains(
                "ERROR: <input>:1:35: found no matching overload for '_==_' applied to '(int, string)'"
            ),
        "{errors:#?}"
    );
    assert_eq!(
        errors[3],
        format!(
            "{at}[3].rule: Invalid value: {}: cel expression must evaluate to a bool",
            repr("self.replicas", "")
        )
    );
    assert_eq!(
        errors[4],
        format!(
            "{at}[4].messageExpression: Invalid value: {}: messageExpression must evaluate to a string",
            repr("self.replicas > 0", "self.replicas + 1")
        )
    );
}

#[test]
fn optional_old_self_runs_on_create_too() {
    let schema = resource(json!({
        "type": "integer",
        "x-kubernetes-validations": [{
            "rule": "self >= oldSelf.orValue(0)",
            "message": "may only grow",
            "optionalOldSelf": true
        }]
    }));
    compiles(&schema);
    let grow = || json!({"spec": 5});
    assert_eq!(
        run(&schema, json!({"spec": -1}), None),
        [r#"spec: Invalid value: "integer": may only grow"#]
    );
    assert_eq!(
        run(&schema, grow(), Some(json!({"spec": 3}))),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&schema, json!({"spec": 3}), Some(grow())),
        [r#"spec: Invalid value: "integer": may only grow"#]
    );
    // optionalOldSelf on a rule without oldSelf.
    let schema = resource(json!({
        "type": "integer",
        "x-kubernetes-validations": [{"rule": "self >= 0", "optionalOldSelf": true}]
    }));
    assert_eq!(
        strings(compile_rules(&schema, PATH)),
        [format!(
            "{PATH}.properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
        )]
    );
}

#[test]
fn old_self_needs_a_correlatable_place() {
    let list = |list_type: &str| {
        resource(json!({
            "type": "array", "maxItems": 10, "x-kubernetes-list-type": list_type,
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string", "maxLength": 10}, "value": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.value == oldSelf.value", "message": "value is immutable"}]
            }
        }))
    };
    assert_eq!(
        strings(compile_rules(&list("atomic"), PATH)),
        [format!(
            r#"{PATH}.properties[spec].items.x-kubernetes-validations[0].rule: Invalid value: "self.value == oldSelf.value": oldSelf cannot be used on the uncorrelatable portion of the schema within {PATH}.properties[spec]"#
        )]
    );
    let schema = list("map");
    compiles(&schema);
    let old = json!({"spec": [{"name": "a", "value": 1}, {"name": "b", "value": 2}]});
    let reordered = json!({"spec": [{"name": "b", "value": 2}, {"name": "a", "value": 1}, {"name": "c", "value": 9}]});
    assert_eq!(
        run(&schema, reordered, Some(old.clone())),
        Vec::<String>::new()
    );
    let changed = json!({"spec": [{"name": "a", "value": 1}, {"name": "b", "value": 3}]});
    assert_eq!(
        run(&schema, changed, Some(old)),
        [r#"spec[1]: Invalid value: "object": value is immutable"#]
    );
}

#[test]
fn unchanged_values_are_ratcheted() {
    let schema = replicas(json!([rule("self.replicas <= self.maxReplicas")]));
    let bad = json!({"spec": {"replicas": 20, "maxReplicas": 10}});
    assert_eq!(
        run(&schema, bad.clone(), Some(bad.clone())),
        Vec::<String>::new()
    );
    assert_eq!(run(&schema, bad, None).len(), 1);
}

#[test]
fn runtime_errors_are_reported() {
    let schema = replicas(json!([
        rule("self.replicas / self.minReplicas > 1"),
        rule("self.maxReplicas > 0")
    ]));
    let v = json!({"spec": {"replicas": 4, "minReplicas": 0}});
    assert_eq!(
        run(&schema, v, None),
        [
            r#"spec: Invalid value: "object": division by zero evaluating rule: self.replicas / self.minReplicas > 1"#,
            r#"spec: Invalid value: "object": no such key: maxReplicas evaluating rule: self.maxReplicas > 0"#,
        ]
    );
}

#[test]
fn a_call_past_the_per_call_limit_is_stopped() {
    let nested = "self.items.all(a, self.items.all(b, a == b || a != b))";
    let schema = items(None, json!([rule(nested)]));
    let small = json!({"spec": {"items": ["a", "b", "c"]}});
    assert_eq!(run(&schema, small, None), Vec::<String>::new());
    let many: Vec<String> = (0..2000).map(|i| format!("s{i}")).collect();
    let errors = run(&schema, json!({"spec": {"items": many}}), None);
    assert_eq!(
        errors,
        [format!(
            r#"spec: Invalid value: "object": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {nested}"#
        )]
    );
}

#[test]
fn kubernetes_library_functions() {
    let schema = resource(json!({
        "type": "object",
        "properties": {
            "nums": {"type": "array", "maxItems": 10, "items": {"type": "integer"}},
            "names": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 20}},
            "host": {"type": "string", "maxLength": 100},
            "at": {"type": "string", "format": "date-time"},
            "every": {"type": "string", "format": "duration"},
            "port": {"x-kubernetes-int-or-string": true},
            "absent": {"type": "string"}
        }
    }));
    let cases = [
        ("self.nums.isSorted()", true),
        (
            "self.nums.sum() == 6 && self.nums.min() == 1 && self.nums.max() == 3",
            true,
        ),
        (
            "self.nums.indexOf(2) == 1 && self.nums.lastIndexOf(9) == -1",
            true,
        ),
        (
            "self.names.join(',') == 'a,B' && 'a,B'.split(',') == self.names",
            true,
        ),
        (
            "self.names[1].lowerAscii() == 'b' && ' x '.trim().upperAscii() == 'X'",
            true,
        ),
        (
            "'abc'.substring(1) == 'bc' && 'a-b'.replace('-', '_') == 'a_b'",
            true,
        ),
        (
            "'abcab'.indexOf('b') == 1 && 'abcab'.lastIndexOf('b') == 4",
            true,
        ),
        (
            "isURL(self.host) && url(self.host).getHostname() == 'example.com'",
            true,
        ),
        (
            "url(self.host).getPort() == '8443' && url(self.host).getScheme() == 'https'",
            true,
        ),
        (
            "url(self.host).getEscapedPath() == '/p' && url(self.host).getQuery()['a'] == ['1']",
            true,
        ),
        ("!isURL('not a url')", true),
        ("self.at < timestamp('2030-01-01T00:00:00Z')", true),
        ("self.every == duration('1h30m')", true),
        ("self.names.exists_one(n, n.matches('^[A-Z]$'))", true),
        ("self.nums.map(n, n * 2).filter(n, n > 2) == [4, 6]", true),
        (
            "sets.contains(self.nums, [1, 2]) && !sets.intersects(self.nums, [7])",
            true,
        ),
        ("self.port == 8443 || self.port == 'https'", true),
        (
            "quantity('1.5Gi').isGreaterThan(quantity('1500M')) && quantity('1') == quantity('1000m')",
            true,
        ),
        (
            "quantity('100m').add(quantity('900m')).asInteger() == 1 && isQuantity('1e3')",
            true,
        ),
        (
            "!isQuantity('1.5x') && quantity('-2k').sign() == -1 && quantity('1Ki').compareTo(quantity('1024')) == 0",
            true,
        ),
        (
            "quantity('1.5').isInteger() == false && quantity('2').sub(1).asApproximateFloat() == 1.0",
            true,
        ),
        (
            "self.?host.hasValue() && !self.?absent.hasValue() && self.names[?5].orValue('z') == 'z'",
            true,
        ),
        (
            "'%s has %d'.format([self.names[0], size(self.nums)]) == 'a has 3'",
            true,
        ),
        (
            "cel.bind(n, self.nums, n.size() == 3) && lists.range(3) == [0, 1, 2]",
            true,
        ),
        (
            "self.nums.sortBy(n, -n) == [3, 2, 1] && self.nums.reverse()[0] == 3",
            true,
        ),
        ("self.nums.isSorted() == false", false),
    ];
    let value = json!({"spec": {
        "nums": [1, 2, 3], "names": ["a", "B"], "host": "https://example.com:8443/p?a=1",
        "at": "2025-06-01T12:00:00Z", "every": "90m", "port": 8443
    }});
    for (r, ok) in cases {
        let mut s = schema.clone();
        s["properties"]["spec"]["x-kubernetes-validations"] = json!([rule(r)]);
        compiles(&s);
        let errors = run(&s, value.clone(), None);
        assert_eq!(errors.is_empty(), ok, "{r}: {errors:?}");
    }
}

#[test]
fn rules_below_lists_and_maps_report_their_paths() {
    let schema = resource(json!({
        "type": "object",
        "maxProperties": 5,
        "additionalProperties": {
            "type": "object",
            "properties": {"v": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.v > 0", "message": "v must be positive"}]
        }
    }));
    compiles(&schema);
    assert_eq!(
        run(
            &schema,
            json!({"spec": {"a": {"v": 1}, "b": {"v": 0}}}),
            None
        ),
        [r#"spec[b]: Invalid value: "object": v must be positive"#]
    );
    let prefix =
        "properties[spec].additionalProperties.x-kubernetes-validations[0].rule: Invalid value: ";
    let rules = json!([rule("self.nope")]);
    let values = json!({"type": "integer", "x-kubernetes-validations": rules});
    first_error_starts(
        &resource(json!({"type": "object", "additionalProperties": values})),
        prefix,
    );
}

#[test]
fn one_object_runs_out_of_budget() {
    // Each item's rule bounds to about 450,000 (300 x 300 comparisons of a few steps each,
    // though it finds one at once): under the per-call limit, but thirty of them are over
    // the object's 10,000,000.
    let rules = json!([rule("self.xs.exists(a, self.xs.exists(b, a == b))")]);
    let xs = json!({"type": "array", "maxItems": 300, "items": {"type": "integer"}});
    let item =
        json!({"type": "object", "properties": {"xs": xs}, "x-kubernetes-validations": rules});
    let schema = resource(json!({"type": "array", "maxItems": 30, "items": item}));
    let one: Vec<i64> = (0..300).collect();
    let list: Vec<Value> = (0..30).map(|_| json!({"xs": one})).collect();
    let errors = run(&schema, json!({"spec": list}), None);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("spec[")
            && errors[0].ends_with(
                r#"]: Invalid value: "object": validation failed due to running out of cost budget, no further validation rules will be run"#
            ),
        "{errors:#?}"
    );
    assert_eq!(
        run(&schema, json!({"spec": list[..5]}), None),
        Vec::<String>::new()
    );
}

#[test]
fn rules_at_the_root_see_the_object_meta() {
    let schema = json!({
        "type": "object",
        "properties": {"spec": {"type": "object"}},
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('a') && self.kind == 'Widget'", "message": "bad name"},
            {"rule": "has(self.spec)", "fieldPath": ".spec", "reason": "FieldValueRequired", "message": "spec is required"}
        ]
    });
    compiles(&schema);
    let ok =
        json!({"apiVersion": "x/v1", "kind": "Widget", "metadata": {"name": "a1"}, "spec": {}});
    assert_eq!(run(&schema, ok, None), Vec::<String>::new());
    let bad = json!({"apiVersion": "x/v1", "kind": "Widget", "metadata": {"name": "b1"}});
    assert_eq!(
        run(&schema, bad, None),
        [
            r#"<nil>: Invalid value: "object": bad name"#,
            "spec: Required value: spec is required"
        ]
    );
}

#[test]
fn many_errors_are_cut_at_a_hundred_and_long_expressions_refused() {
    // 150 undeclared references: the first hundred rendered, then how many more there were.
    let list = format!("[{}].size() > 0", vec!["nope"; 150].join(", "));
    let errors = strings(compile_rules(&replicas(json!([rule(&list)])), PATH));
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(
        errors[0].matches("undeclared reference to 'nope'").count(),
        100,
        "{}",
        errors[0]
    );
    assert!(
        errors[0].ends_with("50 more errors were truncated"),
        "{}",
        &errors[0][errors[0].len().saturating_sub(200)..]
    );
    // The first issue's caret is under its column, found in one pass.
    assert!(
        errors[0].contains("ERROR: <input>:1:2: undeclared reference to 'nope'"),
        "{}",
        &errors[0][..400]
    );

    let long = format!("self.replicas > 0 || {}", "1 == 1 || ".repeat(10_000));
    let errors = strings(compile_rules(&replicas(json!([rule(&long)])), PATH));
    assert!(
        errors.first().is_some_and(|e| e.contains(
            "compilation failed: ERROR: <input>:-1:0: expression code point size exceeds \
             limit: size: 100021, limit 100000"
        )),
        "{:?}",
        errors.first().map(|e| &e[e.len().saturating_sub(300)..])
    );
}
