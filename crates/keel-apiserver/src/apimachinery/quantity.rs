//! Resource quantities (`k8s.io/apimachinery/pkg/api/resource`), read by value so that two
//! spellings of one amount compare equal (`0.5` and `500m`, `1Ki` and `1024`).

/// A resource quantity in billionths (`500m` is 500_000_000), or None if it is not one.
pub fn quantity_nanos(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let negative = int.starts_with('-');
    let int = int.trim_start_matches(['+', '-']);
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return None;
    }
    let mut nanos: i128 = if int.is_empty() {
        0
    } else {
        int.parse::<i128>().ok()? * 1_000_000_000
    };
    let frac9: String = frac.chars().chain("000000000".chars()).take(9).collect();
    nanos += frac9.parse::<i128>().ok()?;
    let scale: i128 = match suffix {
        "" => 1,
        "n" => return Some(sign(nanos, negative) / 1_000_000_000),
        "u" => return Some(sign(nanos, negative) / 1_000_000),
        "m" => return Some(sign(nanos, negative) / 1000),
        "k" => 1000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        s => {
            let exp: u32 = s.strip_prefix(['e', 'E'])?.parse().ok()?;
            10i128.checked_pow(exp)?
        }
    };
    Some(sign(nanos.checked_mul(scale)?, negative))
}

/// `n`, negated when `negative`.
fn sign(n: i128, negative: bool) -> i128 {
    if negative { -n } else { n }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_billionths() {
        assert_eq!(quantity_nanos("500m"), Some(500_000_000));
        assert_eq!(quantity_nanos("0.5"), Some(500_000_000));
        assert_eq!(quantity_nanos("1Gi"), Some(1_073_741_824_000_000_000));
        assert_eq!(quantity_nanos("1e3"), Some(1_000_000_000_000));
        assert_eq!(quantity_nanos("-1k"), Some(-1_000_000_000_000));
        assert_eq!(quantity_nanos("x"), None);
    }
}
