//! Content negotiation, as kube-apiserver's `negotiation` package does it: which form a
//! response takes (JSON, YAML, a `meta.k8s.io/v1` Table, or `meta.k8s.io/v1`
//! PartialObjectMetadata for metadata-only clients) from the `Accept` header, and how a
//! request body is read from its `Content-Type`. Protobuf bodies are read (see
//! [`super::protobuf`]) but protobuf is not answered: a client that offers JSON as well gets
//! JSON, one that asks for protobuf only gets 406.

use serde_json::Value;

use crate::storage::Status;

/// What a response is encoded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/json;as=Table;v=v1;g=meta.k8s.io`.
    Table,
    /// `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`: an object (or each
    /// watch event's object) as its metadata only.
    Metadata,
    /// `application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`: a list as its
    /// items' metadata only.
    MetadataList,
}

/// What a request answers, which decides the transformed forms it may be given
/// (kube-apiserver's `transformResponseObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Discovery, version, a Status: JSON or YAML only.
    Plain,
    /// The object a write answers with: also as PartialObjectMetadata.
    Written,
    /// One object read: also as a Table or as PartialObjectMetadata.
    Object,
    /// A list: also as a Table or as PartialObjectMetadataList.
    List,
    /// A watch: event objects also as Table rows or as PartialObjectMetadata.
    Watch,
}

impl Output {
    /// The response's Content-Type.
    pub fn content_type(self) -> &'static str {
        match self {
            Output::Json => "application/json",
            Output::Yaml => "application/yaml",
            Output::Table => "application/json;as=Table;v=v1;g=meta.k8s.io",
            Output::Metadata => "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            Output::MetadataList => {
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            }
        }
    }
}

/// One media range of an Accept header.
struct MediaRange<'a> {
    essence: String,
    params: Vec<(String, &'a str)>,
    quality: f32,
}

fn parse_accept(accept: &str) -> Vec<MediaRange<'_>> {
    let mut ranges: Vec<MediaRange> = accept
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let essence = pieces.next()?.trim().to_ascii_lowercase();
            if essence.is_empty() {
                return None;
            }
            let mut params = Vec::new();
            let mut quality = 1.0;
            for p in pieces {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"'));
                if k == "q" {
                    quality = v.parse().unwrap_or(0.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(MediaRange {
                essence,
                params,
                quality,
            })
        })
        .collect();
    // Highest quality first; the client's order among equals (a stable sort).
    ranges.sort_by(|a, b| b.quality.total_cmp(&a.quality));
    ranges
}

/// The response form for `accept` (None: nothing acceptable, answer
/// [`not_acceptable`]), for a request that gives `answer`.
pub fn output(accept: Option<&str>, answer: Answer) -> Option<Output> {
    let tables = matches!(answer, Answer::Object | Answer::List | Answer::Watch);
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(Output::Json);
    };
    for range in parse_accept(accept) {
        if range.quality <= 0.0 {
            continue;
        }
        let param = |name: &str| {
            range
                .params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| *v)
        };
        match range.essence.as_str() {
            "application/json" | "application/yaml" => {
                let yaml = range.essence == "application/yaml";
                match param("as") {
                    None => return Some(if yaml { Output::Yaml } else { Output::Json }),
                    Some("Table")
                        if tables
                            && !yaml
                            && param("g") == Some("meta.k8s.io")
                            && matches!(param("v"), Some("v1") | Some("v1beta1")) =>
                    {
                        return Some(Output::Table);
                    }
                    Some(form @ ("PartialObjectMetadata" | "PartialObjectMetadataList"))
                        if !yaml
                            && param("g") == Some("meta.k8s.io")
                            && param("v") == Some("v1") =>
                    {
                        let list = form == "PartialObjectMetadataList";
                        match (answer, list) {
                            (Answer::Written | Answer::Object | Answer::Watch, false) => {
                                return Some(Output::Metadata);
                            }
                            (Answer::List, true) => return Some(Output::MetadataList),
                            _ => continue,
                        }
                    }
                    // Other "as" forms (aggregated discovery, v1beta1 metadata) are not
                    // served: the client's next choice decides.
                    Some(_) => continue,
                }
            }
            "*/*" | "application/*" => return Some(Output::Json),
            _ => continue,
        }
    }
    None
}

