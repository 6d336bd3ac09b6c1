//! Compiling rules: one rule into a program (parse, static check, estimated cost), and a
//! CRD's whole schema into the field errors upstream's CRD validation gives for its
//! `x-kubernetes-validations`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use cel::{ParseErrors, Program};
use serde_json::Value;

use super::check::{Checker, Sizes, may_be_bool, may_be_string};
use super::library::ENV;
use super::schema::{self, child, key};
use super::{PER_CRD_COST_LIMIT, PER_EXPRESSION_COST_LIMIT};
use crate::apimachinery::quote::go_quote;
use crate::storage::FieldError;

/// One expression of a rule (the rule, or its messageExpression), compiled.
#[derive(Default)]
pub(super) struct Part {
    /// Its program, when it compiled.
    pub program: Option<Rc<Program>>,
    /// Its estimated cost for one evaluation.
    pub cost: u64,
    /// Why it did not compile (upstream's words).
    pub error: Option<String>,
}

/// One rule, compiled.
pub(super) struct Compiled {
    /// The rule.
    pub rule: Part,
    /// The messageExpression, when the rule has one.
    pub message: Option<Part>,
    /// Whether the rule names `oldSelf`.
    pub transition: bool,
    /// `optionalOldSelf: true`.
    pub optional_old_self: bool,
}

fn text<'a>(rule: &'a Value, name: &str) -> &'a str {
    rule.get(name).and_then(Value::as_str).unwrap_or("")
}

/// The most parsed programs a thread keeps.
const PARSED_MAX: usize = 4096;

/// The longest source whose program is kept: the cache stays bounded in bytes too (a rule is
/// far shorter; a longer source, such as a dry run's huge literal, is parsed every time).
const PARSED_SOURCE_MAX: usize = 16 * 1024;

thread_local! {
    /// Parsed programs by source, so that a CRD's rules are parsed once per thread rather
    /// than on every write.
    static PARSED: RefCell<HashMap<String, Rc<Program>>> = RefCell::new(HashMap::new());
}

/// Parses (and expands the macros of) `source`, or finds it parsed.
fn parse(source: &str) -> Result<Rc<Program>, ParseErrors> {
    if let Some(p) = PARSED.with(|c| c.borrow().get(source).cloned()) {
        return Ok(p);
    }
    let program = Rc::new(ENV.compile(source)?);
    if source.len() > PARSED_SOURCE_MAX {
        return Ok(program);
    }
    PARSED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= PARSED_MAX {
            c.clear();
        }
        c.insert(source.to_string(), program.clone());
    });
    Ok(program)
}

/// cel-go's rendering of one issue: position, words, the line and a caret under the column.
fn issue(source: &str, line: usize, col: usize, message: &str) -> String {
    let snippet = source.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let dots = ".".repeat(col.saturating_sub(1));
    format!("ERROR: <input>:{line}:{col}: {message}\n | {snippet}\n | {dots}^")
}

/// The most issues rendered, as cel-go's `maxErrorsToReport`: an expression with thousands of
/// errors gets a bounded message.
const MAX_ISSUES: usize = 100;

/// The most code points an expression may have (cel-go's default
/// `expressionSizeCodePointLimit`).
const MAX_CODE_POINTS: usize = 100_000;

/// The 1-based line and column of each character offset in `offsets` (sorted), in one pass.
fn positions(source: &str, offsets: &[usize]) -> Vec<(usize, usize)> {
    let (mut line, mut col, mut at) = (1, 1, 0);
    let mut chars = source.chars();
    offsets
        .iter()
        .map(|&offset| {
            while at < offset {
                match chars.next() {
                    Some('\n') => (line, col) = (line + 1, 1),
                    Some(_) => col += 1,
                    None => break,
                }
                at += 1;
            }
            (line, col)
        })
        .collect()
}

/// cel-go's `Errors.ToDisplayString`: the first [`MAX_ISSUES`] issues, then how many more
/// there were.
fn joined(mut issues: Vec<String>, total: usize) -> String {
    issues.truncate(MAX_ISSUES);
    if total > MAX_ISSUES {
        issues.push(format!("{} more errors were truncated", total - MAX_ISSUES));
    }
    issues.join("\n")
}

