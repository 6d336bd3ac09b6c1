//! Kubernetes' CEL IP and CIDR libraries (`k8s.io/apiserver/pkg/cel/library/ip.go` and
//! `cidr.go`): `ip('10.0.0.1')`, `isIP`, `ip.isCanonical`, on an IP `family`,
//! `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast`,
//! `isGlobalUnicast`; `cidr('10.0.0.0/8')`, `isCIDR`, on a CIDR `containsIP` (an IP or a
//! string), `containsCIDR` (a CIDR or a string), `ip`, `masked`, `prefixLength`; and
//! `string()` of either. Addresses are parsed as Go's `net/netip` parses them ([`go_netip`]),
//! with its error words; IPv4-mapped IPv6 addresses and zones are refused. An IP is held as a
//! map of one entry, its canonical text (so `==` compares addresses); a CIDR as its address's
//! canonical text and its prefix length (so `==` compares both, as `netip.Prefix` does).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use cel::common::types::{MAP_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::go_netip::{parse_addr, parse_prefix};
use super::library::{Opaque, err, overload, owned, values};
use crate::apimachinery::quote::go_quote;

/// Registers the IP and CIDR functions on `env`.
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], string_to_ip)?;
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], is_ip)?;
    env.add_overload(
        "ip.isCanonical",
        "ip_is_canonical",
        vec![STRING_TYPE],
        is_canonical,
    )?;
    env.add_overload("cidr", "string_to_cidr", vec![STRING_TYPE], string_to_cidr)?;
    env.add_overload("isCIDR", "is_cidr", vec![STRING_TYPE], is_cidr)?;
    env.add_overload("string", "net_to_string", vec![MAP_TYPE], to_string)?;
    let members: [(&str, cel::common::functions::Function); 10] = [
        ("family", family),
        ("isUnspecified", is_unspecified),
        ("isLoopback", is_loopback),
        ("isLinkLocalMulticast", is_link_local_multicast),
        ("isLinkLocalUnicast", is_link_local_unicast),
        ("isGlobalUnicast", is_global_unicast),
        ("ip", cidr_ip),
        ("masked", masked),
        ("prefixLength", prefix_length),
        ("containsIP", contains_ip),
    ];
    for (name, f) in members {
        let args = if name == "containsIP" {
            vec![MAP_TYPE]
        } else {
            vec![]
        };
        env.add_member_overload(name, &format!("net_{name}"), MAP_TYPE, args, f)?;
    }
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        MAP_TYPE,
        vec![STRING_TYPE],
        contains_ip,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        MAP_TYPE,
        vec![MAP_TYPE],
        contains_cidr,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        MAP_TYPE,
        vec![STRING_TYPE],
        contains_cidr,
    )
}

/// Upstream's `parseIPAddr`: netip's parse, without zones and IPv4-mapped IPv6 addresses.
fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    let (addr, zone) = parse_addr(raw).map_err(|e| {
        format!(
            "IP Address {} parse error during conversion from string: {e}",
            go_quote(raw)
        )
    })?;
    if !zone.is_empty() {
        return Err(format!(
            "IP address {} with zone value is not allowed",
            go_quote(raw)
        ));
    }
    if is_4in6(&addr) {
        return Err(format!(
            "IPv4-mapped IPv6 address {} is not allowed",
            go_quote(raw)
        ));
    }
    Ok(addr)
}

fn is_4in6(addr: &IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// Upstream's `parseCIDR`: netip's prefix parse, without IPv4-mapped IPv6 addresses.
fn parse_cidr(raw: &str) -> Result<(IpAddr, u8), String> {
    let (addr, bits) = parse_prefix(raw)
        .map_err(|e| format!("network address parse error during conversion from string: {e}"))?;
    if is_4in6(&addr) {
        return Err(format!(
            "IPv4-mapped IPv6 address {} is not allowed",
            go_quote(raw)
        ));
    }
    Ok((addr, bits))
}

fn ip_value(addr: IpAddr) -> Value {
    Opaque::Ip.wrap(addr.to_string())
}

fn cidr_value(addr: IpAddr, bits: u8) -> Value {
    Opaque::Cidr.wrap(format!("{addr}/{bits}"))
}

/// cel-go's `no such overload`, for an argument of another type.
fn no_such_overload(function: &str) -> ExecutionError {
    ExecutionError::no_such_overload(function, Vec::new())
}

/// The IP of an IP value.
fn ip_of(v: Option<&Value>, function: &str) -> Result<IpAddr, ExecutionError> {
    Opaque::Ip
        .text(v)
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| no_such_overload(function))
}

/// The address and prefix length of a CIDR value (or, for `containsCIDR`, of a string).
fn cidr_of(v: Option<&Value>, function: &str) -> Result<(IpAddr, u8), ExecutionError> {
    if let Some(Value::String(s)) = v {
        return parse_cidr(s).map_err(|e| {
            let message = format!("network address parse error during conversion from string: {e}");
            err(function, &message)
        });
    }
    Opaque::Cidr
        .text(v)
        .and_then(|t| t.split_once('/'))
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .filter(|(a, bits): &(IpAddr, u8)| *bits <= if a.is_ipv4() { 32 } else { 128 })
        .ok_or_else(|| no_such_overload(function))
}

