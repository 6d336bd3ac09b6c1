//! Content negotiation, as kube-apiserver's `negotiation` package and its handlers'
//! `transformResponseObject` do it: which form a response takes from the `Accept` header,
//! and how a request body is read from its `Content-Type`.
//!
//! The Accept header's media ranges are tried in the order `goautoneg` sorts them (quality,
//! then the more specific first, then the client's order), each against the forms served
//! (JSON, then YAML); the first that fits wins, with its `as`, `g` and `v` parameters asking
//! for a `meta.k8s.io` `v1` or `v1beta1` Table (JSON or YAML), PartialObjectMetadata or
//! PartialObjectMetadataList (any form) in place of the object. A range asking for any other
//! conversion, or for one the answer cannot take (a Table of discovery), is passed over. Like
//! kube-apiserver, a PartialObjectMetadata of a list, or a list form of one object, is
//! refused only when the answer is made ([`Output::refusal`]), after the request did its
//! work; a watch streams JSON only (YAML has no stream form), so a watch whose first fitting
//! range is YAML is refused, and a watch asking for PartialObjectMetadataList gets whole
//! objects, as upstream falls back to them. The watch stream makes its events' Tables and
//! metadata in `v1` only: a `v1beta1` Table is answered in `v1` and a `v1beta1`
//! PartialObjectMetadata range is passed over, where kube-apiserver answers both in `v1beta1`.
//! Responses say `application/json` or `application/yaml` whatever the conversion, as
//! kube-apiserver's do.
//!
//! Protobuf (see [`super::protobuf`]) is read and answered for the built-in kinds, as
//! kube-apiserver does: a range naming `application/vnd.kubernetes.protobuf` chooses it
//! (never a wildcard, never with a conversion); a custom resource has no protobuf form, so
//! asking for it only is a 406 that lists JSON and YAML. How a request body is read is
//! [`body()`]'s and [`decode`]'s.

mod body;

use crate::registry::ResourceInfo;
use crate::storage::Status;
pub use body::{Body, body, decode, decode_object, from_yaml};

/// Kubernetes' protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// How a response is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`: built-in kinds only, never converted.
    Protobuf,
}

/// What a response is converted into (`as=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// A `Table`: one row per object.
    Table,
    /// `PartialObjectMetadata`: an object (or each watch event's object) as its metadata
    /// only.
    Metadata,
    /// `PartialObjectMetadataList`: a list as its items' metadata only.
    MetadataList,
}

/// The `meta.k8s.io` version a conversion is answered in (`v=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaVersion {
    /// `meta.k8s.io/v1`.
    V1,
    /// `meta.k8s.io/v1beta1`, which kube-apiserver still serves.
    V1Beta1,
}

impl MetaVersion {
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
    pub fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1Beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// What a response is: its encoding, and the conversion asked for, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    /// JSON or YAML.
    pub encoding: Encoding,
    /// The conversion and its version.
    pub conversion: Option<(Conversion, MetaVersion)>,
}

// The forms a watch stream names, as constants of the pattern-matchable kind.
#[allow(non_upper_case_globals)]
impl Output {
    /// JSON, as is.
    pub const Json: Output = Output::plain(Encoding::Json);
    /// YAML, as is.
    pub const Yaml: Output = Output::plain(Encoding::Yaml);
    /// A `meta.k8s.io/v1` Table in JSON.
    pub const Table: Output = Output::converted(Conversion::Table);
    /// A `meta.k8s.io/v1` PartialObjectMetadata in JSON.
    pub const Metadata: Output = Output::converted(Conversion::Metadata);
    /// A `meta.k8s.io/v1` PartialObjectMetadataList in JSON.
    pub const MetadataList: Output = Output::converted(Conversion::MetadataList);
}

impl Output {
    /// `encoding` with no conversion.
    pub const fn plain(encoding: Encoding) -> Output {
        Output {
            encoding,
            conversion: None,
        }
    }

    const fn converted(conversion: Conversion) -> Output {
        Output {
            encoding: Encoding::Json,
            conversion: Some((conversion, MetaVersion::V1)),
        }
    }

