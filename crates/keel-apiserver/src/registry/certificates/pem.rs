//! PEM blocks, as Go's `encoding/pem` finds them (`pem.Decode`: the first
//! `-----BEGIN TYPE-----` ... `-----END TYPE-----` block whose body is base64), and a DER
//! element's outer framing (what makes `x509.ParseCertificateRequest` and
//! `x509.ParseCertificate` fail at once on bytes that are not one ASN.1 SEQUENCE).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// One PEM block: its type and its decoded bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Block {
    /// The type (`CERTIFICATE REQUEST`).
    pub kind: String,
    /// The body, base64-decoded.
    pub bytes: Vec<u8>,
    /// Whether the block has headers (`Key: value` lines before its body).
    pub headers: bool,
}

/// The PEM blocks of `data`, in order, as repeated `pem.Decode` calls find them (a block
/// whose body is not base64 or whose END line does not match ends the search).
pub fn blocks(data: &[u8]) -> Vec<Block> {
    let text = String::from_utf8_lossy(data);
    let mut out = Vec::new();
    let mut rest: &str = &text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        let Some(end_type) = after.find("-----") else {
            break;
        };
        let kind = after[..end_type].to_string();
        let body_start = &after[end_type + 5..];
        let end_marker = format!("-----END {kind}-----");
        let Some(end) = body_start.find(&end_marker) else {
            break;
        };
        let headers = body_start[..end].lines().any(|l| l.contains(':'));
        let body: String = body_start[..end]
            .lines()
            .filter(|l| !l.contains(':'))
            .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
            .collect();
        let Ok(bytes) = STANDARD.decode(body) else {
            break;
        };
        out.push(Block {
            kind,
            bytes,
            headers,
        });
        rest = &body_start[end + end_marker.len()..];
    }
    out
}

/// Whether `der` is exactly one DER SEQUENCE (tag 0x30 and a length that fits).
pub fn is_der_sequence(der: &[u8]) -> bool {
    let (Some(&0x30), Some(&first)) = (der.first(), der.get(1)) else {
        return false;
    };
    let (len, header) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || der.len() < 2 + n {
            return false;
        }
        let len = der[2..2 + n]
            .iter()
            .fold(0usize, |a, b| (a << 8) | *b as usize);
        (len, 2 + n)
    };
    der.len() == header + len
}

/// `%#v` of a Go `[]byte` (`[]byte{0x2d, 0x2d}`): how a field error shows raw bytes.
pub fn go_bytes(bytes: &[u8]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:#x}")).collect();
    format!("[]byte{{{}}}", hex.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_found_as_pem_decode_finds_them() {
        let pem = b"junk\n-----BEGIN CERTIFICATE REQUEST-----\nMAMCAQE=\n-----END CERTIFICATE REQUEST-----\n";
        let found = blocks(pem);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, "CERTIFICATE REQUEST");
        assert_eq!(found[0].bytes, vec![0x30, 0x03, 0x02, 0x01, 0x01]);
        assert!(is_der_sequence(&found[0].bytes));
        assert!(!is_der_sequence(&[0x30, 0x05, 0x00]));
        assert!(blocks(b"not pem").is_empty());
        assert_eq!(go_bytes(b"-\x00"), "[]byte{0x2d, 0x0}");
    }
}
