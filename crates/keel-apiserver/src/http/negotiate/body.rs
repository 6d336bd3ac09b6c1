//! Request bodies, as kube-apiserver's decoders read them: the form a `Content-Type` names
//! ([`Body`]), and JSON, YAML (as Go's `YAMLToJSON` reads it) or protobuf decoded into a
//! JSON value.

use serde_json::Value;

use crate::http::decode::yaml_strict;
use crate::http::protobuf;
use crate::storage::Status;

/// What a request body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
    /// `application/json-patch+json` (RFC 6902).
    JsonPatch,
    /// `application/merge-patch+json` (RFC 7386).
    MergePatch,
    /// `application/strategic-merge-patch+json`.
    StrategicMergePatch,
    /// `application/apply-patch+yaml` (server-side apply).
    ApplyPatch,
}

/// The body form named by `content_type` (None or unrecognised: 415). A custom resource
/// (`custom`) has no protobuf form and takes no strategic merge patch, as upstream.
pub fn body(content_type: Option<&str>, patch: bool, custom: bool) -> Result<Body, Status> {
    let essence = content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let found = match essence.as_str() {
        "application/json" | "" if !patch => Some(Body::Json),
        "application/yaml" if !patch => Some(Body::Yaml),
        "application/vnd.kubernetes.protobuf" if !patch && !custom => Some(Body::Protobuf),
        "application/json-patch+json" if patch => Some(Body::JsonPatch),
        "application/merge-patch+json" if patch => Some(Body::MergePatch),
        "application/strategic-merge-patch+json" if patch && !custom => {
            Some(Body::StrategicMergePatch)
        }
        "application/apply-patch+yaml" if patch => Some(Body::ApplyPatch),
        _ => None,
    };
    found.ok_or_else(|| {
        let accepted = match (patch, custom) {
            (true, false) => {
                "application/json-patch+json, application/merge-patch+json, \
                 application/strategic-merge-patch+json, application/apply-patch+yaml"
            }
            (true, true) => {
                "application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml"
            }
            (false, false) => {
                "application/json, application/yaml, application/vnd.kubernetes.protobuf"
            }
            (false, true) => "application/json, application/yaml",
        };
        Status::failure(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types \
                 include: {accepted}"
            ),
        )
    })
}

/// Decodes an object body of the form `form` (JSON, YAML or protobuf) into a JSON value
/// (400 BadRequest when it is not of its form). A protobuf body is read as `api_version`
/// and `kind` when its envelope leaves them out; JSON and YAML bodies name their own.
pub fn decode_object(
    bytes: &[u8],
    form: Body,
    api_version: &str,
    kind: &str,
) -> Result<Value, Status> {
    match form {
        Body::Protobuf => protobuf::decode(bytes, api_version, kind),
        form => decode(bytes, form == Body::Yaml),
    }
}

/// Decodes a JSON or YAML body into a JSON value (400 BadRequest when it is neither).
pub fn decode(bytes: &[u8], yaml: bool) -> Result<Value, Status> {
    let parsed = if yaml {
        from_yaml(bytes).map_err(|e| format!("yaml: {e}"))
    } else {
        serde_json::from_slice::<Value>(bytes).map_err(|e| format!("json parse error: {e}"))
    };
    parsed
        .map_err(|e| Status::failure(400, "BadRequest", format!("couldn't get version/kind; {e}")))
}

/// Flow collections nested deeper than this refuse a YAML body before it is parsed.
const MAX_YAML_DEPTH: usize = 1000;

