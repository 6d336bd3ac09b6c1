//! The result type and own cost of each function the environment declares, for the static
//! pass (`check`): cel-go's estimator factors (a tenth of a string's length for a traversal,
//! a quarter of a pattern's for a regex) and Kubernetes' library estimator
//! (`k8s.io/apiserver/pkg/cel/library/cost.go`) for its libraries.

use super::check::{MAX_RANGE, Ty, UNBOUNDED, ceil_div, unify};

/// The result type and own cost of calling `name` on `args` (the receiver first), or
/// `None` for a function the environment does not declare.
pub(super) fn function<'s>(name: &str, args: &[Ty<'s>]) -> Option<(Ty<'s>, u64)> {
    let a0 = args.first().cloned().unwrap_or(Ty::Dyn(0));
    let a1 = args.get(1).cloned().unwrap_or(Ty::Dyn(0));
    let (r, a) = (a0.len(), a1.len());
    let elem = |t: &Ty<'s>| match t {
        Ty::List(e, _) => (**e).clone(),
        Ty::Map(_, v, _) => (**v).clone(),
        Ty::Dyn(n) => Ty::Dyn(*n),
        _ => Ty::Dyn(0),
    };
    let walk = |t: &Ty<'s>| t.elems().saturating_mul(elem(t).compare());
    Some(match name {
        "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
            (Ty::Bool, a0.compare().min(a1.compare()))
        }
        "_&&_" | "_||_" | "!_" | "@not_strictly_false" | "not_strictly_false" => (Ty::Bool, 0),
        "@in" => match &a1 {
            Ty::Map(..) | Ty::Obj(..) => (Ty::Bool, 1),
            other => (Ty::Bool, 1 + other.elems()),
        },
        "_+_" => match (a0, a1) {
            (Ty::Str(x), Ty::Str(y)) => (Ty::Str(x + y), 1 + ceil_div(x + y, 10)),
            (Ty::Bytes(x), Ty::Bytes(y)) => (Ty::Bytes(x + y), 1 + ceil_div(x + y, 10)),
            (Ty::List(e, x), Ty::List(f, y)) => {
                (Ty::List(Box::new(unify(*f, *e)), x.saturating_add(y)), 1)
            }
            (Ty::Duration, Ty::Timestamp) => (Ty::Timestamp, 1),
            (t, _) => (t, 1),
        },
        "_-_" => match (a0, a1) {
            (Ty::Timestamp, Ty::Timestamp) => (Ty::Duration, 1),
            (t, _) => (t, 1),
        },
        "_*_" | "_/_" | "_%_" | "-_" => (a0, 1),
        "_?_:_" => (unify(a1, args.get(2).cloned().unwrap_or(Ty::Dyn(0))), 0),
        "_[?_]" => match a0 {
            Ty::Opt(t) => (Ty::Opt(Box::new(elem(&t))), 1),
            t => (Ty::Opt(Box::new(elem(&t))), 1),
        },
        "_[_]" => match a0 {
            Ty::Obj(..) => (Ty::Dyn(UNBOUNDED), 1),
            t => (elem(&t), 1),
        },
        "size" => (Ty::Int, 1),
        // `transformMap`'s (the map, a key, a value) and `transformMapEntry`'s (the map, an
        // entry's map); the comprehension sizes the map it builds.
        super::comprehensions::MAP_INSERT => match args.get(2) {
            Some(v) => (Ty::Map(a1.len(), Box::new(v.clone()), 0), 1),
            None => match a1 {
                Ty::Map(k, v, _) => (Ty::Map(k, v, 0), 1),
                other => (other, 1),
            },
        },
        "contains" => (
            Ty::Bool,
            1 + ceil_div(r, 10).max(1) * ceil_div(a, 10).max(1),
        ),
        "startsWith" | "endsWith" => (Ty::Bool, 1 + ceil_div(a, 10)),
        "matches" | super::find::MATCHES => {
            (Ty::Bool, 1 + ceil_div(r, 10).max(1) * ceil_div(a, 4).max(1))
        }
        "lowerAscii" | "upperAscii" | "trim" | "charAt" | "substring" | "strings.quote" => {
            (Ty::Str(r + 2), 1 + ceil_div(r, 10))
        }
        "replace" => {
            let new = args.get(2).map_or(0, Ty::len);
            let out = r.saturating_mul(new + 1);
            (Ty::Str(out), 1 + ceil_div(r, 10) + ceil_div(out, 10))
        }
        "split" => (Ty::List(Box::new(Ty::Str(r)), r + 1), 1 + ceil_div(r, 10)),
        "indexOf" | "lastIndexOf" => match a0 {
            Ty::List(..) => (Ty::Int, 1 + walk(&a0)),
            _ => (Ty::Int, 1 + ceil_div(r, 10).max(1) * ceil_div(a, 10).max(1)),
        },
        "join" => {
            let out = a0.elems().saturating_mul(elem(&a0).len() + a);
            (Ty::Str(out), 1 + a0.elems() + ceil_div(out, 10))
        }
        "reverse" => match a0 {
            Ty::List(..) => (a0.clone(), 1 + a0.elems()),
            _ => (Ty::Str(r), 1 + ceil_div(r, 10)),
        },
        "isSorted" => (Ty::Bool, 1 + walk(&a0)),
        "sum" | "min" | "max" => (elem(&a0), 1 + walk(&a0)),
        "distinct" => (a0.clone(), 1 + a0.elems().saturating_mul(walk(&a0))),
        "sort" | "@sortByAssociatedKeys" => {
            let n = a0.elems();
            let log = 64 - u64::from(n.leading_zeros());
            (a0.clone(), 1 + walk(&a0).saturating_mul(log.max(1)))
        }
        "slice" => (a0.clone(), 1 + a0.elems()),
        "lists.range" => (Ty::List(Box::new(Ty::Int), MAX_RANGE), 1 + MAX_RANGE),
        "flatten" => {
            let inner = elem(&a0);
            let n = a0.elems().saturating_mul(inner.elems().max(1));
            (Ty::List(Box::new(elem(&inner)), n), 1 + n)
        }
        "sets.contains" | "sets.equivalent" | "sets.intersects" => {
            (Ty::Bool, 1 + walk(&a0).saturating_mul(walk(&a1).max(1)))
        }
        "int" | "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => {
            (Ty::Int, 1 + ceil_div(r, 10))
        }
        "uint" => (Ty::Uint, 1 + ceil_div(r, 10)),
        "double" => (Ty::Double, 1 + ceil_div(r, 10)),
        "bool" => (Ty::Bool, 1),
        "string" => (Ty::Str(r.max(64)), 1 + ceil_div(r, 10)),
        "bytes" => (Ty::Bytes(r), 1 + ceil_div(r, 10)),
        "timestamp" => (Ty::Timestamp, 1 + ceil_div(r, 10)),
        "duration" => (Ty::Duration, 1 + ceil_div(r, 10)),
        "dyn" => (Ty::Dyn(a0.elems().max(a0.len())), 1),
        "type" => (Ty::Type, 1),
        "url" => (Ty::Url, 1 + ceil_div(r, 10)),
        "isURL" => (Ty::Bool, 1 + ceil_div(r, 10)),
        "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" => {
            (Ty::Str(UNBOUNDED), 1)
        }
        "getQuery" => {
            let values = Ty::List(Box::new(Ty::Str(UNBOUNDED)), UNBOUNDED);
            (Ty::Map(UNBOUNDED, Box::new(values), UNBOUNDED), 1)
        }
        "find" => (Ty::Str(r), 1 + regex_cost(r, a)),
        "findAll" => (Ty::List(Box::new(Ty::Str(r)), r), 1 + regex_cost(r, a)),
        // Upstream's estimator prices `ip`, `cidr`, `isIP`, `isCIDR` and `ip.isCanonical`
        // (no receiver) and `ip()` of a CIDR at the call alone.
        "ip" => (Ty::Ip, 1),
        "cidr" => (Ty::Cidr, 1),
        "isIP"
        | "isCIDR"
        | "ip.isCanonical"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast" => (Ty::Bool, 1),
        "family" | "prefixLength" => (Ty::Int, 1),
        "masked" => (Ty::Cidr, 1),
        // Two addresses of at most 16 bytes compared, plus parsing a string argument;
        // `containsCIDR` also masks and compares the prefix lengths.
        "containsIP" => (Ty::Bool, 1 + 4 + parse_cost(&a1)),
        "containsCIDR" => (Ty::Bool, 1 + 4 + 2 + 1 + parse_cost(&a1)),
        "format.named" => (Ty::Opt(Box::new(Ty::Format)), 1),
        n if n.starts_with("format.") => (Ty::Format, 1),
        // The string against a pattern of upstream's largest `MaxRegexSize` but the URI's.
        "validate" => {
            let problems = Ty::List(Box::new(Ty::Str(UNBOUNDED)), 2);
            (Ty::Opt(Box::new(problems)), 1 + regex_cost(a, 60))
        }
        "semver" => (Ty::Semver, 1),
        "isSemver" => (Ty::Bool, 1),
        "major" | "minor" | "patch" => (Ty::Int, 1),
        "quantity" => (Ty::Quantity, 1 + ceil_div(r, 10)),
        "isQuantity" => (Ty::Bool, 1 + ceil_div(r, 10)),
        "add" | "sub" => (Ty::Quantity, 1),
        "isInteger" | "isLessThan" | "isGreaterThan" => (Ty::Bool, 1),
        "asInteger" | "sign" | "compareTo" => (Ty::Int, 1),
        "asApproximateFloat" => (Ty::Double, 1),
        "hasValue" => (Ty::Bool, 1),
        "value" | "orValue" => match a0 {
            Ty::Opt(t) => (*t, 1),
            t => (t, 1),
        },
        "or" => (a0, 1),
        "optional.of" | "optional.ofNonZeroValue" => (Ty::Opt(Box::new(a0)), 1),
        "format" => (Ty::Str(UNBOUNDED), 1 + ceil_div(r, 10) + walk(&a1)),
        "optional.none" => (Ty::Opt(Box::new(Ty::Dyn(0))), 1),
        "math.isInf" | "math.isNaN" | "math.isFinite" => (Ty::Bool, 1),
        "math.sqrt" => (Ty::Double, 1),
        "math.ceil" | "math.floor" | "math.round" | "math.trunc" | "math.abs" | "math.sign"
        | "math.bitAnd" | "math.bitOr" | "math.bitXor" | "math.bitNot" | "math.bitShiftLeft"
        | "math.bitShiftRight" => (a0, 1),
        "math.greatest" | "math.least" => (a0.clone(), 1 + args.len() as u64 + walk(&a0)),
        _ => return None,
    })
}

/// Upstream's `find` and `findAll` estimate: a tenth of the string (plus one) times a
/// quarter of the pattern.
fn regex_cost(string: u64, pattern: u64) -> u64 {
    ceil_div(string + 1, 10).saturating_mul(ceil_div(pattern, 4))
}

/// What parsing a string argument adds (a tenth of its length); nothing for a value.
fn parse_cost(arg: &Ty) -> u64 {
    match arg {
        Ty::Str(n) | Ty::Dyn(n) => ceil_div(*n, 10),
        _ => 0,
    }
}
