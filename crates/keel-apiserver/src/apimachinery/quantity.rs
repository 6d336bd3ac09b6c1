//! Resource quantities (`k8s.io/apimachinery/pkg/api/resource`: quantity.go, amount.go,
//! suffix.go), the one reading of them in the server: parsed as `ParseQuantity` parses them,
//! written back as `Quantity.String()` writes them (the canonical form kube-apiserver stores
//! and serves: `0.5` is `500m`, `1.5Gi` is `1536Mi`, `1000m` is `1`), and read by value so
//! that two spellings of one amount compare equal.
//!
//! A quantity is its sign, its magnitude as decimal digits times a power of ten (any size, as
//! upstream's `inf.Dec`), and the [`Format`] its suffix chose. Parsing follows upstream step
//! by step, quirks included:
//!
//! - the scanner (`parseQuantityString`) takes `"."`, `"+"` and `"1."` and refuses trailing
//!   white space; an exponent suffix is read as an `int64` and cut to an `int32`;
//! - the fast path (at most 18 digits, no finer than nanos) keeps the text as the quantity's
//!   string when its test says it is already canonical, and that test is loose: `+5`, `05`
//!   and `1.500` pass it, so upstream stores them as written ([`Quantity::canonical`]);
//! - otherwise the value is rounded up (away from zero) to a billionth, a binary one capped
//!   at 2^63-1, and one below 1 written as decimal;
//! - writing moves trailing zeros into the exponent and lowers it to a multiple of three; a
//!   binary quantity below 1024, or not whole, is written as decimal.
//!
//! One difference, an improvement: a decimal quantity past `E` (10^21 and up) has no SI
//! suffix, and Kubernetes 1.34 writes it with none, so `1000E` is stored as `1`
//! (kubernetes/kubernetes#141249); keel writes it in exponent form (`1e21`), as the fix merged
//! upstream after 1.34 (kubernetes/kubernetes#140459) does, so no write changes a value.

use std::cmp::Ordering;

/// How a quantity is written (`resource.Format`): chosen by the suffix it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `12e6`.
    DecimalExponent,
    /// `12Mi` (powers of 1024).
    BinarySI,
    /// `12M` (powers of 1000).
    DecimalSI,
}

/// Why a text is not a quantity: upstream's three errors, in its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `ErrFormatWrong`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// `ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// A parsed resource quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    negative: bool,
    /// The magnitude's digits (0 to 9), most significant first, no leading zero; empty for 0.
    digits: Vec<u8>,
    /// The power of ten the digits are multiplied by.
    exponent: i64,
    format: Format,
    /// The text parsed, where the fast path keeps it as the quantity's string.
    kept: Option<String>,
}

