//! Go's `%q` of a string (`strconv.Quote`), as apimachinery's messages quote values: the
//! field errors (`metadata.name: Invalid value: "Bad_Name": ...`), the selector errors and
//! the warnings.

use std::fmt::Write as _;

/// Go's `%q` of a string (`strconv.Quote`): double-quoted, `"` and `\` backslashed, `\a`
/// `\b` `\f` `\n` `\r` `\t` `\v` for those controls, `\xNN` for the other controls below
/// 0x20 and for 0x7f, `\uNNNN` or `\UNNNNNNNN` for any other character Go does not count as
/// printable (`unicode.IsPrint`: C1 controls, spaces but U+0020, format characters, private
/// use and noncharacters), and every printable character as it is (`é`, `日本`).
///
/// A Rust string is valid UTF-8, so the `\xNN` Go writes for a byte of invalid UTF-8 cannot
/// arise. Code points unassigned in Unicode are kept as they are (Go escapes them): telling
/// them apart would take Unicode's tables.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if let Some(escaped) = backslashed(c) {
            out.push_str(escaped);
        } else if (c as u32) < 0x20 || c == '\u{7f}' {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else if is_print(c) {
            out.push(c);
        } else if (c as u32) < 0x10000 {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
    out.push('"');
    out
}

/// The characters Go writes as a backslash and one letter (or the character itself).
fn backslashed(c: char) -> Option<&'static str> {
    Some(match c {
        '"' => "\\\"",
        '\\' => "\\\\",
        '\u{7}' => "\\a",
        '\u{8}' => "\\b",
        '\u{c}' => "\\f",
        '\n' => "\\n",
        '\r' => "\\r",
        '\t' => "\\t",
        '\u{b}' => "\\v",
        _ => return None,
    })
}

/// Go's `strconv.IsPrint` (letters, marks, numbers, punctuation, symbols and U+0020), told
/// without Unicode's tables: what it is not is control characters, spaces and separators
/// other than U+0020, format characters (`Cf`), private use (`Co`) and noncharacters.
fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let n = c as u32;
    let format = matches!(
        n,
        0xad | 0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x890..=0x891
            | 0x8e2
            | 0x180e
            | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0x110bd
            | 0x110cd
            | 0x13430..=0x1343f
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0001
            | 0xe0020..=0xe007f
    );
    let private_use = matches!(n, 0xe000..=0xf8ff | 0xf0000..=0xffffd | 0x100000..=0x10fffd);
    let noncharacter = matches!(n, 0xfdd0..=0xfdef) || n & 0xfffe == 0xfffe;
    !(format || private_use || noncharacter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_as_go_quotes_them() {
        assert_eq!(go_quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\u{1}"), r#""\x01""#);
        assert_eq!(go_quote("é"), "\"é\"");
        assert_eq!(go_quote("\u{1}\u{7f}\u{a0}é"), r#""\x01\x7f\u00a0é""#);
        assert_eq!(go_quote(""), r#""""#);
        assert_eq!(go_quote("a b"), r#""a b""#);
    }

    #[test]
    fn every_escape_go_has_is_written_as_go_writes_it() {
        assert_eq!(
            go_quote("\u{7}\u{8}\u{c}\n\r\t\u{b}"),
            r#""\a\b\f\n\r\t\v""#
        );
        assert_eq!(go_quote("\u{0}\u{1b}\u{1f}"), r#""\x00\x1b\x1f""#);
        // C1 controls, non-ASCII spaces, line and paragraph separators.
        assert_eq!(
            go_quote("\u{85}\u{a0}\u{2028}\u{2029}\u{3000}"),
            r#""\u0085\u00a0\u2028\u2029\u3000""#
        );
        // Format characters, private use and noncharacters; beyond the BMP, \U.
        assert_eq!(
            go_quote("\u{ad}\u{200b}\u{feff}\u{e000}\u{fffe}"),
            r#""\u00ad\u200b\ufeff\ue000\ufffe""#
        );
        assert_eq!(go_quote("\u{e0001}\u{10fffd}"), r#""\U000e0001\U0010fffd""#);
        // Printable characters stay, in and beyond the BMP.
        assert_eq!(go_quote("日本 ü ∑ 😀"), "\"日本 ü ∑ 😀\"");
    }
}