/// The address with every bit after the first `bits` cleared (`netip.Prefix.Masked`).
fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX
                .checked_shl(32u32.saturating_sub(u32::from(bits)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX
                .checked_shl(128u32.saturating_sub(u32::from(bits)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

overload!(string_to_ip, |args| match args.first() {
    Some(Value::String(s)) => parse_ip(s).map(ip_value).map_err(|e| err("ip", &e)),
    _ => Err(no_such_overload("ip")),
});

overload!(is_ip, |args| Ok(Value::Bool(
    matches!(args.first(), Some(Value::String(s)) if parse_ip(s).is_ok())
)));

overload!(is_canonical, |args| match args.first() {
    Some(Value::String(s)) => parse_ip(s)
        .map(|a| Value::Bool(a.to_string() == s.as_str()))
        .map_err(|e| err("ip.isCanonical", &e)),
    _ => Err(no_such_overload("ip.isCanonical")),
});

overload!(string_to_cidr, |args| match args.first() {
    Some(Value::String(_)) => cidr_of(args.first(), "cidr").map(|(a, b)| cidr_value(a, b)),
    _ => Err(no_such_overload("cidr")),
});

overload!(is_cidr, |args| Ok(Value::Bool(
    matches!(args.first(), Some(Value::String(s)) if parse_cidr(s).is_ok())
)));

overload!(to_string, |args| {
    if let Some(t) = Opaque::Ip
        .text(args.first())
        .or_else(|| Opaque::Cidr.text(args.first()))
    {
        return Ok(Value::from(t.to_string()));
    }
    Err(no_such_overload("string"))
});

overload!(family, |args| Ok(Value::Int(
    match ip_of(args.first(), "family")? {
        IpAddr::V4(_) => 4,
        IpAddr::V6(_) => 6,
    }
)));

/// A predicate of an IP value.
fn test(args: &[Value], function: &str, f: fn(&IpAddr) -> bool) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(f(&ip_of(args.first(), function)?)))
}

overload!(is_unspecified, |args| test(
    args,
    "isUnspecified",
    IpAddr::is_unspecified
));
overload!(is_loopback, |args| test(
    args,
    "isLoopback",
    IpAddr::is_loopback
));
overload!(is_link_local_multicast, |args| test(
    args,
    "isLinkLocalMulticast",
    link_local_multicast
));
overload!(is_link_local_unicast, |args| test(
    args,
    "isLinkLocalUnicast",
    link_local_unicast
));
overload!(is_global_unicast, |args| test(
    args,
    "isGlobalUnicast",
    global_unicast
));

/// netip's `IsLinkLocalMulticast`: 224.0.0.0/24, ff02::/16 (any flags).
fn link_local_multicast(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => v.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v) => v.segments()[0] & 0xff0f == 0xff02,
    }
}

/// netip's `IsLinkLocalUnicast`: 169.254.0.0/16, fe80::/10.
fn link_local_unicast(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => v.octets()[..2] == [169, 254],
        IpAddr::V6(v) => v.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// netip's `IsGlobalUnicast`: not unspecified, broadcast, loopback, multicast or
/// link-local unicast (private and unique-local addresses are global unicast).
fn global_unicast(a: &IpAddr) -> bool {
    if matches!(a, IpAddr::V4(v) if v.is_broadcast()) {
        return false;
    }
    !a.is_unspecified() && !a.is_loopback() && !a.is_multicast() && !link_local_unicast(a)
}

overload!(cidr_ip, |args| Ok(ip_value(cidr_of(args.first(), "ip")?.0)));

overload!(masked, |args| {
    let (addr, bits) = cidr_of(args.first(), "masked")?;
    Ok(cidr_value(mask(addr, bits), bits))
});

overload!(prefix_length, |args| Ok(Value::Int(i64::from(
    cidr_of(args.first(), "prefixLength")?.1
))));

overload!(contains_ip, |args| {
    let (net, bits) = cidr_of(args.first(), "containsIP")?;
    // A string that is not an IP is, upstream, an argument of no overload.
    let ip = match args.get(1) {
        Some(Value::String(s)) => parse_ip(s).map_err(|_| no_such_overload("containsIP"))?,
        other => ip_of(other, "containsIP")?,
    };
    Ok(Value::Bool(
        net.is_ipv4() == ip.is_ipv4() && mask(ip, bits) == mask(net, bits),
    ))
});

overload!(contains_cidr, |args| {
    let (net, bits) = cidr_of(args.first(), "containsCIDR")?;
    let (other, other_bits) = cidr_of(args.get(1), "containsCIDR")?;
    // Upstream compares `cidr.Masked()` with `netip.PrefixFrom(other.Addr(), cidr.Bits())`,
    // which does not mask: the other CIDR's address must be the network's own address.
    Ok(Value::Bool(mask(net, bits) == other && bits <= other_bits))
});
