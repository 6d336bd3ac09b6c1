//! The CEL environment the rules run in: the `cel` crate's standard library with its
//! strings, lists and math extensions, plus the parts of Kubernetes' CEL environment it
//! lacks: `cel.bind`, the lists library (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf` on
//! lists), the sets library (`sets.contains`, `sets.equivalent`, `sets.intersects`) and the
//! URL library (`url`, `isURL`, `getScheme`, `getHost`, `getHostname`, `getPort`,
//! `getEscapedPath`, `getQuery`); the quantity, regex (`find`), IP and CIDR (`net`) and
//! semver libraries are in their own modules.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::common::types::{CelString, DYN_TYPE, LIST_TYPE, MAP_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::{Key, Map};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{Env, ExecutionError, Value, extensions};

/// The environment every rule compiles and runs in.
pub(super) static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(build()));

fn build() -> Env {
    let mut env = Env::stdlib();
    let registered = env
        .add_extension(extensions::strings)
        .and_then(|()| env.add_extension(extensions::lists))
        .and_then(|()| env.add_extension(extensions::math))
        .and_then(|()| kubernetes(&mut env));
    if let Err(e) = registered {
        // The declarations are fixed: a conflict is a bug in this file.
        panic!("CEL environment: {e}");
    }
    env
}

fn kubernetes(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_macro(Macro::receiver("bind", 3, bind))?;
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    let dyn_arg = || vec![DYN_TYPE];
    env.add_member_overload("indexOf", "list_index_of", LIST_TYPE, dyn_arg(), index_of)?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        dyn_arg(),
        last_index_of,
    )?;
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload("sets.contains", "sets_contains", lists(), sets_contains)?;
    env.add_overload(
        "sets.equivalent",
        "sets_equivalent",
        lists(),
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "sets_intersects",
        lists(),
        sets_intersects,
    )?;
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    env.add_member_overload("getScheme", "url_get_scheme", MAP_TYPE, vec![], get_scheme)?;
    env.add_member_overload("getHost", "url_get_host", MAP_TYPE, vec![], get_host)?;
    env.add_member_overload(
        "getHostname",
        "url_get_hostname",
        MAP_TYPE,
        vec![],
        get_hostname,
    )?;
    env.add_member_overload("getPort", "url_get_port", MAP_TYPE, vec![], get_port)?;
    env.add_member_overload("getEscapedPath", "url_get_path", MAP_TYPE, vec![], get_path)?;
    env.add_member_overload("getQuery", "url_get_query", MAP_TYPE, vec![], get_query)?;
    super::quantity::register(env)?;
    super::find::register(env)?;
    super::net::register(env)?;
    super::semver::register(env)?;
    super::comprehensions::register(env)?;
    super::format_lib::register(env)
}

/// Expands `cel.bind(v, init, body)` into a comprehension over no elements whose
/// accumulator `v` is `init` and whose result is `body`, as cel-go's bindings do.
fn bind(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel") {
        return Ok(None);
    }
    let Some(Expr::Ident(var)) = args.first().map(|a| a.expr.clone()) else {
        let id = args.first().map_or(0, |a| a.id);
        return Err(helper.new_error(id, "cel.bind() variable names must be simple identifiers"));
    };
    let (Some(body), Some(init)) = (args.pop(), args.pop()) else {
        return Ok(None);
    };
    let bound = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(var)),
        result: body,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bound)))))
}

/// Calls a one-string-argument function of the environment (`timestamp`, `duration`):
/// how JSON strings of those formats become CEL values.
pub(super) fn convert(function: &str, s: &str) -> Option<Value> {
    let arg = CowVal::owned(CelString::from(s.to_string()));
    let f = ENV.find_overload(function, std::slice::from_ref(&arg))?;
    let out = f(vec![arg]).ok()?;
    Value::try_from(out.as_ref()).ok()
}

pub(super) fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>, ExecutionError> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

pub(super) fn owned<'b, 'v>(v: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let boxed: Box<dyn Val> = v.try_into()?;
    Ok(CowVal::Owned(boxed))
}

