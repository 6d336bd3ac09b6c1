//! The static pass over a parsed rule: a light type check (undeclared identifiers and
//! functions, undefined fields of a declared object, the result's type) and the cost
//! estimator, in one walk of the macro-expanded AST. Types come from the schema; each list,
//! map and string type carries the most elements it can have, which is where the estimate's
//! sizes come from (see the module doc of `cel` for what is counted). At run time the same
//! walk runs with the sizes the value really has ([`Sizes`]), which bounds a call's cost.

use std::collections::HashMap;
use std::rc::Rc;

use cel::common::ast::operators::OPT_SELECT;
use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

use super::schema::{self, MAX_REQUEST_SIZE_BYTES};

/// The largest sizes a value really has, by schema node (its address): items, entries or
/// characters (`sizes`), and the longest key of a map (`keys`). A schema node no value
/// reaches has size 0.
#[derive(Default, Debug)]
pub(super) struct Sizes {
    pub sizes: HashMap<usize, u64>,
    pub keys: HashMap<usize, u64>,
}

/// A schema node's identity in [`Sizes`].
pub(super) fn addr(s: &Value) -> usize {
    s as *const Value as usize
}

pub(super) const UNBOUNDED: u64 = MAX_REQUEST_SIZE_BYTES - 2;

/// The key under which a schema built for a declared object type (an admission request,
/// a namespace) holds the type's CEL name.
pub(super) const OBJECT_TYPE_NAME: &str = "x-keel-cel-type-name";

/// The bound taken for a resource's `apiVersion`, `kind` and `metadata` (the name and
/// generateName a rule may read are DNS subdomains at most).
const OBJECT_META_LEN: u64 = 253;

