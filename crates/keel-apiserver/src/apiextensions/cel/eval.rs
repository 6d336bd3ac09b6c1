//! Running a schema's rules on a custom resource: the walk over the value and its schema
//! together, with the old value correlated beside it; the CEL values built from JSON; the
//! runtime cost bound of each call and the budget of the whole object.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use base64::Engine;
use cel::objects::{Key, Map, OptionalValue};
use cel::{Context, ExecutionError, Program, Value as Cel};
use serde_json::Value;

use super::check::{Sizes, addr};
use super::compile::{Compiled, compile, field_path, runtime_cost};
use super::library::{ENV, convert};
use super::schema::{self, child, key};
use super::{PER_CALL_LIMIT, RUNTIME_COST_BUDGET};
use crate::apimachinery::quote::go_quote;
use crate::storage::FieldError;

/// The longest message a messageExpression may give (upstream's
/// `MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// The walk over one custom resource.
pub(super) struct Validator {
    pub errors: Vec<FieldError>,
    budget: u64,
    stopped: bool,
    cache: HashMap<(usize, usize), Rc<Compiled>>,
}

impl Validator {
    /// A walk with the whole per-object budget.
    pub fn new() -> Self {
        Validator {
            errors: Vec::new(),
            budget: RUNTIME_COST_BUDGET,
            stopped: false,
            cache: HashMap::new(),
        }
    }