/// A YAML document as the JSON Go's `YAMLToJSON` makes of it: plain scalars read as yaml.v2
/// reads YAML 1.1 (`yes` and `on` are true, `0644` is octal 420, `1_000` is 1000), and a
/// float without a fraction written as an integer (`80.0` is `80`), as `encoding/json`
/// writes such a `float64`.
pub fn from_yaml(bytes: &[u8]) -> Result<Value, serde_yaml_ng::Error> {
    fn whole_floats(value: &mut Value) {
        match value {
            Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0)
                    && f.abs() < 1e15
                {
                    *value = Value::from(f as i64);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(whole_floats),
            Value::Object(map) => map.values_mut().for_each(whole_floats),
            _ => {}
        }
    }
    // The YAML parser takes time in the square of a flow collection's depth before its own
    // limit of 128 levels refuses it: refuse a body that deep at once.
    if crate::nesting::depth(bytes) > MAX_YAML_DEPTH {
        return Err(serde::de::Error::custom("recursion limit exceeded"));
    }
    let mut value: Value = serde_yaml_ng::from_slice(bytes)?;
    // Plain scalars typed as yaml.v2 types them (YAML 1.1: `yes` is true, `0644` is 420).
    for (path, typed) in yaml_strict::yaml11_scalars(bytes) {
        let mut at = Some(&mut value);
        for step in &path {
            at = match (at, step) {
                (Some(Value::Object(map)), yaml_strict::Step::Key(key)) => map.get_mut(key),
                (Some(Value::Array(items)), yaml_strict::Step::Index(i)) => items.get_mut(*i),
                _ => None,
            };
        }
        if let Some(at) = at {
            *at = typed;
        }
    }
    whole_floats(&mut value);
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yaml_body_nested_too_deep_is_refused_before_it_is_parsed() {
        let deep = format!("x: {}{}\n", "[".repeat(200_000), "]".repeat(200_000));
        // Without the depth check the parser would take minutes over this.
        let err = from_yaml(deep.as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("recursion limit exceeded"),
            "{err}"
        );
        assert!(from_yaml(b"x: [[[1]]]\n").is_ok());
    }

    #[test]
    fn yaml_plain_scalars_are_typed_as_yaml_v2_types_them() {
        let doc = b"spec:\n  containers:\n  - name: c\n    stdin: yes\n    tty: on\n    quoted: \"yes\"\n  volumes:\n  - secret:\n      defaultMode: 0644\n  deadline: 1_000\n  nothing: ~\n  big: 0x1F\n  flag: Off\n  list: [y, n, \"n\", 010]\n  port: 80\n  ratio: 1.5\n  name: \"0644\"\n  word: yesterday\n";
        let value = from_yaml(doc).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"spec": {
                "containers": [{"name": "c", "stdin": true, "tty": true, "quoted": "yes"}],
                "volumes": [{"secret": {"defaultMode": 420}}],
                "deadline": 1000, "nothing": null, "big": 31, "flag": false,
                "list": [true, false, "n", 8], "port": 80, "ratio": 1.5,
                "name": "0644", "word": "yesterday",
            }})
        );
        // Aliases keep the YAML 1.2 reading rather than guess at paths.
        let aliased = from_yaml(b"a: &x yes\nb: *x\n").unwrap();
        assert_eq!(aliased, serde_json::json!({"a": "yes", "b": "yes"}));
    }

    #[test]
    fn bodies_are_read_by_content_type() {
        assert_eq!(
            body(Some("application/json; charset=utf-8"), false, false),
            Ok(Body::Json)
        );
        assert_eq!(
            body(Some("application/strategic-merge-patch+json"), true, false),
            Ok(Body::StrategicMergePatch)
        );
        assert_eq!(
            body(Some("application/vnd.kubernetes.protobuf"), false, false),
            Ok(Body::Protobuf)
        );
        let custom = body(Some("application/strategic-merge-patch+json"), true, true).unwrap_err();
        assert_eq!(custom.code, 415);
        assert!(custom.message.ends_with(
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        ));
        let refused = body(Some("application/vnd.kubernetes.protobuf"), true, false).unwrap_err();
        assert_eq!(
            (refused.code, refused.reason),
            (415, "UnsupportedMediaType")
        );
        assert!(
            decode(b"{", false)
                .unwrap_err()
                .message
                .starts_with("couldn't get version/kind; json parse error")
        );
        assert_eq!(
            decode(b"a: 1\n", true).unwrap(),
            serde_json::json!({"a": 1})
        );
    }

    #[test]
    fn yaml_floats_without_a_fraction_are_integers_as_go_writes_them() {
        let doc = decode(b"a: 80.0\nb: [1.5, 2.0, 1e3]\n", true).unwrap();
        assert_eq!(doc, serde_json::json!({"a": 80, "b": [1.5, 2, 1000]}));
        assert!(doc["a"].is_i64());
        assert!(doc["b"][0].is_f64());
    }
}
