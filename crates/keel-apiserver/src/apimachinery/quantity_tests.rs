//! Upstream's quantity_test.go tables (k8s.io/apimachinery/pkg/api/resource, v0.34), and a
//! property test that writing a quantity canonically is idempotent and keeps its value.

use proptest::prelude::*;

use super::Format::{BinarySI, DecimalExponent, DecimalSI};
use super::*;

/// `i * 10^exp` in billionths (upstream's `decQuantity(i, exp, _)`).
fn value(i: i128, exp: i32) -> i128 {
    i * 10i128.pow((exp + 9) as u32)
}

/// `decQuantity(i, exp, format)`: a quantity of that value and format, as no text made it.
fn dec(i: i128, exp: i64, format: Format) -> Quantity {
    let mut q = Quantity {
        negative: i < 0,
        digits: digits_of(i.unsigned_abs()),
        exponent: exp,
        format,
        kept: None,
    };
    q.normalize();
    q
}

#[test]
fn texts_split_as_parse_quantity_string_splits_them() {
    // TestParseQuantityString.
    for (input, positive, value, num, denom, suffix) in [
        ("0.025Ti", true, "0.025", "0", "025", "Ti"),
        ("1.025Ti", true, "1.025", "1", "025", "Ti"),
        ("-1.025Ti", false, "-1.025", "1", "025", "Ti"),
        (".", true, ".", "0", "", ""),
        ("-.", false, "-.", "0", "", ""),
        ("1E-3", true, "1", "1", "", "E-3"),
    ] {
        let p = split(input).unwrap();
        assert_eq!(
            (p.positive, p.value, p.num, p.denom, p.suffix),
            (positive, value, num, denom, suffix),
            "{input}"
        );
    }
}