    /// Validates `v` (and below) against `s`, `old` the correlated old value.
    pub fn node(&mut self, s: &Value, v: &Value, old: Option<&Value>, path: &str, root: bool) {
        if self.stopped || v.is_null() {
            return;
        }
        if !schema::rules(s).is_empty() {
            self.rules(s, v, old, path, root);
        }
        match v {
            Value::Object(obj) => {
                let mut names: Vec<&String> = obj.keys().collect();
                names.sort();
                if let Some(ap) = schema::additional(s) {
                    for k in &names {
                        let old = old.and_then(|o| o.get(k.as_str()));
                        self.node(ap, &obj[k.as_str()], old, &key(path, k), false);
                    }
                }
                if let Some(props) = schema::properties(s) {
                    for k in &names {
                        if let Some(p) = props.get(k.as_str()) {
                            let old = old.and_then(|o| o.get(k.as_str()));
                            self.node(p, &obj[k.as_str()], old, &child(path, k), false);
                        }
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema::items(s) else {
                    return;
                };
                for (i, item) in items.iter().enumerate() {
                    let old = correlate(s, item, old);
                    self.node(item_schema, item, old, &key(path, i), false);
                }
            }
            _ => {}
        }
    }

    fn compiled(&mut self, s: &Value, i: usize, rule: &Value, root: bool) -> Rc<Compiled> {
        self.cache
            .entry((addr(s), i))
            .or_insert_with(|| Rc::new(compile(s, rule, root)))
            .clone()
    }

    fn stop(&mut self, path: &str, s: &Value, detail: &str) {
        self.errors.push(FieldError::invalid(
            shown(path),
            schema::type_name(s),
            detail,
        ));
        self.stopped = true;
    }

    /// Charges the bound of one call, or stops the walk when it does not fit: past the
    /// per-call limit with `over_limit`, past what is left of the budget with `out`.
    fn charge(&mut self, cost: u64, path: &str, s: &Value, over_limit: &str, out: &str) -> bool {
        if cost > PER_CALL_LIMIT {
            self.stop(path, s, over_limit);
            return false;
        }
        if cost > self.budget {
            self.stop(path, s, out);
            return false;
        }
        self.budget -= cost;
        true
    }

    fn rules(&mut self, s: &Value, v: &Value, old: Option<&Value>, path: &str, root: bool) {
        if self.budget == 0 {
            self.stop(path, s, OUT_OF_BUDGET);
            return;
        }
        let this = to_cel(v, Some(s));
        let before = old.map(|o| to_cel(o, Some(s)));
        let mut sizes = Sizes::default();
        measure(s, v, &mut sizes);
        if let Some(o) = old {
            measure(s, o, &mut sizes);
        }
        let type_name = schema::type_name(s).to_string();
        for (i, rule) in schema::rules(s).iter().enumerate() {
            let c = self.compiled(s, i, rule, root);
            let described = describe(rule);
            let Some(program) = &c.rule.program else {
                let detail = format!(
                    "rule compile error: {}",
                    c.rule.error.clone().unwrap_or_default()
                );
                self.errors.push(FieldError::invalid(
                    shown(path),
                    type_name.as_str(),
                    &detail,
                ));
                continue;
            };
            if c.transition && old.is_none() && !c.optional_old_self {
                continue;
            }
            let cost = runtime_cost(program, s, root, c.optional_old_self, &sizes);
            let over_limit = format!(
                "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {described}"
            );
            if !self.charge(cost, path, s, &over_limit, OUT_OF_BUDGET) {
                return;
            }
            let mut ctx = Context::with_env(ENV.clone());
            ctx.add_variable_from_value("self", this.clone());
            if c.optional_old_self {
                let opt = match &before {
                    Some(b) => OptionalValue::of(b.clone()),
                    None => OptionalValue::none(),
                };
                ctx.add_variable_from_value("oldSelf", Cel::Opaque(Arc::new(opt)));
            } else if let Some(b) = &before {
                ctx.add_variable_from_value("oldSelf", b.clone());
            }
            let result = super::comprehensions::execute(program, &ctx);
            // Ratcheting: a rule that does not name oldSelf is not held against a value the
            // write left as it was.
            let unchanged = !c.transition && old == Some(v);
            let detail = match result {
                Ok(Cel::Bool(true)) => continue,
                _ if unchanged => continue,
                Err(e) => {
                    let detail = runtime_error(&e, &described);
                    self.errors.push(FieldError::invalid(
                        shown(path),
                        type_name.as_str(),
                        &detail,
                    ));
                    continue;
                }
                Ok(_) => match c.message.as_ref().and_then(|m| m.program.as_ref()) {
                    Some(m) => {
                        let cost = runtime_cost(m, s, root, c.optional_old_self, &sizes);
                        let source = rule.get("messageExpression").and_then(Value::as_str);
                        let over_limit = format!(
                            "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                            go_quote(source.unwrap_or(""))
                        );
                        let out = "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run";
                        if !self.charge(cost, path, s, &over_limit, out) {
                            return;
                        }
                        message(m, &ctx).unwrap_or_else(|| default_message(rule))
                    }
                    None => default_message(rule),
                },
            };
            let at = match rule.get("fieldPath").and_then(Value::as_str) {
                Some(fp) if !fp.is_empty() => match field_path(s, fp) {
                    Some(p) => child(path, &p),
                    None => shown(path).to_string(),
                },
                _ => shown(path).to_string(),
            };
            let e = match rule.get("reason").and_then(Value::as_str) {
                Some("FieldValueForbidden") => FieldError::forbidden(&at, &detail),
                Some("FieldValueRequired") => FieldError::required(&at, &detail),
                Some("FieldValueDuplicate") => FieldError::duplicate(&at, type_name.as_str()),
                _ => FieldError::invalid(&at, type_name.as_str(), &detail),
            };
            self.errors.push(e);
        }
    }
}

/// A path as upstream prints it: the root (no path) as Go prints a nil `*field.Path`.
fn shown(path: &str) -> &str {
    if path.is_empty() { "<nil>" } else { path }
}

/// The old item a new list item is compared with: the one with the same keys, in a list of
/// `x-kubernetes-list-type: map`; none in any other list.
fn correlate<'a>(s: &Value, item: &Value, old: Option<&'a Value>) -> Option<&'a Value> {
    if s.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> = s
        .get("x-kubernetes-list-map-keys")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    old?.as_array()?
        .iter()
        .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
}

/// Upstream's `ruleErrorString`: the message, else the rule.
fn describe(rule: &Value) -> String {
    let m = rule
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim();
    if m.is_empty() {
        rule.get("rule")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string()
    } else {
        m.to_string()
    }
}

/// Upstream's `ruleMessageOrDefault`.
fn default_message(rule: &Value) -> String {
    let m = rule.get("message").and_then(Value::as_str).unwrap_or("");
    if m.is_empty() {
        format!("failed rule: {}", describe(rule))
    } else {
        m.trim().to_string()
    }
}

/// The message a messageExpression gives, or `None` when it fails or gives no usable
/// string (then the rule's message stands).
fn message(program: &Program, ctx: &Context) -> Option<String> {
    match super::comprehensions::execute(program, ctx) {
        Ok(Cel::String(s)) => {
            let m = s.trim();
            let ok = !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains(['\n', '\r']);
            ok.then(|| m.to_string())
        }
        _ => None,
    }
}