/// The decimal suffixes and their powers of ten (`n` to `E`).
const DECIMAL_SI: [(&str, i64); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// The binary suffixes and their powers of two.
const BINARY_SI: [(&str, i64); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// What `parseQuantityString` splits a text into.
struct Parts<'a> {
    positive: bool,
    /// The number as written: sign, leading zeros, point and all.
    value: &'a str,
    /// The whole part's digits without leading zeros (`0` when none are left).
    num: &'a str,
    /// The fraction's digits.
    denom: &'a str,
    suffix: &'a str,
}

/// `parseQuantityString`: a sign, digits, an optional point and digits, suffix letters, an
/// optional sign and digits; anything else is [`QuantityError::Format`].
fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut parts = Parts {
        positive: true,
        value: s,
        num: "0",
        denom: "",
        suffix: "",
    };
    let mut pos = 0;
    match b.first() {
        Some(b'-') => {
            parts.positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        parts.value = "0";
        return Ok(parts);
    }
    let digits_from =
        |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let start = pos;
    pos = digits_from(pos);
    if pos >= end {
        parts.num = &s[start..];
        return Ok(parts);
    }
    if pos > start {
        parts.num = &s[start..pos];
    }
    if b[pos] == b'.' {
        let from = pos + 1;
        pos = digits_from(from);
        parts.denom = &s[from..pos];
        if pos >= end {
            return Ok(parts);
        }
    }
    parts.value = &s[..pos];
    let suffix_start = pos;
    pos += b[pos..]
        .iter()
        .take_while(|c| b"eEinumkKMGTP".contains(c))
        .count();
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    if digits_from(pos) < end {
        return Err(QuantityError::Format);
    }
    parts.suffix = &s[suffix_start..];
    Ok(parts)
}

/// `quantitySuffixer.interpret`: the base, its exponent and the format a suffix stands for.
fn interpret(suffix: &str) -> Option<(u32, i64, Format)> {
    if let Some((_, e)) = DECIMAL_SI.iter().find(|(s, _)| *s == suffix) {
        return Some((10, *e, Format::DecimalSI));
    }
    if let Some((_, e)) = BINARY_SI.iter().find(|(s, _)| *s == suffix) {
        return Some((2, *e, Format::BinarySI));
    }
    let exponent = suffix.strip_prefix(['e', 'E']).filter(|e| !e.is_empty())?;
    // strconv.ParseInt(.., 10, 64), then int32(parsed).
    let parsed: i64 = exponent.parse().ok()?;
    Some((10, i64::from(parsed as i32), Format::DecimalExponent))
}

impl Quantity {
    /// `resource.ParseQuantity(text)` (no white space is trimmed: see [`Quantity::from_json`]).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::Format);
        }
        if text == "0" {
            return Ok(Quantity::zero(Format::DecimalSI, Some(text)));
        }
        let parts = split(text)?;
        let (base, exponent, format) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;
        if let Some(fast) = Quantity::fast(text, &parts, exponent, format) {
            return Ok(fast);
        }
        // The slow path: the number as an inf.Dec (which needs a digit), the suffix applied.
        let number = parts.value.trim_start_matches(['+', '-']);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(QuantityError::Numeric);
        }
        let mut q = Quantity {
            negative: !parts.positive,
            digits: whole
                .bytes()
                .chain(fraction.bytes())
                .map(|c| c - b'0')
                .collect(),
            exponent: -(fraction.len() as i64),
            format,
            kept: None,
        };
        if base == 10 {
            q.exponent += exponent;
        } else {
            q.digits = multiply(&q.digits, 1u64 << exponent);
        }
        q.normalize();
        q.round_up(-9);
        if format == Format::BinarySI {
            if q.cmp_magnitude(i64::MAX as u64) == Ordering::Greater {
                q.digits = digits_of(i64::MAX as u128);
                q.exponent = 0;
            }
            if !q.is_zero() && q.cmp_magnitude(1) == Ordering::Less {
                q.format = Format::DecimalSI;
            }
        }
        Ok(q)
    }

    /// `Quantity.UnmarshalJSON` of a JSON string's contents or a number's text: white space
    /// around it trimmed, then parsed.
    pub fn from_json(text: &str) -> Result<Quantity, QuantityError> {
        Quantity::parse(text.trim())
    }

    /// Zero, in `format`.
    fn zero(format: Format, kept: Option<&str>) -> Quantity {
        Quantity {
            negative: false,
            digits: Vec::new(),
            exponent: 0,
            format,
            kept: kept.map(str::to_string),
        }
    }

    /// `ParseQuantity`'s fast path: a value of at most 18 digits that is whole in nanos
    /// (binary: whole, and small enough for an `int64`), its text kept where its test finds
    /// it canonical. None where the slow path decides.
    fn fast(text: &str, parts: &Parts<'_>, exponent: i64, format: Format) -> Option<Quantity> {
        let digits = (parts.num.len() + parts.denom.len()) as i64;
        let (precision, mut scale, mantissa) = match format {
            Format::DecimalExponent | Format::DecimalSI => (18 - digits, exponent, 1i64),
            Format::BinarySI if parts.denom.is_empty() => (
                15 - parts.num.len() as i64 - exponent * 3 / 10 - 1,
                0,
                1i64 << exponent,
            ),
            Format::BinarySI => (-1, 0, 1),
        };
        if precision < 0 {
            return None;
        }
        scale -= parts.denom.len() as i64;
        if scale < -9 {
            return None;
        }
        let shifted = format!("{}{}", parts.num, parts.denom);
        let value: i64 = shifted.parse().ok()?;
        let result = value.checked_mul(mantissa)?;
        let canonical = match format {
            Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
            _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
        };
        let mut q = Quantity {
            negative: !parts.positive,
            digits: digits_of(result as u128),
            exponent: scale,
            format,
            kept: canonical.then(|| text.to_string()),
        };
        q.normalize();
        Some(q)
    }

    /// Leading zeros dropped; zero has no digits and no sign.
    fn normalize(&mut self) {
        let zeros = self.digits.iter().take_while(|d| **d == 0).count();
        self.digits.drain(..zeros);
        if self.digits.is_empty() {
            self.negative = false;
            self.exponent = 0;
        }
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// The format its suffix chose.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Rounds the magnitude up to a multiple of 10^`exponent`; whether nothing was lost.
    fn round_up(&mut self, exponent: i64) -> bool {
        if self.exponent >= exponent || self.is_zero() {
            return true;
        }
        let drop = exponent - self.exponent;
        self.exponent = exponent;
        if drop >= self.digits.len() as i64 {
            self.digits = vec![1];
            return false;
        }
        let keep = self.digits.len() - drop as usize;
        let exact = self.digits[keep..].iter().all(|d| *d == 0);
        self.digits.truncate(keep);
        if !exact {
            increment(&mut self.digits);
        }
        self.normalize();
        exact
    }

    /// The magnitude compared with `n`.
    fn cmp_magnitude(&self, n: u64) -> Ordering {
        if self.is_zero() {
            return 0.cmp(&n);
        }
        let whole_digits = self.digits.len() as i64 + self.exponent;
        if whole_digits > 20 {
            return Ordering::Greater;
        }
        if whole_digits <= 0 {
            return if n == 0 {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        let whole_digits = whole_digits as usize;
        let mut whole: u128 = 0;
        for i in 0..whole_digits {
            whole = whole * 10 + u128::from(self.digits.get(i).copied().unwrap_or(0));
        }
        let fraction = self.digits.iter().skip(whole_digits).any(|d| *d != 0);
        whole.cmp(&u128::from(n)).then(if fraction {
            Ordering::Greater
        } else {
            Ordering::Equal
        })
    }

    /// The value in billionths (`500m` is 500_000_000), rounded up away from zero; None
    /// when it does not fit an `i128`.
    pub fn nanos(&self) -> Option<i128> {
        let mut q = self.clone();
        q.round_up(-9);
        let zeros = q.exponent + 9;
        if q.digits.len() as i64 + zeros > 38 {
            return None;
        }
        let mut n: i128 = 0;
        for d in &q.digits {
            n = n * 10 + i128::from(*d);
        }
        n = n.checked_mul(10i128.checked_pow(u32::try_from(zeros).ok()?)?)?;
        Some(if q.negative { -n } else { n })
    }

    /// `Quantity.String()`: the text kept by the fast path, else the canonical form.
    pub fn canonical(&self) -> String {
        if let Some(kept) = &self.kept {
            return kept.clone();
        }
        if self.is_zero() {
            return "0".to_string();
        }
        let sign = if self.negative { "-" } else { "" };
        if self.format == Format::BinarySI && self.cmp_magnitude(1024) != Ordering::Less {
            let mut whole = self.clone();
            if whole.round_up(0)
                && let Some(mut n) = whole.whole()
            {
                let mut times = 0;
                while n >= 1024 && n % 1024 == 0 {
                    n /= 1024;
                    times += 1;
                }
                let suffix = match times {
                    0 => "",
                    t => BINARY_SI[t - 1].0,
                };
                return format!("{sign}{n}{suffix}");
            }
        }
        let format = match self.format {
            Format::BinarySI => Format::DecimalSI,
            other => other,
        };
        // Trailing zeros into the exponent, then down to a multiple of three.
        let zeros = self.digits.iter().rev().take_while(|d| **d == 0).count();
        let mut exponent = self.exponent + zeros as i64;
        let mut digits: String = self.digits[..self.digits.len() - zeros]
            .iter()
            .map(|d| char::from(b'0' + d))
            .collect();
        let down = exponent.rem_euclid(3);
        digits.extend(std::iter::repeat_n('0', down as usize));
        exponent -= down;
        let si = DECIMAL_SI.iter().find(|(_, e)| *e == exponent);
        let suffix = match (format, si) {
            (Format::DecimalSI, Some((si, _))) => si.to_string(),
            (_, _) if exponent == 0 => String::new(),
            (_, _) => format!("e{exponent}"),
        };
        format!("{sign}{digits}{suffix}")
    }

    /// The magnitude of a whole quantity, if it fits a `u128`.
    fn whole(&self) -> Option<u128> {
        let mut n: u128 = 0;
        for d in &self.digits {
            n = n.checked_mul(10)?.checked_add(u128::from(*d))?;
        }
        n.checked_mul(10u128.checked_pow(u32::try_from(self.exponent).ok()?)?)
    }
}

/// The decimal digits of `n` (none for 0).
fn digits_of(n: u128) -> Vec<u8> {
    if n == 0 {
        return Vec::new();
    }
    n.to_string().bytes().map(|c| c - b'0').collect()
}

/// `digits` times `m`.
fn multiply(digits: &[u8], m: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(digits.len() + 20);
    let mut carry: u128 = 0;
    for d in digits.iter().rev() {
        carry += u128::from(*d) * u128::from(m);
        out.push((carry % 10) as u8);
        carry /= 10;
    }
    while carry > 0 {
        out.push((carry % 10) as u8);
        carry /= 10;
    }
    out.reverse();
    out
}

/// Adds one to `digits`.
fn increment(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == 9 {
            *d = 0;
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, 1);
}

/// A quantity's canonical text, as kube-apiserver stores it, from the text a JSON string
/// holds or a JSON number is written as ([`Quantity::from_json`]).
pub fn canonical(text: &str) -> Result<String, QuantityError> {
    Quantity::from_json(text).map(|q| q.canonical())
}

/// A resource quantity in billionths (`500m` is 500_000_000), or None if it is not one
/// (white space around it is trimmed, as the JSON decoder trims it).
pub fn quantity_nanos(q: &str) -> Option<i128> {
    Quantity::from_json(q).ok()?.nanos()
}

#[cfg(test)]
#[path = "quantity_tests.rs"]
mod tests;