#[test]
fn quantities_parse_as_upstream_parses_them() {
    // TestQuantityParse: the text, its value in billionths, its format.
    let max = i128::from(i64::MAX) * 1_000_000_000;
    let table: &[(&str, i128, Format)] = &[
        ("0", 0, DecimalSI),
        ("0n", 0, DecimalSI),
        ("0u", 0, DecimalSI),
        ("0m", 0, DecimalSI),
        ("0Ki", 0, BinarySI),
        ("0k", 0, DecimalSI),
        ("0Mi", 0, BinarySI),
        ("0M", 0, DecimalSI),
        ("0Gi", 0, BinarySI),
        ("0G", 0, DecimalSI),
        ("0Ti", 0, BinarySI),
        ("0T", 0, DecimalSI),
        ("1", value(1, 0), DecimalSI),
        ("1Ki", value(1024, 0), BinarySI),
        ("8Ki", value(8 * 1024, 0), BinarySI),
        ("7Mi", value(7 << 20, 0), BinarySI),
        ("6Gi", value(6 << 30, 0), BinarySI),
        ("5Ti", value(5 << 40, 0), BinarySI),
        ("4Pi", value(4 << 50, 0), BinarySI),
        ("3Ei", value(3 << 60, 0), BinarySI),
        ("10Ti", value(10 << 40, 0), BinarySI),
        ("100Ti", value(100 << 40, 0), BinarySI),
        ("5n", value(5, -9), DecimalSI),
        ("4u", value(4, -6), DecimalSI),
        ("3m", value(3, -3), DecimalSI),
        ("9", value(9, 0), DecimalSI),
        ("8k", value(8, 3), DecimalSI),
        ("50k", value(5, 4), DecimalSI),
        ("7M", value(7, 6), DecimalSI),
        ("6G", value(6, 9), DecimalSI),
        ("5T", value(5, 12), DecimalSI),
        ("40T", value(4, 13), DecimalSI),
        ("300T", value(3, 14), DecimalSI),
        ("2P", value(2, 15), DecimalSI),
        ("1E", value(1, 18), DecimalSI),
        ("1E-3", value(1, -3), DecimalExponent),
        ("1e3", value(1, 3), DecimalExponent),
        ("1E6", value(1, 6), DecimalExponent),
        ("1e9", value(1, 9), DecimalExponent),
        ("1E12", value(1, 12), DecimalExponent),
        ("1e15", value(1, 15), DecimalExponent),
        ("1E18", value(1, 18), DecimalExponent),
        ("1e14", value(1, 14), DecimalExponent),
        ("1e13", value(1, 13), DecimalExponent),
        ("100.035k", value(100035, 0), DecimalSI),
        ("0.001", value(1, -3), DecimalSI),
        ("0.0005k", value(5, -1), DecimalSI),
        ("0.005", value(5, -3), DecimalSI),
        ("0.05", value(5, -2), DecimalSI),
        ("0.5", value(5, -1), DecimalSI),
        ("0.00050k", value(5, -1), DecimalSI),
        ("0.00500", value(5, -3), DecimalSI),
        ("0.05000", value(5, -2), DecimalSI),
        ("0.50000", value(5, -1), DecimalSI),
        ("0.5e0", value(5, -1), DecimalExponent),
        ("0.5e-1", value(5, -2), DecimalExponent),
        ("0.5e-2", value(5, -3), DecimalExponent),
        ("10.035M", value(10035, 3), DecimalSI),
        ("1.2e3", value(12, 2), DecimalExponent),
        ("1.3E+6", value(13, 5), DecimalExponent),
        ("1.40e9", value(14, 8), DecimalExponent),
        ("1.53E12", value(153, 10), DecimalExponent),
        ("1.6e15", value(16, 14), DecimalExponent),
        ("1.7E18", value(17, 17), DecimalExponent),
        ("9.01", value(901, -2), DecimalSI),
        ("8.1k", value(81, 2), DecimalSI),
        ("7.123456M", value(7123456, 0), DecimalSI),
        ("6.987654321G", value(6987654321, 0), DecimalSI),
        ("5.444T", value(5444, 9), DecimalSI),
        ("40.1T", value(401, 11), DecimalSI),
        ("300.2T", value(3002, 11), DecimalSI),
        ("2.5P", value(25, 14), DecimalSI),
        ("1.01E", value(101, 16), DecimalSI),
        ("3.001n", value(4, -9), DecimalSI),
        ("1.1E-9", value(2, -9), DecimalExponent),
        ("0.0000000001", value(1, -9), DecimalSI),
        ("0.0000000005", value(1, -9), DecimalSI),
        ("0.00000000050", value(1, -9), DecimalSI),
        ("0.5e-9", value(1, -9), DecimalExponent),
        ("0.9n", value(1, -9), DecimalSI),
        ("0.00000012345", value(124, -9), DecimalSI),
        ("0.00000012354", value(124, -9), DecimalSI),
        ("9Ei", max, BinarySI),
        ("9223372036854775807Ki", max, BinarySI),
        ("12E", value(12, 18), DecimalSI),
        ("100.035Ki", value(10243584, -2), BinarySI),
        ("0.5Mi", value(512 * 1024, 0), BinarySI),
        ("0.05Gi", value(536870912, -1), BinarySI),
        ("0.025Ti", value(274877906944, -1), BinarySI),
        ("0.000000000001Ki", value(2, -9), DecimalSI),
        (".001", value(1, -3), DecimalSI),
        (".0001k", value(100, -3), DecimalSI),
        ("1.", value(1, 0), DecimalSI),
        ("1.G", value(1, 9), DecimalSI),
    ];
    for &(input, nanos, format) in table {
        let q = Quantity::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!((q.nanos(), q.format()), (Some(nanos), format), "{input}");
        // The negative of everything, and everything with an explicit +.
        let negative = Quantity::parse(&format!("-{input}")).unwrap();
        assert_eq!(
            (negative.nanos(), negative.format()),
            (Some(-nanos), format)
        );
        let positive = Quantity::parse(&format!("+{input}")).unwrap();
        assert_eq!((positive.nanos(), positive.format()), (Some(nanos), format));
    }
    assert_eq!(Quantity::parse(""), Err(QuantityError::Format));
    for invalid in [
        "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 ",
    ] {
        assert!(Quantity::parse(invalid).is_err(), "{invalid}");
    }
    // Which error each is, as upstream's scanner and suffix table decide.
    for ok in [
        "1", "0", "100m", "1.5", ".5", "1.", "-1", "+2Gi", "1e3", "1E3", "5e-3", "2Ki", ".",
    ] {
        assert!(Quantity::parse(ok).is_ok(), "{ok}");
    }
    for bad in [
        "abc",
        "aoeu",
        "1.2.3",
        "1m3x",
        "true",
        "{\"a\":1}",
        "1 ",
        "1Kb",
        "1KiB",
        "1Q",
        "1e+-3",
    ] {
        assert_eq!(Quantity::parse(bad), Err(QuantityError::Format), "{bad}");
    }
    for bad in ["0.1mi", "1mi", "1e", "1Ee3", "1m3", "1KK"] {
        assert_eq!(Quantity::parse(bad), Err(QuantityError::Suffix), "{bad}");
    }
    assert_eq!(Quantity::parse(".e-10"), Err(QuantityError::Numeric));
}