/// A runtime error as cel-go words it, in upstream's sentence.
fn runtime_error(e: &ExecutionError, rule: &str) -> String {
    let words = match e {
        ExecutionError::NoSuchOverload(_) => {
            return format!(
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule}"
            );
        }
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(Cel::Int(i)) => format!("index out of bounds: {i}"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    format!("{words} evaluating rule: {rule}")
}

/// A JSON value as the CEL value its schema makes it: integers as int, numbers as double,
/// `date-time` strings as timestamps, `duration` strings as durations, `byte` strings as
/// bytes, objects as maps; without a schema (preserved unknown fields, int-or-string) by
/// the JSON alone.
pub(super) fn to_cel(v: &Value, s: Option<&Value>) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => {
            let double = s.is_some_and(|s| schema::type_name(s) == "number");
            match (double, n.as_i64(), n.as_u64()) {
                (false, Some(i), _) => Cel::Int(i),
                (false, None, Some(u)) => Cel::UInt(u),
                _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
            }
        }
        Value::String(text) => {
            let format = s
                .filter(|s| schema::type_name(s) == "string")
                .and_then(|s| s.get("format"))
                .and_then(Value::as_str);
            let converted = match format {
                Some("date-time") => convert("timestamp", text),
                Some("duration") => convert("duration", text),
                Some("byte") => base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .ok()
                    .map(|b| Cel::Bytes(Arc::new(b))),
                _ => None,
            };
            converted.unwrap_or_else(|| Cel::String(Arc::new(text.clone())))
        }
        Value::Array(items) => {
            let item = s.and_then(schema::items);
            Cel::List(Arc::new(items.iter().map(|x| to_cel(x, item)).collect()))
        }
        Value::Object(obj) => {
            let props = s.and_then(schema::properties);
            let ap = s.and_then(schema::additional);
            let entries = obj
                .iter()
                .filter_map(|(k, x)| {
                    let sub = props.and_then(|p| p.get(k));
                    // A declared property goes by the name rules spell it by.
                    let name = match sub {
                        Some(_) => schema::escape(k)?,
                        None => k.clone(),
                    };
                    Some((Key::from(name), to_cel(x, sub.or(ap))))
                })
                .collect();
            Cel::Map(Map {
                map: Arc::new(entries),
            })
        }
    }
}

/// How big a JSON value is for a schema-less (dyn) node: every node and character.
fn weight(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.chars().count() as u64 + 1,
        Value::Array(a) => a.iter().map(weight).sum::<u64>() + 1,
        Value::Object(o) => o
            .iter()
            .map(|(k, x)| k.len() as u64 + weight(x))
            .sum::<u64>()
            .saturating_add(1),
        _ => 1,
    }
}

fn record(sizes: &mut HashMap<usize, u64>, s: &Value, n: u64) {
    let e = sizes.entry(addr(s)).or_insert(0);
    *e = (*e).max(n);
}

/// Records the sizes `v` really has, node by node of `s`.
pub(super) fn measure(s: &Value, v: &Value, sizes: &mut Sizes) {
    let typed = !schema::is_int_or_string(s) && !schema::type_name(s).is_empty();
    match v {
        _ if !typed => record(&mut sizes.sizes, s, weight(v)),
        Value::String(text) => record(&mut sizes.sizes, s, text.chars().count() as u64),
        Value::Array(items) => {
            record(&mut sizes.sizes, s, items.len() as u64);
            if let Some(i) = schema::items(s) {
                items.iter().for_each(|x| measure(i, x, sizes));
            }
        }
        Value::Object(obj) => {
            if let Some(ap) = schema::additional(s) {
                record(&mut sizes.sizes, s, obj.len() as u64);
                let longest = obj.keys().map(|k| k.chars().count() as u64).max();
                record(&mut sizes.keys, s, longest.unwrap_or(0));
                obj.values().for_each(|x| measure(ap, x, sizes));
            } else if let Some(props) = schema::properties(s) {
                if schema::preserves_unknown(s) {
                    record(&mut sizes.sizes, s, weight(v));
                }
                for (k, x) in obj {
                    if let Some(p) = props.get(k) {
                        measure(p, x, sizes);
                    }
                }
            } else {
                record(&mut sizes.sizes, s, weight(v));
            }
        }
        _ => {}
    }
}