/// Parses `source` (with the environment's macros), or gives cel-go's rendering of its
/// parse errors (an expression past [`MAX_CODE_POINTS`], or nested past cel-go's recursion
/// limit, is not parsed, as cel-go's parser refuses it).
pub(super) fn parse_rendered(source: &str) -> Result<Rc<Program>, String> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, \
             limit {MAX_CODE_POINTS}"
        ));
    }
    if let Some(error) = super::recursion::too_deep(source) {
        return Err(format!("ERROR: <input>:-1:0: {error}"));
    }
    parse(source).map_err(|e| {
        let issues: Vec<String> = e
            .errors
            .iter()
            .take(MAX_ISSUES)
            .map(|p| {
                issue(
                    source,
                    p.pos.0.max(1) as usize,
                    p.pos.1.max(1) as usize,
                    &p.msg,
                )
            })
            .collect();
        joined(issues, e.errors.len())
    })
}

/// cel-go's rendering of the errors a checker found in `program` (parsed from `source`),
/// in source order; `None` when it found none.
pub(super) fn rendered_check_errors(
    source: &str,
    program: &Program,
    errors: &[(u64, String)],
) -> Option<String> {
    if errors.is_empty() {
        return None;
    }
    let info = program.source_info();
    let mut found: Vec<(usize, &str)> = errors
        .iter()
        .map(|(id, m)| {
            let offset = info.offset_for(*id).map_or(0, |(start, _)| start as usize);
            (offset, m.as_str())
        })
        .collect();
    found.sort();
    found.dedup();
    let total = found.len();
    found.truncate(MAX_ISSUES);
    let offsets: Vec<usize> = found.iter().map(|(offset, _)| *offset).collect();
    let issues: Vec<String> = positions(source, &offsets)
        .into_iter()
        .zip(&found)
        .map(|((line, col), (_, m))| issue(source, line, col, m))
        .collect();
    Some(joined(issues, total))
}

/// Parses and checks one expression: its program, its result type test and its cost, or
/// cel-go's issues.
fn expression(
    source: &str,
    node: &Value,
    root: bool,
    optional_old: bool,
    wants: fn(&super::check::Ty) -> bool,
) -> Result<(Rc<Program>, bool, u64, bool), String> {
    let program = parse_rendered(source)?;
    let mut checker = Checker::new(node, root, optional_old, None);
    let (ty, cost) = checker.expr(program.expression());
    if let Some(issues) = rendered_check_errors(source, &program, &checker.errors) {
        return Err(issues);
    }
    Ok((program, wants(&ty), cost, checker.uses_old_self))
}

/// Compiles one expression: its part, and whether it names `oldSelf`.
fn part(
    source: &str,
    (node, root, optional_old): (&Value, bool, bool),
    wants: fn(&super::check::Ty) -> bool,
    (failed, wrong_type): (&str, &str),
) -> (Part, bool) {
    match expression(source, node, root, optional_old, wants) {
        Err(issues) => {
            let error = Some(format!("{failed}{issues}"));
            (
                Part {
                    error,
                    ..Part::default()
                },
                false,
            )
        }
        Ok((_, false, cost, _)) => {
            let error = Some(wrong_type.to_string());
            (
                Part {
                    cost,
                    error,
                    program: None,
                },
                false,
            )
        }
        Ok((program, true, cost, old)) => {
            let program = Some(program);
            (
                Part {
                    program,
                    cost,
                    error: None,
                },
                old,
            )
        }
    }
}

/// Compiles one rule of the schema node `node` (`root` at a resource's root).
pub(super) fn compile(node: &Value, rule: &Value, root: bool) -> Compiled {
    let optional_old_self = rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
    let at = (node, root, optional_old_self);
    let words = (
        "compilation failed: ",
        "cel expression must evaluate to a bool",
    );
    let (compiled_rule, transition) = part(text(rule, "rule"), at, may_be_bool, words);
    let message = Some(text(rule, "messageExpression"))
        .filter(|m| !m.trim().is_empty())
        .map(|m| {
            let words = (
                "messageExpression compilation failed: ",
                "messageExpression must evaluate to a string",
            );
            part(m, at, may_be_string, words).0
        });
    Compiled {
        rule: compiled_rule,
        message,
        transition,
        optional_old_self,
    }
}

/// The cost bound of running `program` on a value whose sizes are `sizes`.
pub(super) fn runtime_cost(
    program: &Program,
    node: &Value,
    root: bool,
    optional_old: bool,
    sizes: &Sizes,
) -> u64 {
    let mut checker = Checker::new(node, root, optional_old, Some(sizes));
    checker.expr(program.expression()).1
}