    /// The response's Content-Type: the encoding's, whatever the conversion.
    pub fn content_type(self) -> &'static str {
        match self.encoding {
            Encoding::Json => "application/json",
            Encoding::Yaml => "application/yaml",
            Encoding::Protobuf => PROTOBUF,
        }
    }

    /// The same encoding without a conversion (for a Status).
    pub fn unconverted(self) -> Output {
        Output::plain(self.encoding)
    }

    /// The 406 kube-apiserver answers when the conversion asked for does not fit the answer
    /// (`list`: whether it is a list, `info`: of which kind), once the request has done its
    /// work; None when it fits.
    pub fn refusal(self, info: &ResourceInfo, list: bool) -> Option<Status> {
        let (asked, wants_list) = match self.conversion? {
            (Conversion::Metadata, _) => ("PartialObjectMetadata", false),
            (Conversion::MetadataList, _) => ("PartialObjectMetadataList", true),
            (Conversion::Table, _) => return None,
        };
        if wants_list == list {
            return None;
        }
        let go_type = internal_go_type(info, list);
        let message = if list {
            format!("you requested {asked}, but the requested object is a list ({go_type})")
        } else {
            format!("you requested {asked}, but the requested object is not a list ({go_type})")
        };
        Some(Status::failure(406, "NotAcceptable", message))
    }
}

/// The Go type kube-apiserver's handlers hold an object of `info`'s kind in (its internal
/// type, `%T`): `*core.ConfigMap`, `*coordination.LeaseList`; events.k8s.io Events are
/// core's.
fn internal_go_type(info: &ResourceInfo, list: bool) -> String {
    let package = match info.group {
        "" | "events.k8s.io" => "core",
        group => group.split('.').next().unwrap_or(group),
    };
    let list = if list { "List" } else { "" };
    format!("*{package}.{}{list}", info.kind)
}

/// What a request answers, which decides the conversions it may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Discovery, version, a Status: JSON or YAML only.
    Plain,
    /// The object a write answers with.
    Written,
    /// One object read.
    Object,
    /// A list.
    List,
    /// A watch: a stream of JSON events.
    Watch,
}

/// Why no form was found for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No media range fits a form served.
    NotAcceptable,
    /// A watch's first fitting range has no stream form (YAML).
    NoStream,
}

impl Refused {
    /// 406 NotAcceptable, worded as kube-apiserver words it, with the forms keel answers
    /// (protobuf among them when the kind has a protobuf form).
    pub fn status(self, protobuf: bool) -> Status {
        let accepted = match (self, protobuf) {
            (Refused::NotAcceptable, false) => "application/json, application/yaml",
            (Refused::NotAcceptable, true) => {
                "application/json, application/yaml, application/vnd.kubernetes.protobuf"
            }
            (Refused::NoStream, false) => "application/json;stream=watch",
            (Refused::NoStream, true) => {
                "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
            }
        };
        Status::failure(
            406,
            "NotAcceptable",
            format!("only the following media types are accepted: {accepted}"),
        )
    }
}

/// One media range of an Accept header.
struct MediaRange<'a> {
    kind: String,
    subtype: String,
    params: Vec<(String, &'a str)>,
    quality: f32,
}