#[test]
fn quantities_are_written_as_upstream_writes_them() {
    // TestQuantityString: a value, its canonical text, another text of it.
    let table: &[(Quantity, &str, &str)] = &[
        (dec(1 << 30, 0, BinarySI), "1Gi", "1024Mi"),
        (dec(300 << 20, 0, BinarySI), "300Mi", "307200Ki"),
        (dec(6 * 1024, 0, BinarySI), "6Ki", ""),
        (dec(1001 << 30, 0, BinarySI), "1001Gi", "1025024Mi"),
        (dec(1 << 40, 0, BinarySI), "1Ti", "1024Gi"),
        (dec(5, 0, BinarySI), "5", "5000m"),
        (dec(500, -3, BinarySI), "500m", "0.5"),
        (dec(1, 9, DecimalSI), "1G", "1000M"),
        (dec(1000, 6, DecimalSI), "1G", "0.001T"),
        (dec(1000000, 3, DecimalSI), "1G", ""),
        (dec(1000000000, 0, DecimalSI), "1G", ""),
        (dec(1, -3, DecimalSI), "1m", "1000u"),
        (dec(80, -3, DecimalSI), "80m", ""),
        (dec(1080, -3, DecimalSI), "1080m", "1.08"),
        (dec(108, -2, DecimalSI), "1080m", "1080000000n"),
        (dec(10800, -4, DecimalSI), "1080m", ""),
        (dec(300, 6, DecimalSI), "300M", ""),
        (dec(1, 12, DecimalSI), "1T", ""),
        (dec(1234567, 6, DecimalSI), "1234567M", ""),
        (dec(1234567, -3, BinarySI), "1234567m", ""),
        (dec(3, 3, DecimalSI), "3k", ""),
        (dec(1025, 0, BinarySI), "1025", ""),
        (dec(0, 0, DecimalSI), "0", ""),
        (dec(0, 0, BinarySI), "0", ""),
        (dec(1, 9, DecimalExponent), "1e9", ".001e12"),
        (dec(1, -3, DecimalExponent), "1e-3", "0.001e0"),
        (dec(1, -9, DecimalExponent), "1e-9", "1000e-12"),
        (dec(80, -3, DecimalExponent), "80e-3", ""),
        (dec(300, 6, DecimalExponent), "300e6", ""),
        (dec(1, 12, DecimalExponent), "1e12", ""),
        (dec(1, 3, DecimalExponent), "1e3", ""),
        (dec(3, 3, DecimalExponent), "3e3", ""),
        (dec(3, 3, DecimalSI), "3k", ""),
        (dec(0, 0, DecimalExponent), "0", "00"),
        (dec(1, -9, DecimalSI), "1n", ""),
        (dec(80, -9, DecimalSI), "80n", ""),
        (dec(1080, -9, DecimalSI), "1080n", ""),
        (dec(108, -8, DecimalSI), "1080n", ""),
        (dec(10800, -10, DecimalSI), "1080n", ""),
        (dec(1, -6, DecimalSI), "1u", ""),
        (dec(80, -6, DecimalSI), "80u", ""),
        (dec(1080, -6, DecimalSI), "1080u", ""),
    ];
    for (q, expect, alternate) in table {
        assert_eq!(q.canonical(), *expect, "{q:?}");
        // The canonical text parses with its text kept; another text is written anew.
        let parsed = Quantity::parse(expect).unwrap();
        assert_eq!(parsed.kept.as_deref(), Some(*expect), "{expect}");
        if !alternate.is_empty() {
            let other = Quantity::parse(alternate).unwrap();
            assert_eq!(other.kept, None, "{alternate}");
            assert_eq!(other.canonical(), *expect, "{alternate}");
        }
        if !q.is_zero() {
            let mut negative = q.clone();
            negative.negative = true;
            assert_eq!(negative.canonical(), format!("-{expect}"));
        }
    }
}