/// Upstream's `getCostErrorMessage`.
pub(super) fn cost_error(name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// A rule as Go's `%#v` prints upstream's internal `ValidationRule` (a set pointer field
/// prints as an address there; here as a fixed one).
fn go_repr(rule: &Value) -> String {
    let pointer = |name: &str, ty: &str| match rule.get(name) {
        Some(v) if !v.is_null() => format!("({ty})(0xc000000000)"),
        _ => format!("({ty})(nil)"),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        go_quote(text(rule, "rule")),
        go_quote(text(rule, "message")),
        go_quote(text(rule, "messageExpression")),
        pointer("reason", "*apiextensions.FieldValueErrorReason"),
        go_quote(text(rule, "fieldPath")),
        pointer("optionalOldSelf", "*bool"),
    )
}

const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// Resolves a rule's `fieldPath` (`.spec.replicas`, `.labels['app.kubernetes.io/name']`)
/// against the schema node: the path upstream reports errors at, or `None` when it does
/// not name a property or map entry under the node.
pub(super) fn field_path(node: &Value, path: &str) -> Option<String> {
    let mut s = node;
    let mut out = String::new();
    let mut rest = path.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let name;
        if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            name = &r[..end];
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            name = &r[..end];
            rest = &r[end..];
            if name.is_empty() {
                return None;
            }
        } else {
            return None;
        }
        if let Some(p) = schema::properties(s).and_then(|p| p.get(name)) {
            s = p;
            out = child(&out, name);
        } else if let Some(ap) = schema::additional(s) {
            s = ap;
            out = key(&out, name);
        } else {
            return None;
        }
    }
    Some(out)
}

/// The walk over a CRD's schema.
pub(super) struct SchemaWalk {
    pub errors: Vec<FieldError>,
    schema_errors: usize,
    costs: Vec<(String, u64)>,
    total: u64,
}

impl SchemaWalk {
    /// Walks `schema` (the openAPIV3Schema at `path`) and returns its errors.
    pub fn run(schema: &Value, path: &str) -> Vec<FieldError> {
        let mut w = SchemaWalk {
            errors: Vec::new(),
            schema_errors: 0,
            costs: Vec::new(),
            total: 0,
        };
        w.node(schema, path, true, Some(1), None);
        if w.total > PER_CRD_COST_LIMIT {
            w.costs.sort_by_key(|c| std::cmp::Reverse(c.1));
            for (p, _) in w.costs.iter().take(4) {
                let detail = "contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema";
                w.errors.push(FieldError::forbidden(p, detail));
            }
            let name = "x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema";
            let detail = cost_error(name, w.total, PER_CRD_COST_LIMIT);
            w.errors.push(FieldError::forbidden(path, &detail));
        }
        w.errors
    }

    fn node(
        &mut self,
        s: &Value,
        path: &str,
        root: bool,
        card: Option<u64>,
        uncorrelatable: Option<&str>,
    ) {
        let before = self.schema_errors;
        if let Some(props) = schema::properties(s) {
            let mut names: Vec<&String> = props.keys().collect();
            names.sort();
            for name in names {
                let p = key(&child(path, "properties"), name);
                self.node(&props[name], &p, false, card, uncorrelatable);
            }
        }
        if let Some(items) = schema::items(s) {
            let (n, bounded) = schema::max_items(s);
            let card = card.filter(|_| bounded).map(|c| c.saturating_mul(n));
            let list_map = s.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
            let forbid = if list_map {
                uncorrelatable
            } else {
                uncorrelatable.or(Some(path))
            };
            self.node(items, &child(path, "items"), false, card, forbid);
        }
        if let Some(ap) = schema::additional(s) {
            let (n, bounded) = schema::max_properties(s);
            let card = card.filter(|_| bounded).map(|c| c.saturating_mul(n));
            self.node(
                ap,
                &child(path, "additionalProperties"),
                false,
                card,
                uncorrelatable,
            );
        }
        let rules = schema::rules(s);
        let base = child(path, "x-kubernetes-validations");
        for (i, rule) in rules.iter().enumerate() {
            self.check_fields(s, rule, &key(&base, i));
        }
        if self.schema_errors != before {
            return;
        }
        let card = card.unwrap_or_else(|| schema::max_items_from_min_size(schema::min_size(s)));
        for (i, rule) in rules.iter().enumerate() {
            let at = key(&base, i);
            self.compile_one(s, rule, &at, root, card, uncorrelatable);
        }
    }