/// The media ranges of `accept` in `goautoneg`'s order: quality first, then a range with a
/// type before `*/*`, then one with a subtype before `type/*`, then the client's order.
fn parse_accept(accept: &str) -> Vec<MediaRange<'_>> {
    let mut ranges: Vec<MediaRange> = accept
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let essence = pieces.next()?.trim().to_ascii_lowercase();
            let (kind, subtype) = match essence.split_once('/') {
                Some((kind, subtype)) => (kind.to_string(), subtype.to_string()),
                None if essence == "*" => ("*".to_string(), "*".to_string()),
                None => return None,
            };
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
                kind,
                subtype,
                params,
                quality,
            })
        })
        .collect();
    ranges.sort_by(|a, b| {
        b.quality
            .total_cmp(&a.quality)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    ranges
}

/// The conversion a media range's `as`, `g` and `v` ask for: Ok(None) for none, Err(()) for
/// one kube-apiserver does not make (another group or version, another kind).
fn conversion(range: &MediaRange) -> Result<Option<(Conversion, MetaVersion)>, ()> {
    let param = |name: &str| {
        range
            .params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
    };
    if ["as", "g", "v"].iter().all(|p| param(p).is_none()) {
        return Ok(None);
    }
    let version = match (param("g"), param("v")) {
        (Some("meta.k8s.io"), Some("v1")) => MetaVersion::V1,
        (Some("meta.k8s.io"), Some("v1beta1")) => MetaVersion::V1Beta1,
        _ => return Err(()),
    };
    let conversion = match param("as") {
        Some("Table") => Conversion::Table,
        Some("PartialObjectMetadata") => Conversion::Metadata,
        Some("PartialObjectMetadataList") => Conversion::MetadataList,
        _ => return Err(()),
    };
    Ok(Some((conversion, version)))
}

/// The response form for `accept`, for a request that gives `answer`, in JSON or YAML.
pub fn output(accept: Option<&str>, answer: Answer) -> Result<Output, Refused> {
    output_for(accept, answer, false)
}

/// The response form for `accept`, for a request that gives `answer`, in protobuf too
/// when `protobuf` (the kind has a protobuf form): only a range that names it exactly
/// chooses it, and never with a conversion.
pub fn output_for(accept: Option<&str>, answer: Answer, protobuf: bool) -> Result<Output, Refused> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::Json);
    };
    let encodings: &[Encoding] = if protobuf {
        &[Encoding::Json, Encoding::Yaml, Encoding::Protobuf]
    } else {
        &[Encoding::Json, Encoding::Yaml]
    };
    for range in parse_accept(accept) {
        if range.quality <= 0.0 {
            continue;
        }
        for &encoding in encodings {
            let fits = match encoding {
                Encoding::Protobuf => {
                    range.kind == "application" && range.subtype == "vnd.kubernetes.protobuf"
                }
                Encoding::Json | Encoding::Yaml => {
                    let subtype = if encoding == Encoding::Json {
                        "json"
                    } else {
                        "yaml"
                    };
                    range.kind == "*" && range.subtype == "*"
                        || range.kind == "application"
                            && (range.subtype == subtype || range.subtype == "*")
                }
            };
            if !fits {
                continue;
            }
            let stream = range.params.iter().find(|(k, _)| k == "stream");
            if stream.is_some_and(|(_, v)| {
                !v.is_empty() && (*v != "watch" || encoding == Encoding::Yaml)
            }) {
                continue;
            }
            let Ok(conversion) = conversion(&range) else {
                continue;
            };
            if encoding == Encoding::Protobuf {
                if conversion.is_some() {
                    continue;
                }
                return Ok(Output::plain(Encoding::Protobuf));
            }
            if conversion.is_some() && answer == Answer::Plain {
                continue;
            }
            if answer != Answer::Watch {
                return Ok(Output {
                    encoding,
                    conversion,
                });
            }
            if encoding == Encoding::Yaml {
                return Err(Refused::NoStream);
            }
            return match conversion {
                // Upstream cannot make a list of a watch event and sends the object whole.
                None | Some((Conversion::MetadataList, _)) => Ok(Output::Json),
                // Each event's object as a one-row Table or as its metadata, in the version
                // asked for.
                Some(conversion) => Ok(Output {
                    encoding: Encoding::Json,
                    conversion: Some(conversion),
                }),
            };
        }
    }
    Err(Refused::NotAcceptable)
}

/// The aggregated discovery version (`v2` or `v2beta1`) and encoding (JSON or protobuf)
/// `accept` asks for of `/api` or `/apis`, as kube-apiserver's
/// `WrapAggregatedDiscoveryToHandler` negotiates it (`NegotiateMediaTypeOptions` over JSON,
/// YAML and protobuf, in that order for each range): the first range that fits a form
/// decides, and it asks when it names `as=APIGroupDiscoveryList` in `apidiscovery.k8s.io`
/// (a range asking for another conversion is passed over); None to serve the unaggregated
/// documents. Protobuf is chosen only by a range naming `application/vnd.kubernetes.protobuf`;
/// a range that fits YAML alone is passed over (keel has no YAML form of these documents).
/// kube-apiserver 1.34 aggregates `v2` only (its `AggregatedDiscoveryRemoveBetaType` gate is
/// on by default); keel still serves `v2beta1` to the clients that ask for it.
pub fn aggregated_discovery(accept: Option<&str>) -> Option<(&'static str, Encoding)> {
    for range in parse_accept(accept?) {
        let encoding = if range.kind == "*" && range.subtype == "*"
            || range.kind == "application" && (range.subtype == "json" || range.subtype == "*")
        {
            Encoding::Json
        } else if range.kind == "application" && range.subtype == "vnd.kubernetes.protobuf" {
            Encoding::Protobuf
        } else {
            continue;
        };
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
        if ["as", "g", "v"].iter().all(|p| param(p).is_none()) {
            return None;
        }
        match (param("g"), param("v"), param("as")) {
            (Some("apidiscovery.k8s.io"), Some("v2"), Some("APIGroupDiscoveryList")) => {
                return Some(("v2", encoding));
            }
            (Some("apidiscovery.k8s.io"), Some("v2beta1"), Some("APIGroupDiscoveryList")) => {
                return Some(("v2beta1", encoding));
            }
            _ => continue,
        }
    }
    None
}