/// Declares an overload from a function of the argument values.
macro_rules! overload {
    ($name:ident, $body:expr) => {
        fn $name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let f: fn(&[Value]) -> Result<Value, ExecutionError> = $body;
            owned(f(&values(&args)?)?)
        }
    };
}
pub(super) use overload;

pub(super) fn err(function: &str, message: &str) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn list<'a>(args: &'a [Value], i: usize, function: &str) -> Result<&'a [Value], ExecutionError> {
    match args.get(i) {
        Some(Value::List(l)) => Ok(l.as_slice()),
        _ => Err(err(function, "expected a list")),
    }
}

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::Duration(x), Value::Duration(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn ordered(a: &Value, b: &Value, function: &str) -> Result<Ordering, ExecutionError> {
    compare(a, b).ok_or_else(|| err(function, "list elements are not comparable"))
}

overload!(is_sorted, |args| {
    let l = list(args, 0, "isSorted")?;
    for w in l.windows(2) {
        if ordered(&w[0], &w[1], "isSorted")? == Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
});

overload!(sum, |args| {
    let l = list(args, 0, "sum")?;
    let Some(first) = l.first() else {
        return Ok(Value::Int(0));
    };
    let mut acc = first.clone();
    for v in &l[1..] {
        acc = match (&acc, v) {
            (Value::Int(a), Value::Int(b)) => Value::Int(
                a.checked_add(*b)
                    .ok_or_else(|| err("sum", "integer overflow"))?,
            ),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| err("sum", "unsigned integer overflow"))?,
            ),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => Value::Duration(*a + *b),
            _ => return Err(err("sum", "list elements cannot be summed")),
        };
    }
    Ok(acc)
});

fn extreme(args: &[Value], function: &str, keep: Ordering) -> Result<Value, ExecutionError> {
    let l = list(args, 0, function)?;
    let Some(mut best) = l.first() else {
        return Err(err(function, &format!("{function} called on empty list")));
    };
    for v in &l[1..] {
        if ordered(v, best, function)? == keep {
            best = v;
        }
    }
    Ok(best.clone())
}

overload!(min, |args| extreme(args, "min", Ordering::Less));
overload!(max, |args| extreme(args, "max", Ordering::Greater));

fn position(args: &[Value], function: &str, last: bool) -> Result<Value, ExecutionError> {
    let l = list(args, 0, function)?;
    let wanted = args.get(1).unwrap_or(&Value::Null);
    let found = if last {
        l.iter().rposition(|v| v == wanted)
    } else {
        l.iter().position(|v| v == wanted)
    };
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

overload!(index_of, |args| position(args, "indexOf", false));
overload!(last_index_of, |args| position(args, "lastIndexOf", true));

fn contains_all(a: &[Value], b: &[Value]) -> bool {
    b.iter().all(|x| a.contains(x))
}

overload!(sets_contains, |args| {
    let (a, b) = (
        list(args, 0, "sets.contains")?,
        list(args, 1, "sets.contains")?,
    );
    Ok(Value::Bool(contains_all(a, b)))
});

overload!(sets_equivalent, |args| {
    let (a, b) = (
        list(args, 0, "sets.equivalent")?,
        list(args, 1, "sets.equivalent")?,
    );
    Ok(Value::Bool(contains_all(a, b) && contains_all(b, a)))
});

overload!(sets_intersects, |args| {
    let (a, b) = (
        list(args, 0, "sets.intersects")?,
        list(args, 1, "sets.intersects")?,
    );
    Ok(Value::Bool(b.iter().any(|x| a.contains(x))))
});

/// The parts of a URL as Go's `url.ParseRequestURI` splits them.
struct Url {
    scheme: String,
    host: String,
    path: String,
    query: String,
}

/// The key a URL value (a map) keeps its text under.
/// A value of one of Kubernetes' CEL types the `cel` crate has no type for (a URL, an IP, a
/// CIDR, a quantity, a semver, a format): a map of one entry under an integer key, which no
/// object's data can make (a JSON object's keys are strings), holding the value's text.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Opaque {
    /// `url()`.
    Url = 1,
    /// `ip()`.
    Ip,
    /// `cidr()`.
    Cidr,
    /// `quantity()`.
    Quantity,
    /// `semver()`.
    Semver,
    /// `format.<name>()`.
    Format,
}