#[test]
fn parsed_quantities_are_emitted_canonically() {
    // TestQuantityParseEmit, and the brief's examples.
    for (input, expect) in [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
        ("0.5", "500m"),
        ("1.5Gi", "1536Mi"),
        ("1000m", "1"),
        ("1e3", "1e3"),
        ("1.5", "1500m"),
    ] {
        assert_eq!(canonical(input).unwrap(), expect, "{input}");
        assert_eq!(
            canonical(&format!("-{input}")).unwrap(),
            format!("-{expect}")
        );
    }
    // JSON's white space around a quantity is trimmed (TestJSONWhitespace).
    for (input, expect) in [(" 1", "1"), ("1 ", "1"), ("10", "10"), (" -1", "-1")] {
        assert_eq!(canonical(input).unwrap(), expect);
    }
}

#[test]
fn texts_the_fast_path_finds_canonical_are_kept_as_written() {
    // ParseQuantity keeps the text when its fast path's test passes, and that test looks at
    // the digits only: a sign, leading zeros and a fraction of three digits pass it.
    for kept in ["+5", "05", "1.500", "+1Ki", "007m", "-5", "500m", "1023Ki"] {
        assert_eq!(canonical(kept).unwrap(), kept);
    }
    for (input, expect) in [
        ("1.0", "1"),
        ("1.000", "1"),
        ("+1000", "1k"),
        ("1024Ki", "1Mi"),
    ] {
        assert_eq!(canonical(input).unwrap(), expect, "{input}");
    }
}

#[test]
fn huge_and_tiny_exponents_are_written_without_being_spelt_out() {
    assert_eq!(canonical("1e2147483647").unwrap(), "10e2147483646");
    assert_eq!(canonical("1e-2147483648").unwrap(), "1e-9");
    assert_eq!(
        canonical("1e99999999999").unwrap(),
        canonical("1e1215752191").unwrap()
    );
    assert_eq!(quantity_nanos("1e100"), None);
    // Past `E`, a decimal quantity is written in exponent form (see the module's notes).
    assert_eq!(canonical("1000E").unwrap(), "1e21");
    assert_eq!(
        canonical("12345678901234567890123").unwrap(),
        "12345678901234567890123"
    );
}

/// A quantity's text from the grammar, with some of what the scanner refuses.
fn quantity_text() -> impl Strategy<Value = String> {
    let suffix = prop_oneof![
        Just(String::new()),
        prop::sample::select(vec!["n", "u", "m", "k", "M", "G", "T", "P", "E"])
            .prop_map(str::to_string),
        prop::sample::select(vec!["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]).prop_map(str::to_string),
        (prop::bool::ANY, -30i32..30)
            .prop_map(|(upper, e)| { format!("{}{e}", if upper { 'E' } else { 'e' }) }),
    ];
    (
        prop::sample::select(vec!["", "-", "+"]),
        "[0-9]{0,24}",
        prop::option::of("[0-9]{0,12}"),
        suffix,
    )
        .prop_map(|(sign, whole, fraction, suffix)| match fraction {
            Some(f) => format!("{sign}{whole}.{f}{suffix}"),
            None => format!("{sign}{whole}{suffix}"),
        })
}

/// Whether two quantities have the same value.
fn same_value(a: &Quantity, b: &Quantity) -> bool {
    let reduced = |q: &Quantity| {
        let zeros = q.digits.iter().rev().take_while(|d| **d == 0).count();
        (
            q.negative,
            q.digits[..q.digits.len() - zeros].to_vec(),
            if q.is_zero() {
                0
            } else {
                q.exponent + zeros as i64
            },
        )
    };
    reduced(a) == reduced(b)
}

proptest! {
    #[test]
    fn canonical_text_is_idempotent_and_keeps_the_value(text in quantity_text()) {
        if let Ok(q) = Quantity::parse(&text) {
            let once = q.canonical();
            let again = Quantity::parse(&once).expect("a canonical text parses");
            prop_assert_eq!(&again.canonical(), &once);
            prop_assert!(same_value(&q, &again), "{} -> {}", text, once);
        }
    }
}
