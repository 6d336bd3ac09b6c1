//! List continue tokens, encoded as Kubernetes encodes them, so a client can page through a
//! list served by keel and kube-apiserver alike.
//!
//! A token is the unpadded base64url of the JSON `{"v":"meta.k8s.io/v1","rv":<revision>,
//! "start":"<key>"}`: `rv` is the revision every page of the list is read at (the first
//! page's), `start` the key to continue from, relative to the list's key prefix (the last key
//! returned plus a NUL byte, the smallest key after it). `rv` -1 means "continue at the latest
//! revision" (offered with a 410 once the pinned revision is compacted). The start key is
//! checked as kube-apiserver checks it: a path that does not stay itself after cleaning (`..`,
//! `.`, doubled slashes) could reach above the prefix, and is refused.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// The only version of the token format.
const VERSION: &str = "meta.k8s.io/v1";

/// The encoded fields, named as Kubernetes names them.
#[derive(Serialize, Deserialize)]
struct Token {
    #[serde(rename = "v", default)]
    version: String,
    #[serde(rename = "rv", default)]
    revision: i64,
    #[serde(rename = "start", default)]
    start: String,
}

/// Where a list continues: the full key to start from and the revision to read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continue {
    /// The full key (the list's prefix included) of the first object of the next page.
    pub from_key: String,
    /// The revision of the list (-1: the latest).
    pub revision: i64,
}

/// The token continuing a list of keys under `prefix` after `last_key`, read at `revision`.
pub fn encode(last_key: &str, prefix: &str, revision: i64) -> String {
    encode_from(&format!("{last_key}\0"), prefix, revision)
}

/// The token continuing a list of keys under `prefix` from `from_key` (itself included),
/// read at `revision` (-1: the latest).
pub fn encode_from(from_key: &str, prefix: &str, revision: i64) -> String {
    let start = from_key.strip_prefix(prefix).unwrap_or(from_key);
    let token = Token {
        version: VERSION.to_string(),
        revision,
        start: start.to_string(),
    };
    let json = serde_json::to_vec(&token).expect("a token always encodes");
    URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a token of a list under `prefix`; the error is Kubernetes' wording.
pub fn decode(token: &str, prefix: &str) -> Result<Continue, String> {
    const INVALID: &str = "continue key is not valid";
    let json = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| format!("{INVALID}: {e}"))?;
    let t: Token = serde_json::from_slice(&json).map_err(|e| format!("{INVALID}: {e}"))?;
    if t.version != VERSION {
        return Err(format!(
            "{INVALID}: server does not recognize this encoded version {}",
            t.version
        ));
    }
    if t.revision == 0 {
        return Err(format!(
            "{INVALID}: incorrect encoded start resourceVersion (version {VERSION})"
        ));
    }
    if t.start.is_empty() {
        return Err(format!(
            "{INVALID}: encoded start key empty (version {VERSION})"
        ));
    }
    let key = if t.start.starts_with('/') {
        t.start.clone()
    } else {
        format!("/{}", t.start)
    };
    if clean(&key) != key {
        return Err(format!("{INVALID}: {}", t.start));
    }
    Ok(Continue {
        from_key: format!("{prefix}{}", &key[1..]),
        revision: t.revision,
    })
}

/// Go's `path.Clean` of an absolute path: no empty, `.` or `..` segments, no trailing slash.
fn clean(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(version: &str, revision: i64, start: &str) -> String {
        let json = serde_json::json!({ "v": version, "rv": revision, "start": start });
        URL_SAFE_NO_PAD.encode(json.to_string())
    }

    #[test]
    fn a_token_continues_after_the_last_key() {
        let t = encode("/registry/pods/ns/b", "/registry/pods/", 42);
        let c = decode(&t, "/registry/pods/").unwrap();
        assert_eq!(c.from_key, "/registry/pods/ns/b\0");
        assert_eq!(c.revision, 42);
        // Kubernetes' own encoding of the same continuation.
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(&t).unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"v":"meta.k8s.io/v1","rv":42,"start":"ns/b\u0000"}"#
        );
    }

    #[test]
    fn bad_tokens_are_refused_with_kubernetes_wording() {
        let p = "/test/";
        assert_eq!(
            decode(&token(VERSION, 1, "key"), p).unwrap().from_key,
            "/test/key"
        );
        assert_eq!(
            decode(&token(VERSION, 1, "/"), p).unwrap().from_key,
            "/test/"
        );
        assert_eq!(decode(&token(VERSION, -1, "k"), p).unwrap().revision, -1);
        let cases = [
            (
                token("", 1, "key"),
                "server does not recognize this encoded version ",
            ),
            (
                token("v1", 1, "key"),
                "server does not recognize this encoded version v1",
            ),
            (
                token(VERSION, 0, "key"),
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ),
            (
                token(VERSION, 1, ""),
                "encoded start key empty (version meta.k8s.io/v1)",
            ),
            (token(VERSION, 1, "../key"), "../key"),
            (token(VERSION, 1, "./key"), "./key"),
            (token(VERSION, 1, "./../key"), "./../key"),
            (token(VERSION, 1, "key/../.."), "key/../.."),
        ];
        for (t, want) in cases {
            assert_eq!(
                decode(&t, p).unwrap_err(),
                format!("continue key is not valid: {want}")
            );
        }
        assert!(
            decode("not base64!", p)
                .unwrap_err()
                .starts_with("continue key is not valid: ")
        );
        let not_json = URL_SAFE_NO_PAD.encode("{");
        assert!(
            decode(&not_json, p)
                .unwrap_err()
                .starts_with("continue key is not valid: ")
        );
    }
}