/// 406 NotAcceptable, worded as kube-apiserver words it.
pub fn not_acceptable() -> Status {
    Status::failure(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml"
            .to_string(),
    )
}

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

/// The body form named by `content_type` (None or unrecognised: 415).
pub fn body(content_type: Option<&str>, patch: bool) -> Result<Body, Status> {
    let essence = content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let found = match essence.as_str() {
        "application/json" | "" if !patch => Some(Body::Json),
        "application/yaml" if !patch => Some(Body::Yaml),
        "application/vnd.kubernetes.protobuf" if !patch => Some(Body::Protobuf),
        "application/json-patch+json" if patch => Some(Body::JsonPatch),
        "application/merge-patch+json" if patch => Some(Body::MergePatch),
        "application/strategic-merge-patch+json" if patch => Some(Body::StrategicMergePatch),
        "application/apply-patch+yaml" if patch => Some(Body::ApplyPatch),
        _ => None,
    };
    found.ok_or_else(|| {
        let accepted = if patch {
            "application/json-patch+json, application/merge-patch+json, \
             application/strategic-merge-patch+json, application/apply-patch+yaml"
        } else {
            "application/json, application/yaml, application/vnd.kubernetes.protobuf"
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
        Body::Protobuf => super::protobuf::decode(bytes, api_version, kind),
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

/// A YAML document as the JSON Go's `YAMLToJSON` makes of it: a float without a fraction
/// is written as an integer (`80.0` is `80`), as `encoding/json` writes such a `float64`.
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
    let mut value: Value = serde_yaml_ng::from_slice(bytes)?;
    whole_floats(&mut value);
    Ok(value)
}

/// Encodes a response value in the negotiated form.
pub fn encode(value: &impl serde::Serialize, output: Output) -> Vec<u8> {
    match output {
        Output::Yaml => serde_yaml_ng::to_string(value)
            .map(String::into_bytes)
            .unwrap_or_default(),
        Output::Json | Output::Table | Output::Metadata | Output::MetadataList => {
            let mut out = serde_json::to_vec(value).expect("a JSON value encodes");
            out.push(b'\n');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_and_clients_get_what_they_ask_for() {
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(output(Some(kubectl_get), Answer::List), Some(Output::Table));
        assert_eq!(output(Some(kubectl_get), Answer::Plain), Some(Output::Json));
        assert_eq!(output(None, Answer::Object), Some(Output::Json));
        assert_eq!(
            output(
                Some("application/vnd.kubernetes.protobuf, */*"),
                Answer::Object
            ),
            Some(Output::Json)
        );
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf"), Answer::Object),
            None
        );
        assert_eq!(
            output(Some("application/yaml"), Answer::List),
            Some(Output::Yaml)
        );
        let discovery =
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        assert_eq!(output(Some(discovery), Answer::Plain), Some(Output::Json));
        assert_eq!(
            output(
                Some("application/json;q=0.1, application/yaml"),
                Answer::List
            ),
            Some(Output::Yaml)
        );
    }

    #[test]
    fn metadata_clients_get_partial_objects_where_the_answer_has_that_shape() {
        let object = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(output(Some(object), Answer::Object), Some(Output::Metadata));
        assert_eq!(output(Some(object), Answer::Watch), Some(Output::Metadata));
        assert_eq!(
            output(Some(object), Answer::Written),
            Some(Output::Metadata)
        );
        assert_eq!(output(Some(list), Answer::List), Some(Output::MetadataList));
        assert_eq!(output(Some(object), Answer::List), None);
        assert_eq!(output(Some(list), Answer::Object), None);
        assert_eq!(
            output(Some(&format!("{list},application/json")), Answer::Object),
            Some(Output::Json)
        );
        assert_eq!(output(Some(object), Answer::Plain), None);
    }

    #[test]
    fn bodies_are_read_by_content_type() {
        assert_eq!(
            body(Some("application/json; charset=utf-8"), false),
            Ok(Body::Json)
        );
        assert_eq!(
            body(Some("application/strategic-merge-patch+json"), true),
            Ok(Body::StrategicMergePatch)
        );
        assert_eq!(
            body(Some("application/vnd.kubernetes.protobuf"), false),
            Ok(Body::Protobuf)
        );
        let refused = body(Some("application/vnd.kubernetes.protobuf"), true).unwrap_err();
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
