//! CEL validation rules (`x-kubernetes-validations`) of a custom resource's schema, as
//! apiextensions-apiserver compiles them when a CRD is written and runs them when a custom
//! resource is. Schema nodes are `JSONSchemaProps` held as JSON; errors are
//! [`FieldError`]s worded as upstream words them.
//!
//! - [`compile_rules`]: for a CRD create or update. Checks each rule's fields (`rule`,
//!   `message`, `messageExpression`, `reason`, `fieldPath`, `optionalOldSelf`), compiles
//!   the rule and its messageExpression (parse errors in cel-go's
//!   `ERROR: <input>:L:C: ...` form, undeclared identifiers and functions, undefined fields
//!   of a declared object, a rule that is not a bool, a messageExpression that is not a
//!   string), finds transition rules (those naming `oldSelf`) and refuses them where the old
//!   value cannot be correlated (items of a list that is not `x-kubernetes-list-type: map`),
//!   and refuses rules whose estimated cost is over budget.
//! - [`validate`]: for a custom resource write. Walks the value and the schema together and
//!   runs each node's rules with `self` bound (and `oldSelf`, the old value at the same
//!   place: the struct field of the same name, the map entry of the same key, the list-map
//!   item of the same keys). Transition rules are skipped without an old value unless
//!   `optionalOldSelf` (then `oldSelf` is an optional). A failed rule that does not name
//!   `oldSelf`, on a value equal to its old one, is ratcheted (not reported).
//!
//! # The environment
//!
//! The `cel` crate's standard library (`matches` on the patterns `go_regex` compiles once,
//! with RE2's ASCII classes: `find`), its
//! strings extension (`charAt`, `indexOf`, `lastIndexOf`, `join`, `lowerAscii`,
//! `upperAscii`, `trim`, `replace`, `split`, `substring`, `reverse`, `format`,
//! `strings.quote`), lists extension (`slice`, `flatten`, `distinct`, `reverse`, `sort`,
//! `sortBy`, `lists.range`), math extension (`math.*`) and optionals (`a.?b`, `l[?i]`,
//! `hasValue`, `value`, `orValue`, `or`, `optional.of`, `optional.none`); written here:
//! `cel.bind`, and Kubernetes' list (`isSorted`, `sum`, `min`, `max`, `indexOf`,
//! `lastIndexOf`), sets (`sets.contains`, `sets.equivalent`, `sets.intersects`), URL (`url`,
//! `isURL`, `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`,
//! `getQuery`) and quantity libraries, the regex library's `find` and `findAll` (`find`),
//! the IP and CIDR libraries (`net`, on Go's `net/netip` parsers: `go_netip`) and the
//! semver library at version 1, with `semver(s, true)` normalizing (`semver`), and the
//! format library (`format.dns1123Label().validate(s)`, ...: `format_lib`), two-variable
//! comprehensions (`all(i, v, ...)`, `exists`, `existsOne`, `transformList`, `transformMap`,
//! `transformMapEntry`: `comprehensions`) and, for admission expressions, the
//! authorization library (`authz`, compiled only). Not there (a rule using them fails to
//! compile with `undeclared reference`): `net.CIDR` and `net.IP` as type names. Kubernetes
//! 1.34 has no image library (`image()`, `isImage()` were proposed in kubernetes#130834,
//! which was closed unmerged). Lists compare in order, `set` and `map` lists too (upstream compares those as sets).
//!
//! Values: integers as int, numbers as double, `date-time` strings as timestamps, `duration`
//! strings as durations, `byte` strings as bytes, objects as maps whose declared properties
//! go by the names rules spell them by (`x-prop` is `self.x__dash__prop`, `namespace` is
//! `self.__namespace__`), int-or-string values and preserved unknown fields as their JSON
//! is. At the root `apiVersion`, `kind` and `metadata` are there besides the declared
//! properties.
//!
//! # The cost budget
//!
//! Upstream estimates each rule's worst-case cost with cel-go's estimator and refuses a rule
//! whose cost times the number of times it can run in one object is over
//! [`PER_EXPRESSION_COST_LIMIT`] (`StaticEstimatedCostLimit`, 10,000,000), and a CRD whose
//! rules together are over [`PER_CRD_COST_LIMIT`] (`StaticEstimatedCRDCostLimit`,
//! 100,000,000), with `estimated rule cost exceeds budget by factor of N.Nx (try
//! simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays,
//! maps, and strings are declared)`. At run time each call is stopped past
//! [`PER_CALL_LIMIT`] (`PerCallLimit`, 1,000,000) and one object's rules past
//! [`RUNTIME_COST_BUDGET`] (`RuntimeCELCostBudget`, 10,000,000).
//!
//! No Rust crate has cel-go's estimator, so this one is written here, on the parsed,
//! macro-expanded AST, and errs on the high side. It counts:
//!
//! - sizes: every list, map and string in scope has a largest size. From the schema:
//!   `maxItems`, `maxProperties`, `maxLength`; unbounded, the upstream way: 3 MiB (the
//!   largest request) less 2, divided by the smallest serialized item plus 1 for arrays
//!   (`estimateMaxArrayItemsFromMinSize`) or plus 6 for map entries, and 3 MiB less 2
//!   characters for strings (`date-time` 35, `duration` 32). Literals have their own size;
//!   `+` adds sizes; `split`, `replace`, `join` derive theirs from their inputs; values of
//!   unknown type (preserved unknown fields, int-or-string) are unbounded.
//! - 1 for each identifier and field selection, 0 for literals, 1 for each list or map
//!   literal, 1 for each operator or function call plus what it walks, with cel-go's
//!   factors: string functions a tenth of the length they read (`contains` and string
//!   `indexOf` receiver times argument, `matches` a tenth of the string times a quarter of
//!   the pattern, `find` and `findAll` a tenth of the string plus one times a quarter of
//!   the pattern; `containsIP` and `containsCIDR` as upstream's library estimator prices
//!   them, the other IP, CIDR and semver functions 1); `==`, `!=`, `<`, ... a tenth of
//!   the smaller operand's size (characters, or elements of a list or map), at least 1;
//!   `in` on a list its size; `indexOf`, `sum`, `min`, `max`, `isSorted` on a list its size
//!   times an element's comparison; `sets.*` and `distinct` the product of the two walks.
//! - both branches of `&&`, `||` and `?:` (no short circuit).
//! - comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`, and the two-variable
//!   ones): the range, plus the
//!   range's size times the loop condition and step, plus the result; nested ones multiply.
//! - the rule's cost times its cardinality: the product of the `maxItems` and
//!   `maxProperties` of the lists and maps above it, or, if one of them is unbounded, 3 MiB
//!   less 2 divided by the node's smallest serialized size plus 1.
//!
//! At run time the same estimate is taken with the sizes the object really has (largest
//! list, map, string and key per schema node, over the new and the old value; a value of
//! unknown type counts its nodes and characters) before each call: that bound is what a
//! call is charged, and what [`PER_CALL_LIMIT`] and [`RUNTIME_COST_BUDGET`] are checked
//! against, so no rule runs unbounded.