    fn schema_error(&mut self, e: FieldError) {
        self.schema_errors += 1;
        self.errors.push(e);
    }

    fn check_fields(&mut self, s: &Value, rule: &Value, at: &str) {
        let (r, m, me) = (
            text(rule, "rule"),
            text(rule, "message"),
            text(rule, "messageExpression"),
        );
        let (rt, mt) = (r.trim(), m.trim());
        if rt.is_empty() {
            self.schema_error(FieldError::required(
                &child(at, "rule"),
                "rule is not specified",
            ));
        } else if !m.is_empty() && mt.is_empty() {
            let e = FieldError::invalid(
                &child(at, "message"),
                m,
                "message must be non-empty if specified",
            );
            self.schema_error(e);
        } else if has_newlines(mt) {
            let e = FieldError::invalid(
                &child(at, "message"),
                m,
                "message must not contain line breaks",
            );
            self.schema_error(e);
        } else if has_newlines(rt) && mt.is_empty() {
            let detail = "message must be specified if rule contains line breaks";
            self.schema_error(FieldError::required(&child(at, "message"), detail));
        } else if m.len() > 2048 {
            self.schema_error(FieldError::too_long(&child(at, "message"), 2048));
        }
        if !me.is_empty() && me.trim().is_empty() {
            let detail = "messageExpression must be non-empty if specified";
            self.schema_error(FieldError::required(
                &child(at, "messageExpression"),
                detail,
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str)
            && !REASONS.contains(&reason)
        {
            let e = FieldError::not_supported(&child(at, "reason"), reason, &REASONS);
            self.schema_error(e);
        }
        let fp = text(rule, "fieldPath");
        let fp_at = child(at, "fieldPath");
        if !fp.is_empty() && fp.trim().is_empty() {
            let e = FieldError::invalid(&fp_at, fp, "fieldPath must be non-empty if specified");
            self.schema_error(e);
        } else if has_newlines(fp) {
            let e = FieldError::invalid(&fp_at, fp, "fieldPath must not contain line breaks");
            self.schema_error(e);
        } else if !fp.is_empty() && field_path(s, fp).is_none() {
            let e = FieldError::invalid(&fp_at, fp, "fieldPath must be a valid path");
            self.schema_error(e);
        }
    }

    fn compile_one(
        &mut self,
        s: &Value,
        rule: &Value,
        at: &str,
        root: bool,
        card: u64,
        uncorrelatable: Option<&str>,
    ) {
        let c = compile(s, rule, root);
        let rule_at = child(at, "rule");
        let cost = c.rule.cost.saturating_mul(card);
        if cost > PER_EXPRESSION_COST_LIMIT {
            let detail = cost_error("estimated rule cost", cost, PER_EXPRESSION_COST_LIMIT);
            self.errors.push(FieldError::forbidden(&rule_at, &detail));
        }
        self.total = self.total.saturating_add(cost);
        self.costs.push((rule_at.clone(), cost));
        if let Some(e) = &c.rule.error {
            self.errors
                .push(FieldError::invalid_printed(&rule_at, go_repr(rule), e));
        }
        let message_at = child(at, "messageExpression");
        if let Some(m) = &c.message {
            if let Some(e) = &m.error {
                self.errors
                    .push(FieldError::invalid_printed(&message_at, go_repr(rule), e));
            } else {
                let cost = m.cost.saturating_mul(card);
                if cost > PER_EXPRESSION_COST_LIMIT {
                    let name = "estimated messageExpression cost";
                    let detail = cost_error(name, cost, PER_EXPRESSION_COST_LIMIT);
                    self.errors
                        .push(FieldError::forbidden(&message_at, &detail));
                }
                self.total = self.total.saturating_add(cost);
                self.costs.push((message_at, cost));
            }
        }
        if c.transition {
            if let Some(p) = uncorrelatable {
                let detail = format!(
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within {p}"
                );
                let e = FieldError::invalid(&rule_at, text(rule, "rule"), &detail);
                self.errors.push(e);
            }
        } else if let Some(v) = rule.get("optionalOldSelf").filter(|v| v.is_boolean()) {
            let detail = "may not be set if oldSelf is not used in rule";
            let e = FieldError::invalid(&child(at, "optionalOldSelf"), v.clone(), detail);
            self.errors.push(e);
        }
    }
}
