//! Go's `net/netip` parsers, `ParseAddr` and `ParsePrefix`, with their rules (no leading
//! zeros in IPv4 octets, at most four hex digits a group, one `::`, an embedded IPv4 address
//! only in the last two groups, a zone only on IPv6) and their error words
//! (`ParseAddr("1.2.3.256"): IPv4 field has value >255`, `netip.ParsePrefix("10.0.0.0/"):
//! bad bits after slash: ""`), for the CEL IP and CIDR libraries.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::apimachinery::quote::go_quote;

/// netip's `parseAddrError`: the input, the words and where in the input, if anywhere.
fn addr_error(input: &str, msg: &str, at: Option<&str>) -> String {
    match at {
        Some(at) if !at.is_empty() => format!(
            "ParseAddr({}): {msg} (at {})",
            go_quote(input),
            go_quote(at)
        ),
        _ => format!("ParseAddr({}): {msg}", go_quote(input)),
    }
}

/// `netip.ParseAddr`: the address and its zone (empty when none).
pub(super) fn parse_addr(s: &str) -> Result<(IpAddr, String), String> {
    for c in s.bytes() {
        match c {
            b'.' => return parse_v4(s, s).map(|a| (IpAddr::V4(Ipv4Addr::from(a)), String::new())),
            b':' => return parse_v6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", None)),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", None))
}

/// netip's `parseIPv4Fields` of `part` (a piece of `input`, which errors name).
fn parse_v4(input: &str, part: &str) -> Result<[u8; 4], String> {
    let mut fields = [0u8; 4];
    let (mut val, mut pos, mut digits) = (0u32, 0usize, 0);
    let b = part.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && val == 0 {
                return Err(addr_error(
                    input,
                    "IPv4 field has octet with leading zero",
                    None,
                ));
            }
            val = val * 10 + u32::from(c - b'0');
            digits += 1;
            if val > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == b.len() - 1 || b[i - 1] == b'.' {
                let msg = "IPv4 field must have at least one digit";
                return Err(addr_error(input, msg, Some(&part[i..])));
            }
            if pos == 3 {
                return Err(addr_error(input, "IPv4 address too long", None));
            }
            fields[pos] = val as u8;
            pos += 1;
            val = 0;
            digits = 0;
        } else {
            return Err(addr_error(input, "unexpected character", Some(&part[i..])));
        }
    }
    if pos < 3 {
        return Err(addr_error(input, "IPv4 address too short", None));
    }
    fields[3] = val as u8;
    Ok(fields)
}

/// netip's `parseIPv6`.
fn parse_v6(input: &str) -> Result<(IpAddr, String), String> {
    let (mut s, zone) = match input.split_once('%') {
        Some((_, "")) => return Err(addr_error(input, "zone must be a non-empty string", None)),
        Some((a, z)) => (a, z.to_string()),
        None => (input, String::new()),
    };
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok((IpAddr::V6(Ipv6Addr::UNSPECIFIED), zone));
        }
    }
    let mut i = 0;
    while i < 16 {
        let b = s.as_bytes();
        let mut off = 0;
        let mut acc = 0u32;
        while off < b.len() {
            let Some(d) = (b[off] as char).to_digit(16) else {
                break;
            };
            acc = (acc << 4) + d;
            if off > 3 {
                let msg = "each group must have 4 or less digits";
                return Err(addr_error(input, msg, Some(s)));
            }
            if acc > 0xffff {
                return Err(addr_error(input, "IPv6 field has value >=2^16", Some(s)));
            }
            off += 1;
        }
        if off == 0 {
            let msg = "each colon-separated field must have at least one digit";
            return Err(addr_error(input, msg, Some(s)));
        }
        if off < b.len() && b[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                let msg = "embedded IPv4 address must replace the final 2 fields of the address";
                return Err(addr_error(input, msg, Some(s)));
            }
            if i + 4 > 16 {
                let msg = "too many hex fields to fit an embedded IPv4 at the end of the address";
                return Err(addr_error(input, msg, Some(s)));
            }
            let v4 = parse_v4(input, s)?;
            ip[i..i + 4].copy_from_slice(&v4);
            s = "";
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(addr_error(
                input,
                "unexpected character, want colon",
                Some(s),
            ));
        } else if s.len() == 1 {
            let msg = "colon must be followed by more characters";
            return Err(addr_error(input, msg, Some(s)));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", Some(s)));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", Some(s)));
    }
    if i < 16 {
        let Some(e) = ellipsis else {
            return Err(addr_error(input, "address string too short", None));
        };
        let n = 16 - i;
        for j in (e..i).rev() {
            ip[j + n] = ip[j];
        }
        ip[e..e + n].fill(0);
    } else if ellipsis.is_some() {
        let msg = "the :: must expand to at least one field of zeros";
        return Err(addr_error(input, msg, Some(s)));
    }
    Ok((IpAddr::V6(Ipv6Addr::from(ip)), zone))
}