pub mod admission;
#[cfg(test)]
mod admission_tests;
mod authz;
mod check;
mod compile;
mod comprehensions;
mod eval;
mod find;
mod format_lib;
mod functions;
mod go_netip;
mod library;
#[cfg(test)]
mod library_tests;
mod net;
mod quantity;
mod recursion;
mod schema;
mod semver;
#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::storage::FieldError;

/// The largest estimated cost of one rule, times how often it can run in one object
/// (upstream's `StaticEstimatedCostLimit`).
pub const PER_EXPRESSION_COST_LIMIT: u64 = 10_000_000;

/// The largest estimated cost of all of a CRD's rules (upstream's
/// `StaticEstimatedCRDCostLimit`).
pub const PER_CRD_COST_LIMIT: u64 = 100_000_000;

/// The largest cost of one rule's evaluation (upstream's `PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The largest cost of all rule evaluations of one object (upstream's
/// `RuntimeCELCostBudget`).
pub const RUNTIME_COST_BUDGET: u64 = 10_000_000;

/// Checks and compiles every `x-kubernetes-validations` rule of a CRD's schema (its
/// `openAPIV3Schema`, at `path`, e.g. `spec.validation.openAPIV3Schema`), walking
/// `properties`, `items` and `additionalProperties`, and returns upstream's errors, at paths
/// such as `<path>.properties[spec].x-kubernetes-validations[0].rule`. Empty when all
/// rules compile within budget.
pub fn compile_rules(schema: &Value, path: &str) -> Vec<FieldError> {
    compile::SchemaWalk::run(schema, path)
}

/// Runs the rules of `schema` on a custom resource `new` (at `path`, empty for the root),
/// with `old` the stored object on an update, and returns the errors of the rules that
/// failed: at the node's path (and the rule's `fieldPath`), of the rule's `reason`
/// (Invalid by default), with the node's type name as the value (`Invalid value:
/// "object": <message>`) and the evaluated messageExpression, the message, or
/// `failed rule: <rule>` as the detail. With an empty `path` the root's own errors are at
/// `<nil>`, as upstream's (a nil `*field.Path`) print.
pub fn validate(schema: &Value, new: &Value, old: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut v = eval::Validator::new();
    v.node(schema, new, old, path, true);
    v.errors
}