/// A CEL type as the checker knows it, with its size bound.
#[derive(Clone, Debug)]
pub(super) enum Ty<'s> {
    /// Not known (`x-kubernetes-preserve-unknown-fields`, int-or-string); at most this
    /// many elements or characters.
    Dyn(u64),
    Bool,
    Int,
    Uint,
    Double,
    Null,
    Type,
    Timestamp,
    Duration,
    Url,
    Quantity,
    Ip,
    Cidr,
    Semver,
    Format,
    Str(u64),
    Bytes(u64),
    List(Box<Ty<'s>>, u64),
    /// String keys (at most this long), values, at most this many entries.
    Map(u64, Box<Ty<'s>>, u64),
    /// An object with declared properties; `true` at a resource's root, which also has
    /// `apiVersion`, `kind` and `metadata`.
    Obj(&'s Value, bool),
    Opt(Box<Ty<'s>>),
    /// One of the authorization library's types (`authorizer`, a check, a decision).
    Authz(super::authz::Authz),
    /// An admission policy's `variables`: each declared variable's name and type, in
    /// declaration order.
    Vars(Rc<Vec<(String, Ty<'s>)>>),
}

impl Ty<'_> {
    /// cel-go's name of the type, for messages.
    fn name(&self) -> &'static str {
        match self {
            Ty::Dyn(_) => "dyn",
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::Uint => "uint",
            Ty::Double => "double",
            Ty::Null => "null_type",
            Ty::Type => "type",
            Ty::Timestamp => "google.protobuf.Timestamp",
            Ty::Duration => "google.protobuf.Duration",
            Ty::Url => "kubernetes.URL",
            Ty::Ip => "net.IP",
            Ty::Cidr => "net.CIDR",
            Ty::Semver => "kubernetes.Semver",
            Ty::Format => "kubernetes.NamedFormat",
            Ty::Quantity => "kubernetes.Quantity",
            Ty::Str(_) => "string",
            Ty::Bytes(_) => "bytes",
            Ty::List(..) => "list",
            Ty::Map(..) | Ty::Obj(..) => "map",
            Ty::Opt(_) => "optional_type",
            Ty::Authz(a) => a.name(),
            Ty::Vars(_) => "kubernetes.variables",
        }
    }

    /// cel-go's full name of the type (`list(string)`, `map(string, dyn)`), or `None`
    /// when the checker does not know it (`Dyn(0)`).
    pub(super) fn cel_name(&self) -> Option<String> {
        let inner = |t: &Ty| t.cel_name().unwrap_or_else(|| "dyn".to_string());
        Some(match self {
            Ty::Dyn(0) => return None,
            Ty::List(e, _) => format!("list({})", inner(e)),
            Ty::Map(_, v, _) => format!("map(string, {})", inner(v)),
            Ty::Opt(t) => format!("optional_type({})", inner(t)),
            Ty::Obj(s, _) => match s.get(OBJECT_TYPE_NAME).and_then(Value::as_str) {
                Some(name) => name.to_string(),
                None => "object".to_string(),
            },
            other => other.name().to_string(),
        })
    }

    /// How many times a comprehension over it iterates at most.
    pub(super) fn elems(&self) -> u64 {
        match self {
            Ty::List(_, n) | Ty::Map(_, _, n) | Ty::Dyn(n) => *n,
            Ty::Obj(s, root) => {
                schema::properties(s).map_or(0, |p| p.len() as u64) + if *root { 3 } else { 0 }
            }
            _ => 0,
        }
    }

    /// Characters of a string (or bytes), for the string functions.
    pub(super) fn len(&self) -> u64 {
        match self {
            Ty::Str(n) | Ty::Bytes(n) | Ty::Dyn(n) => *n,
            _ => 1,
        }
    }

    /// The cost of comparing the value (as cel-go's estimator: a tenth of its size, the
    /// characters of a string or the elements of a list or map, at least 1).
    pub(super) fn compare(&self) -> u64 {
        let size = match self {
            Ty::Str(n) | Ty::Bytes(n) => *n,
            Ty::Opt(t) => t.compare(),
            other => other.elems(),
        };
        ceil_div(size, 10).max(1)
    }

    fn is_known_non(&self, wanted: fn(&Ty) -> bool) -> bool {
        !matches!(self, Ty::Dyn(_)) && !wanted(self)
    }
}

pub(super) fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// Of two types an expression may have, the one to go on with (`Dyn(0)` knows nothing).
pub(super) fn unify<'s>(a: Ty<'s>, b: Ty<'s>) -> Ty<'s> {
    match (a, b) {
        (Ty::Dyn(0), t) | (t, Ty::Dyn(0)) => t,
        (Ty::Str(x), Ty::Str(y)) => Ty::Str(x.max(y)),
        (Ty::List(e, x), Ty::List(f, y)) => Ty::List(Box::new(unify(*e, *f)), x.max(y)),
        (Ty::Dyn(x), t) | (t, Ty::Dyn(x)) => Ty::Dyn(x.max(t.elems()).max(t.len())),
        (a, _) => a,
    }
}

/// Namespaces of global functions (`math.abs(x)` parses as a call on the ident `math`).
const NAMESPACES: &[&str] = &[
    "math", "sets", "strings", "optional", "lists", "ip", "format",
];

/// The most elements `lists.range` makes (the crate's limit).
pub(super) const MAX_RANGE: u64 = 1_000_000;

/// Type names usable as values (`type(x) == int`).
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

/// The static pass over one expression.
pub(super) struct Checker<'s, 'a> {
    sizes: Option<&'a Sizes>,
    scope: Vec<(String, Ty<'s>)>,
    /// The declared variables: `self` and `oldSelf` for a CRD rule, `object`, `request`,
    /// ... for an admission expression.
    declared: Vec<(String, Ty<'s>)>,
    /// Errors found: the expression's id and cel-go's words.
    pub errors: Vec<(u64, String)>,
    /// Whether the expression names `oldSelf`.
    pub uses_old_self: bool,
}

impl<'s, 'a> Checker<'s, 'a> {
    /// A checker for a rule on `node`; `root` at a resource's root; `optional_old` when
    /// `oldSelf` is an optional; `sizes` at run time.
    pub fn new(node: &'s Value, root: bool, optional_old: bool, sizes: Option<&'a Sizes>) -> Self {
        let mut c = Checker::declaring(Vec::new());
        c.sizes = sizes;
        let mut self_ty = c.of_schema(node);
        if root && let Ty::Obj(s, _) = self_ty {
            self_ty = Ty::Obj(s, true);
        }
        let old_ty = if optional_old {
            Ty::Opt(Box::new(self_ty.clone()))
        } else {
            self_ty.clone()
        };
        c.declared = vec![
            ("self".to_string(), self_ty),
            ("oldSelf".to_string(), old_ty),
        ];
        c
    }

    /// A checker for an expression in an environment declaring `declared` (an admission
    /// policy's variables).
    pub fn declaring(declared: Vec<(String, Ty<'s>)>) -> Self {
        Checker {
            sizes: None,
            scope: Vec::new(),
            declared,
            errors: Vec::new(),
            uses_old_self: false,
        }
    }

    fn size(&self, s: &Value, bound: u64) -> u64 {
        match self.sizes {
            Some(sizes) => sizes.sizes.get(&addr(s)).copied().unwrap_or(0),
            None => bound,
        }
    }

    fn key_size(&self, s: &Value) -> u64 {
        match self.sizes {
            Some(sizes) => sizes.keys.get(&addr(s)).copied().unwrap_or(0),
            None => UNBOUNDED,
        }
    }

    /// The type of a value of schema `s`.
    pub fn of_schema(&self, s: &'s Value) -> Ty<'s> {
        if schema::is_int_or_string(s) {
            return Ty::Dyn(self.size(s, UNBOUNDED));
        }
        match schema::type_name(s) {
            "boolean" => Ty::Bool,
            "integer" => Ty::Int,
            "number" => Ty::Double,
            "string" => match s.get("format").and_then(Value::as_str) {
                Some("date-time") => Ty::Timestamp,
                Some("duration") => Ty::Duration,
                Some("byte") => Ty::Bytes(self.size(s, schema::max_length(s))),
                _ => Ty::Str(self.size(s, schema::max_length(s))),
            },
            "array" => {
                let elem = schema::items(s).map_or(Ty::Dyn(UNBOUNDED), |i| self.of_schema(i));
                Ty::List(Box::new(elem), self.size(s, schema::max_items(s).0))
            }
            "object" => {
                if let Some(ap) = schema::additional(s) {
                    let n = self.size(s, schema::max_properties(s).0);
                    Ty::Map(self.key_size(s), Box::new(self.of_schema(ap)), n)
                } else if schema::properties(s).is_some()
                    || schema::is_embedded(s)
                    || !schema::preserves_unknown(s)
                {
                    Ty::Obj(s, schema::is_embedded(s))
                } else {
                    Ty::Dyn(self.size(s, UNBOUNDED))
                }
            }
            _ => Ty::Dyn(self.size(s, UNBOUNDED)),
        }
    }

    fn error(&mut self, id: u64, message: String) {
        self.errors.push((id, message));
    }

    fn undeclared(&mut self, id: u64, name: &str) {
        self.error(
            id,
            format!("undeclared reference to '{name}' (in container '')"),
        );
    }

    /// The type and estimated cost of `e`.
    pub fn expr(&mut self, e: &IdedExpr) -> (Ty<'s>, u64) {
        match &e.expr {
            Expr::Unspecified => (Ty::Dyn(0), 0),
            Expr::Literal(l) => (literal(l), 0),
            Expr::Ident(name) => (self.ident(e.id, name), 1),
            Expr::Select(sel) => {
                let (t, c) = self.expr(&sel.operand);
                let field = self.field(e.id, t, &sel.field);
                let t = if sel.test { Ty::Bool } else { field };
                (t, c.saturating_add(1))
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::Comprehension(comp) => self.comprehension(comp),
            Expr::List(list) => {
                let mut cost = 1u64;
                let mut elem = Ty::Dyn(0);
                for (i, x) in list.elements.iter().enumerate() {
                    let (t, c) = self.expr(x);
                    cost = cost.saturating_add(c);
                    elem = if i == 0 { t } else { unify(elem, t) };
                }
                (Ty::List(Box::new(elem), list.elements.len() as u64), cost)
            }
            Expr::Map(map) => {
                let mut cost = 1u64;
                let mut value = Ty::Dyn(0);
                let mut key_len = 0;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        let (k, kc) = self.expr(&m.key);
                        let (v, vc) = self.expr(&m.value);
                        key_len = key_len.max(k.len());
                        cost = cost.saturating_add(kc).saturating_add(vc);
                        value = unify(value, v);
                    }
                }
                let n = map.entries.len() as u64;
                (Ty::Map(key_len, Box::new(value), n), cost)
            }
            Expr::Struct(st) => {
                self.undeclared(e.id, &st.type_name);
                (Ty::Dyn(0), 1)
            }
        }
    }

    fn ident(&mut self, id: u64, name: &str) -> Ty<'s> {
        if let Some((_, t)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        if let Some((_, t)) = self.declared.iter().find(|(n, _)| n == name) {
            self.uses_old_self |= name == "oldSelf";
            return t.clone();
        }
        match name {
            n if TYPE_NAMES.contains(&n) => Ty::Type,
            _ => {
                self.undeclared(id, name);
                Ty::Dyn(0)
            }
        }
    }

    fn field(&mut self, id: u64, t: Ty<'s>, name: &str) -> Ty<'s> {
        if let Ty::Authz(a) = &t
            && let Some(f) = a.field(name)
        {
            return Ty::Authz(f);
        }
        match t {
            Ty::Obj(s, root) => {
                // A declared object type's fields go by their names; a schema's properties
                // by their escaped ones.
                let typed = s.get(OBJECT_TYPE_NAME).is_some();
                let declared = schema::properties(s).into_iter().flatten();
                let mut declared = declared.filter(|(k, _)| {
                    if typed {
                        k.as_str() == name
                    } else {
                        schema::escape(k).as_deref() == Some(name)
                    }
                });
                if let Some((_, p)) = declared.next() {
                    return self.of_schema(p);
                }
                match name {
                    "apiVersion" | "kind" if root => Ty::Str(OBJECT_META_LEN),
                    "metadata" if root => Ty::Dyn(OBJECT_META_LEN),
                    _ if schema::preserves_unknown(s) => Ty::Dyn(self.size(s, UNBOUNDED)),
                    _ => {
                        self.error(id, format!("undefined field '{name}'"));
                        Ty::Dyn(0)
                    }
                }
            }
            Ty::Map(_, v, _) => *v,
            Ty::Dyn(n) => Ty::Dyn(n),
            Ty::Vars(vars) => match vars.iter().find(|(n, _)| n == name) {
                Some((_, t)) => t.clone(),
                None => {
                    self.error(id, format!("undefined field '{name}'"));
                    Ty::Dyn(0)
                }
            },
            other => {
                let message = format!("type '{}' does not support field selection", other.name());
                self.error(id, message);
                Ty::Dyn(0)
            }
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> (Ty<'s>, u64) {
        let (range, range_cost) = self.expr(&c.iter_range);
        let n = range.elems();
        let (first, second) = match &range {
            Ty::List(e, _) if c.iter_var2.is_some() => (Ty::Int, (**e).clone()),
            Ty::List(e, _) => ((**e).clone(), Ty::Dyn(0)),
            Ty::Map(k, v, _) => (Ty::Str(*k), (**v).clone()),
            Ty::Obj(..) => (Ty::Str(UNBOUNDED), Ty::Dyn(UNBOUNDED)),
            Ty::Dyn(n) => (Ty::Dyn(*n), Ty::Dyn(*n)),
            other => {
                let message = format!(
                    "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                    other.name()
                );
                self.error(c.iter_range.id, message);
                (Ty::Dyn(0), Ty::Dyn(0))
            }
        };
        let (init, init_cost) = self.expr(&c.accu_init);
        // `map` and `filter` build a list of at most one element per iteration from `[]`.
        // ... and `transformMap` a map of at most one entry per iteration from `{}`.
        let builds = match &c.accu_init.expr {
            Expr::List(l) => l.elements.is_empty(),
            Expr::Map(m) => m.entries.is_empty(),
            _ => false,
        };
        let init = match init {
            Ty::List(e, _) if builds => Ty::List(e, n),
            Ty::Map(k, v, _) if builds => Ty::Map(k, v, n),
            other => other,
        };
        let depth = self.scope.len();
        self.scope.push((c.iter_var.clone(), first));
        if let Some(v2) = &c.iter_var2 {
            self.scope.push((v2.clone(), second));
        }
        self.scope.push((c.accu_var.clone(), init.clone()));
        let (_, cond_cost) = self.expr(&c.loop_cond);
        let (step, step_cost) = self.expr(&c.loop_step);
        let accu = match step {
            Ty::List(e, _) if builds => Ty::List(e, n),
            Ty::Map(k, v, _) if builds => Ty::Map(k, v, n),
            _ => init,
        };
        if let Some(last) = self.scope.last_mut() {
            last.1 = accu;
        }
        let (result, result_cost) = self.expr(&c.result);
        self.scope.truncate(depth);
        let per_item = cond_cost.saturating_add(step_cost);
        let cost = range_cost
            .saturating_add(init_cost)
            .saturating_add(n.saturating_mul(per_item))
            .saturating_add(result_cost);
        (result, cost)
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> (Ty<'s>, u64) {
        if let (OPT_SELECT, [operand, field]) = (call.func_name.as_str(), call.args.as_slice())
            && let Expr::Literal(LiteralValue::String(name)) = &field.expr
        {
            let (t, c) = self.expr(operand);
            let t = match t {
                Ty::Opt(inner) => *inner,
                t => t,
            };
            let field = self.field(id, t, name.inner());
            return (Ty::Opt(Box::new(field)), c.saturating_add(1));
        }
        let mut name = call.func_name.clone();
        let mut target = call.target.as_deref();
        if let Some(IdedExpr {
            expr: Expr::Ident(ns),
            ..
        }) = target
            && NAMESPACES.contains(&ns.as_str())
            && !self.scope.iter().any(|(n, _)| n == ns)
        {
            name = format!("{ns}.{name}");
            target = None;
        }
        let mut cost = 0u64;
        let mut args = Vec::new();
        for e in target.into_iter().chain(call.args.iter()) {
            let (t, c) = self.expr(e);
            cost = cost.saturating_add(c);
            args.push(t);
        }
        if let [a, b] = args.as_slice()
            && !operands_match(&name, a, b)
        {
            let message = format!(
                "found no matching overload for '{name}' applied to '({}, {})'",
                a.name(),
                b.name()
            );
            self.error(id, message);
        }
        if let Some(message) = string_argument_mismatch(&name, target.is_some(), &args) {
            self.error(id, message);
        }
        if name == "lists.range"
            && let Some(Expr::Literal(LiteralValue::Int(k))) = call.args.first().map(|a| &a.expr)
        {
            let k = u64::try_from(*k.inner()).unwrap_or(0).min(MAX_RANGE);
            return (Ty::List(Box::new(Ty::Int), k), cost.saturating_add(1 + k));
        }
        if let Some(found) = super::authz::function(&name, target.is_some(), &args) {
            return match found {
                Ok((t, own)) => (t, cost.saturating_add(own)),
                Err(message) => {
                    self.error(id, message);
                    (Ty::Dyn(0), cost)
                }
            };
        }
        match super::functions::function(&name, &args) {
            Some((t, own)) => (t, cost.saturating_add(own)),
            None => {
                self.undeclared(id, &call.func_name);
                (Ty::Dyn(0), cost)
            }
        }
    }
}

fn literal<'s>(l: &LiteralValue) -> Ty<'s> {
    match l {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Int(_) => Ty::Int,
        LiteralValue::UInt(_) => Ty::Uint,
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(s) => Ty::Str(s.inner().chars().count() as u64),
        LiteralValue::Bytes(b) => Ty::Bytes(b.inner().len() as u64),
    }
}

/// A scalar type's kind, for the operator checks; `None` for types they do not judge.
fn scalar(t: &Ty) -> Option<u8> {
    Some(match t {
        Ty::Bool => 0,
        Ty::Int => 1,
        Ty::Uint => 2,
        Ty::Double => 3,
        Ty::Str(_) => 4,
        Ty::Bytes(_) => 5,
        Ty::Timestamp => 6,
        Ty::Duration => 7,
        _ => return None,
    })
}

/// Whether a binary operator has an overload for two operands (types it does not judge,
/// `dyn` among them, always match): equality wants one type, ordering one type or two
/// numbers, arithmetic one numeric type (or strings, bytes and lists for `+`, and the
/// time arithmetic), `&&` and `||` two bools.
fn operands_match(op: &str, a: &Ty, b: &Ty) -> bool {
    let (Some(x), Some(y)) = (scalar(a), scalar(b)) else {
        return true;
    };
    let numeric = |k: u8| (1..=3).contains(&k);
    match op {
        "_==_" | "_!=_" => x == y,
        "_<_" | "_<=_" | "_>_" | "_>=_" => x == y || (numeric(x) && numeric(y)),
        "_+_" => (x == y && x != 0 && x != 6) || matches!((x, y), (6, 7) | (7, 6)),
        "_-_" => (x == y && x != 0 && x != 4 && x != 5) || (x, y) == (6, 7),
        "_*_" | "_/_" => x == y && numeric(x),
        "_%_" => x == y && (x == 1 || x == 2),
        "_&&_" | "_||_" => x == 0 && y == 0,
        _ => true,
    }
}

/// The global functions of one string argument (the IP, CIDR, semver and format
/// libraries' parsers and tests).
const OF_A_STRING: &[&str] = &[
    "ip",
    "isIP",
    "ip.isCanonical",
    "cidr",
    "isCIDR",
    "semver",
    "isSemver",
    "format.named",
];

/// cel-go's type name of a type the checker knows for certain (`int`, `list(int)`).
fn known_name(t: &Ty) -> Option<String> {
    match t {
        Ty::List(e, _) => Some(format!("list({})", known_name(e)?)),
        Ty::Dyn(_) | Ty::Map(..) | Ty::Obj(..) | Ty::Opt(_) => None,
        other => Some(other.name().to_string()),
    }
}

/// cel-go's refusal of a string function called (without a receiver) on something that is
/// certainly not a string: `found no matching overload for 'cidr' applied to '(int)'`.
fn string_argument_mismatch(name: &str, member: bool, args: &[Ty]) -> Option<String> {
    if member || !OF_A_STRING.contains(&name) {
        return None;
    }
    let first = args.first()?;
    if matches!(first, Ty::Str(_)) {
        return None;
    }
    let mut names = vec![known_name(first)?];
    for a in &args[1..] {
        names.push(known_name(a)?);
    }
    Some(format!(
        "found no matching overload for '{name}' applied to '({})'",
        names.join(", ")
    ))
}

/// Whether a rule's result type is (or may be) a bool.
pub(super) fn may_be_bool(t: &Ty) -> bool {
    !t.is_known_non(|t| matches!(t, Ty::Bool))
}

/// Whether a messageExpression's result type is (or may be) a string.
pub(super) fn may_be_string(t: &Ty) -> bool {
    !t.is_known_non(|t| matches!(t, Ty::Str(_)))
}