/// `netip.ParsePrefix`: the address (as given, not masked) and the prefix length.
pub(super) fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let error = |msg: &str| format!("netip.ParsePrefix({}): {msg}", go_quote(s));
    let Some(slash) = s.rfind('/') else {
        return Err(error("no '/'"));
    };
    let (addr, zone) = parse_addr(&s[..slash]).map_err(|e| error(&e))?;
    if addr.is_ipv6() && !zone.is_empty() {
        return Err(error("IPv6 zones cannot be present in a prefix"));
    }
    let bits = &s[slash + 1..];
    let bad = || error(&format!("bad bits after slash: {}", go_quote(bits)));
    if bits.len() > 1 && !matches!(bits.as_bytes()[0], b'1'..=b'9') {
        return Err(bad());
    }
    // strconv.Atoi (a lone sign, or a number past int64, fails it).
    if bits.is_empty() || !bits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = bits.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if !(0..=max).contains(&n) {
        return Err(error("prefix length out of range"));
    }
    Ok((addr, n as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_netip_parses_them() {
        let ok = |s: &str| parse_addr(s).unwrap().0.to_string();
        assert_eq!(ok("127.0.0.1"), "127.0.0.1");
        assert_eq!(ok("2001:DB8::0:0:0:abcd"), "2001:db8::abcd");
        assert_eq!(ok("::"), "::");
        assert_eq!(ok("::1.2.3.4"), "::102:304");
        assert_eq!(parse_addr("fe80::1%eth0").unwrap().1, "eth0");
        let bad = |s: &str| parse_addr(s).unwrap_err();
        assert_eq!(
            bad("127.0.0.256"),
            r#"ParseAddr("127.0.0.256"): IPv4 field has value >255"#
        );
        assert_eq!(
            bad("127.0.0.01"),
            r#"ParseAddr("127.0.0.01"): IPv4 field has octet with leading zero"#
        );
        assert_eq!(
            bad("1..2.3"),
            r#"ParseAddr("1..2.3"): IPv4 field must have at least one digit (at ".2.3")"#
        );
        assert_eq!(
            bad("1.2.3"),
            r#"ParseAddr("1.2.3"): IPv4 address too short"#
        );
        assert_eq!(
            bad(":::1"),
            r#"ParseAddr(":::1"): each colon-separated field must have at least one digit (at ":1")"#
        );
        assert_eq!(bad("foo"), r#"ParseAddr("foo"): unable to parse IP"#);
        assert_eq!(
            bad("1:2:3:4:5:6:7:8:9"),
            r#"ParseAddr("1:2:3:4:5:6:7:8:9"): trailing garbage after address (at "9")"#
        );
        assert_eq!(
            bad("1:2::3:4:5:6:7:8"),
            r#"ParseAddr("1:2::3:4:5:6:7:8"): the :: must expand to at least one field of zeros"#
        );
        assert_eq!(
            bad("12345::"),
            r#"ParseAddr("12345::"): each group must have 4 or less digits (at "12345::")"#
        );
    }

    #[test]
    fn prefixes_parse_as_netip_parses_them() {
        let (a, b) = parse_prefix("192.168.0.1/24").unwrap();
        assert_eq!((a.to_string(), b), ("192.168.0.1".to_string(), 24));
        assert_eq!(
            parse_prefix("192.168.0.0/").unwrap_err(),
            r#"netip.ParsePrefix("192.168.0.0/"): bad bits after slash: """#
        );
        assert_eq!(
            parse_prefix("10.0.0.0/33").unwrap_err(),
            r#"netip.ParsePrefix("10.0.0.0/33"): prefix length out of range"#
        );
        assert_eq!(
            parse_prefix("10.0.0.0/08").unwrap_err(),
            r#"netip.ParsePrefix("10.0.0.0/08"): bad bits after slash: "08""#
        );
        assert_eq!(
            parse_prefix("10.0.0.0").unwrap_err(),
            r#"netip.ParsePrefix("10.0.0.0"): no '/'"#
        );
        assert_eq!(
            parse_prefix("x/8").unwrap_err(),
            r#"netip.ParsePrefix("x/8"): ParseAddr("x"): unable to parse IP"#
        );
    }
}