impl Opaque {
    fn key(self) -> Key {
        Key::Int(i64::MIN + self as i64)
    }

    /// A value of this type holding `text`.
    pub(super) fn wrap(self, text: String) -> Value {
        let entries = HashMap::from([(self.key(), Value::from(text))]);
        Value::Map(Map {
            map: Arc::new(entries),
        })
    }

    /// The text `v` holds, if it is a value of this type.
    pub(super) fn text(self, v: Option<&Value>) -> Option<&str> {
        match v {
            Some(Value::Map(m)) => match m.map.get(&self.key()) {
                Some(Value::String(s)) => Some(s.as_str()),
                _ => None,
            },
            _ => None,
        }
    }
}

fn parse_url(raw: &str) -> Option<Url> {
    let (scheme, rest) = match raw.split_once(':') {
        Some((s, rest))
            if s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (s.to_string(), rest)
        }
        _ if raw.starts_with('/') => (String::new(), raw),
        _ => return None,
    };
    if raw.chars().any(|c| c.is_control() || c == ' ') {
        return None;
    }
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (host, path) = match rest.strip_prefix("//") {
        Some(auth) => {
            let end = auth.find('/').unwrap_or(auth.len());
            let host = auth[..end].rsplit('@').next().unwrap_or_default();
            (host.to_string(), auth[end..].to_string())
        }
        None if !scheme.is_empty() && !rest.starts_with('/') => return None,
        None => (String::new(), rest.to_string()),
    };
    Some(Url {
        scheme,
        host,
        path,
        query: query.to_string(),
    })
}

overload!(url, |args| {
    let Some(Value::String(raw)) = args.first() else {
        return Err(err("url", "expected a string"));
    };
    if parse_url(raw).is_none() {
        let message = format!(
            "URL parse error during conversion from string: parse {:?}: invalid URI for request",
            raw.as_str()
        );
        return Err(err("url", &message));
    }
    Ok(Opaque::Url.wrap(raw.to_string()))
});

overload!(is_url, |args| {
    let ok = matches!(args.first(), Some(Value::String(raw)) if parse_url(raw).is_some());
    Ok(Value::Bool(ok))
});

fn url_of(args: &[Value], function: &str) -> Result<Url, ExecutionError> {
    if let Some(raw) = Opaque::Url.text(args.first())
        && let Some(u) = parse_url(raw)
    {
        return Ok(u);
    }
    Err(err(function, "expected a URL"))
}

/// The host without brackets and port.
fn hostname(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    host.split(':').next().unwrap_or_default()
}

fn port(host: &str) -> &str {
    let after = host.rsplit(']').next().unwrap_or(host);
    after.rsplit_once(':').map_or("", |(_, p)| p)
}

overload!(get_scheme, |args| Ok(Value::from(
    url_of(args, "getScheme")?.scheme
)));
overload!(get_host, |args| Ok(Value::from(
    url_of(args, "getHost")?.host
)));
overload!(get_hostname, |args| Ok(Value::from(
    hostname(&url_of(args, "getHostname")?.host).to_string()
)));
overload!(get_port, |args| Ok(Value::from(
    port(&url_of(args, "getPort")?.host).to_string()
)));
overload!(get_path, |args| Ok(Value::from(
    url_of(args, "getEscapedPath")?.path
)));

fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= bytes.len() => {
                match u8::from_str_radix(s.get(i + 1..i + 3).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

overload!(get_query, |args| {
    let u = url_of(args, "getQuery")?;
    let mut query: HashMap<Key, Vec<Value>> = HashMap::new();
    for pair in u.query.split(['&', ';']).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query
            .entry(Key::from(unescape(k)))
            .or_default()
            .push(Value::from(unescape(v)));
    }
    let entries = query
        .into_iter()
        .map(|(k, v)| (k, Value::List(Arc::new(v))))
        .collect();
    Ok(Value::Map(Map {
        map: Arc::new(entries),
    }))
});