/// Encodes a response value in the negotiated form. Protobuf is negotiated only for kinds
/// that have a protobuf form, so a value without one (which cannot be) is written as JSON.
pub fn encode(value: &impl serde::Serialize, output: Output) -> Vec<u8> {
    match output.encoding {
        Encoding::Protobuf => {
            let value = serde_json::to_value(value).expect("a JSON value encodes");
            super::protobuf::encode(&value).unwrap_or_else(|| {
                tracing::error!(kind = %value["kind"], "no protobuf form: answered in JSON");
                serde_json::to_vec(&value).expect("a JSON value encodes")
            })
        }
        Encoding::Yaml => serde_yaml_ng::to_string(value)
            .map(String::into_bytes)
            .unwrap_or_default(),
        Encoding::Json => {
            let mut out = serde_json::to_vec(value).expect("a JSON value encodes");
            out.push(b'\n');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(conversion: Conversion, version: MetaVersion) -> Output {
        Output {
            encoding: Encoding::Yaml,
            conversion: Some((conversion, version)),
        }
    }

    #[test]
    fn aggregated_discovery_is_served_when_asked_for_first() {
        let client_go = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
            application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,\
            application/json";
        let json = Encoding::Json;
        assert_eq!(aggregated_discovery(Some(client_go)), Some(("v2", json)));
        let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        assert_eq!(aggregated_discovery(Some(beta)), Some(("v2beta1", json)));
        assert_eq!(aggregated_discovery(Some("application/json")), None);
        assert_eq!(aggregated_discovery(None), None);
        // A version it does not serve is passed over for the next range.
        let v3 =
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_discovery(Some(v3)), None);
        let low = "application/json;q=0.5,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        assert_eq!(aggregated_discovery(Some(low)), Some(("v2", json)));

        // Protobuf, only where a range names it, in the client's order and by quality.
        let pb = Encoding::Protobuf;
        let pb_v2 = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let json_v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        assert_eq!(aggregated_discovery(Some(pb_v2)), Some(("v2", pb)));
        let both = format!("{pb_v2},{json_v2},application/json");
        assert_eq!(aggregated_discovery(Some(&both)), Some(("v2", pb)));
        let json_first = format!("{json_v2},{pb_v2}");
        assert_eq!(aggregated_discovery(Some(&json_first)), Some(("v2", json)));
        let pb_lower = format!("{pb_v2};q=0.9,{json_v2}");
        assert_eq!(aggregated_discovery(Some(&pb_lower)), Some(("v2", json)));
        // A plain protobuf range first asks for the unaggregated documents.
        let plain_pb = format!("application/vnd.kubernetes.protobuf,{json_v2}");
        assert_eq!(aggregated_discovery(Some(&plain_pb)), None);
        let pb_v3 = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList";
        assert_eq!(aggregated_discovery(Some(pb_v3)), None);
    }

    #[test]
    fn kubectl_and_clients_get_what_they_ask_for() {
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        let discovery =
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        let json = Ok(Output::Json);
        let yaml = Ok(Output::Yaml);
        let refused = Err(Refused::NotAcceptable);
        let cases = [
            (Some(kubectl_get), Answer::List, Ok(Output::Table)),
            (Some(kubectl_get), Answer::Plain, json),
            (None, Answer::Object, json),
            (
                Some("application/vnd.kubernetes.protobuf, */*"),
                Answer::Object,
                json,
            ),
            (
                Some("application/vnd.kubernetes.protobuf"),
                Answer::Object,
                refused,
            ),
            (Some("application/yaml"), Answer::List, yaml),
            (Some(discovery), Answer::Plain, json),
            (
                Some("application/json;q=0.1, application/yaml"),
                Answer::List,
                yaml,
            ),
            // goautoneg's order: a named type before `*/*` at the same quality.
            (Some("*/*, application/yaml"), Answer::Object, yaml),
            (Some("application/*"), Answer::Object, json),
            // A Table needs its group and version; any other conversion is passed over.
            (
                Some("application/json;as=Table, application/yaml"),
                Answer::List,
                yaml,
            ),
            (
                Some("application/json;as=Thing;g=meta.k8s.io;v=v1"),
                Answer::List,
                refused,
            ),
        ];
        for (accept, answer, expected) in cases {
            assert_eq!(output(accept, answer), expected, "{accept:?}");
        }
    }

    #[test]
    fn tables_and_metadata_come_in_yaml_and_in_v1beta1() {
        let table = "application/yaml;as=Table;v=v1beta1;g=meta.k8s.io";
        assert_eq!(
            output(Some(table), Answer::List),
            Ok(yaml(Conversion::Table, MetaVersion::V1Beta1))
        );
        let object = "application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1";
        assert_eq!(
            output(Some(object), Answer::Object),
            Ok(yaml(Conversion::Metadata, MetaVersion::V1Beta1))
        );
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1";
        assert_eq!(
            output(Some(list), Answer::List),
            Ok(Output {
                encoding: Encoding::Json,
                conversion: Some((Conversion::MetadataList, MetaVersion::V1Beta1)),
            })
        );
        // Whatever the conversion, the response is plain JSON or YAML.
        assert_eq!(
            output(Some(object), Answer::Object).unwrap().content_type(),
            "application/yaml"
        );
        assert_eq!(Output::Table.content_type(), "application/json");
    }

    #[test]
    fn metadata_clients_get_partial_objects_and_a_mismatch_is_refused_with_the_answer() {
        let object = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(output(Some(object), Answer::Object), Ok(Output::Metadata));
        assert_eq!(output(Some(object), Answer::Watch), Ok(Output::Metadata));
        assert_eq!(output(Some(object), Answer::Written), Ok(Output::Metadata));
        assert_eq!(output(Some(list), Answer::List), Ok(Output::MetadataList));
        assert_eq!(
            output(Some(object), Answer::Plain),
            Err(Refused::NotAcceptable)
        );
        // Negotiated, then refused once the answer is made, in kube-apiserver's words.
        let cm = crate::registry::Strategy::info(&crate::registry::configmaps::ConfigMaps);
        let refused = output(Some(object), Answer::List)
            .unwrap()
            .refusal(cm, true)
            .unwrap();
        assert_eq!((refused.code, refused.reason), (406, "NotAcceptable"));
        assert_eq!(
            refused.message,
            "you requested PartialObjectMetadata, but the requested object is a list \
             (*core.ConfigMapList)"
        );
        let lease = crate::registry::Strategy::info(&crate::registry::leases::Leases);
        assert_eq!(
            Output::MetadataList.refusal(lease, false).unwrap().message,
            "you requested PartialObjectMetadataList, but the requested object is not a list \
             (*coordination.Lease)"
        );
        let event = crate::registry::Strategy::info(&crate::registry::events_k8s_io::EventsK8sIo);
        assert!(
            Output::Metadata
                .refusal(event, true)
                .unwrap()
                .message
                .ends_with("(*core.EventList)")
        );
        assert_eq!(Output::Metadata.refusal(cm, false), None);
        assert_eq!(Output::Table.refusal(cm, true), None);
    }

    #[test]
    fn watches_stream_json_only() {
        assert_eq!(
            output(Some("application/yaml, application/json"), Answer::Watch),
            Err(Refused::NoStream)
        );
        assert_eq!(
            Refused::NoStream.status(false).message,
            "only the following media types are accepted: application/json;stream=watch"
        );
        assert_eq!(
            Refused::NotAcceptable.status(false).message,
            "only the following media types are accepted: application/json, application/yaml"
        );
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(output(Some(list), Answer::Watch), Ok(Output::Json));
        // Each event converted in the version asked for.
        let beta = |conversion| Output {
            encoding: Encoding::Json,
            conversion: Some((conversion, MetaVersion::V1Beta1)),
        };
        let beta_table = "application/json;as=Table;g=meta.k8s.io;v=v1beta1";
        assert_eq!(
            output(Some(beta_table), Answer::Watch),
            Ok(beta(Conversion::Table))
        );
        let beta_meta = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1";
        assert_eq!(
            output(
                Some(&format!("{beta_meta}, application/json")),
                Answer::Watch
            ),
            Ok(beta(Conversion::Metadata))
        );
        assert_eq!(
            output(Some("application/json;stream=watch"), Answer::Watch),
            Ok(Output::Json)
        );
        assert_eq!(
            output(
                Some("application/yaml;stream=watch, application/json"),
                Answer::Object
            ),
            Ok(Output::Json)
        );
    }
}
