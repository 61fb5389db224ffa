//! Content negotiation: which representation a request's `Accept` header asks for.
//!
//! The handlers negotiate JSON. A client that prefers YAML or protobuf (client-go's typed
//! clientset sends `application/vnd.kubernetes.protobuf,application/json`) is served by the
//! [output layer](super::output), which asks the handlers for JSON and re-encodes it; a
//! protobuf clause that reaches this module is skipped. Besides the plain object, the server
//! offers the transforms kube-apiserver offers on GET/LIST/WATCH, selected by media-type
//! parameters:
//!
//! | Accept clause | [`Output`] |
//! |---|---|
//! | absent, `application/json`, `application/*`, `*/*` | [`Output::Object`] |
//! | `application/json;as=Table;v=v1;g=meta.k8s.io` (or `v1beta1`) | [`Output::Table`] |
//! | `application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io` | [`Output::PartialObjectMetadata`] (single objects) |
//! | `application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io` | [`Output::PartialObjectMetadataList`] (lists) |
//!
//! Clauses are tried in order of their `q` value (stable, so equal `q` keeps the client's
//! order); the first one Herald can serve wins. When none can be served the answer is a 406
//! `NotAcceptable` [`Status`](herald_core::status::ApiError).
//!
//! ```
//! use herald_server::api::negotiate::{negotiate_output, MetaVersion, Output, Target};
//! let tbl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
//! assert_eq!(negotiate_output(Some(tbl), Target::List).unwrap(), Output::Table(MetaVersion::V1));
//! let pb = "application/vnd.kubernetes.protobuf,application/json";
//! assert_eq!(negotiate_output(Some(pb), Target::List).unwrap(), Output::Object);
//! assert_eq!(negotiate_output(Some("application/xml"), Target::List).unwrap_err().code, 406);
//! ```

use herald_core::status::ApiError;
use http::HeaderMap;

/// The `meta.k8s.io` version a transform was requested in; the response uses the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaVersion {
    /// `meta.k8s.io/v1`.
    V1,
    /// `meta.k8s.io/v1beta1` (older clients).
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

    fn parse(v: &str) -> Option<Self> {
        match v {
            "v1" => Some(MetaVersion::V1),
            "v1beta1" => Some(MetaVersion::V1Beta1),
            _ => None,
        }
    }
}

/// What the response body should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The object or list itself, as JSON.
    Object,
    /// A `Table` (server-side printing).
    Table(MetaVersion),
    /// A `PartialObjectMetadata` (kind, apiVersion, metadata only) for a single object.
    PartialObjectMetadata(MetaVersion),
    /// A `PartialObjectMetadataList` for a list.
    PartialObjectMetadataList(MetaVersion),
}

/// Whether the request addresses one object or a collection. Transforms that do not fit the
/// target (`PartialObjectMetadataList` on a single object, and the reverse) are skipped, so a
/// client's JSON fallback clause is used instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// GET of one object (or a watch, whose events carry single objects).
    Object,
    /// LIST.
    List,
}

/// Which discovery document format `/api` and `/apis` should answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// `APIVersions` / `APIGroupList` as plain `application/json`.
    Legacy,
    /// `APIGroupDiscoveryList` in `apidiscovery.k8s.io/v2`.
    AggregatedV2,
    /// `APIGroupDiscoveryList` in `apidiscovery.k8s.io/v2beta1`.
    AggregatedV2Beta1,
}

impl DiscoveryFormat {
    /// The exact response Content-Type. client-go only decodes aggregated discovery when the
    /// Content-Type carries these parameters.
    pub fn content_type(self) -> &'static str {
        match self {
            DiscoveryFormat::Legacy => "application/json",
            DiscoveryFormat::AggregatedV2 => {
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            }
            DiscoveryFormat::AggregatedV2Beta1 => {
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            }
        }
    }

    /// The `apiVersion` of the aggregated document (`None` for legacy).
    pub fn api_version(self) -> Option<&'static str> {
        match self {
            DiscoveryFormat::Legacy => None,
            DiscoveryFormat::AggregatedV2 => Some("apidiscovery.k8s.io/v2"),
            DiscoveryFormat::AggregatedV2Beta1 => Some("apidiscovery.k8s.io/v2beta1"),
        }
    }
}

/// One clause of an Accept header.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaRange {
    /// Lower-cased type, e.g. `application` or `*`.
    pub type_: String,
    /// Lower-cased subtype, e.g. `json` or `*`.
    pub subtype: String,
    /// Parameters other than `q`, keys lower-cased, values as sent (quotes removed).
    pub params: Vec<(String, String)>,
    /// The `q` weight (1.0 when absent or unparsable).
    pub q: f32,
}

impl MediaRange {
    /// The value of parameter `key` (lower-case), if present.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// True for `application/json`, `application/*` and `*/*`.
    fn is_json(&self) -> bool {
        matches!(
            (self.type_.as_str(), self.subtype.as_str()),
            ("application", "json") | ("application", "*") | ("*", "*")
        )
    }
}

/// Upper bound on the number of clauses examined; clauses past it are ignored, so a hostile
/// header cannot make negotiation expensive.
pub const MAX_ACCEPT_CLAUSES: usize = 64;

/// Parses an Accept header into clauses sorted by descending `q` (stable). Malformed clauses
/// (no `/`) are dropped; at most [`MAX_ACCEPT_CLAUSES`] are kept.
pub fn parse_accept(header: &str) -> Vec<MediaRange> {
    let mut out: Vec<MediaRange> = header
        .split(',')
        .take(MAX_ACCEPT_CLAUSES)
        .filter_map(|clause| {
            let mut parts = clause.split(';');
            let full = parts.next()?.trim().to_ascii_lowercase();
            let (type_, subtype) = full.split_once('/')?;
            if type_.is_empty() || subtype.is_empty() {
                return None;
            }
            let mut q = 1.0f32;
            let mut params = Vec::new();
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let k = k.trim().to_ascii_lowercase();
                let v = v.trim().trim_matches('"').to_string();
                if k == "q" {
                    q = v.parse().unwrap_or(1.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(MediaRange {
                type_: type_.to_string(),
                subtype: subtype.to_string(),
                params,
                q,
            })
        })
        .filter(|m| m.q > 0.0)
        .collect();
    out.sort_by(|a, b| b.q.partial_cmp(&a.q).unwrap_or(std::cmp::Ordering::Equal));
    out
}

/// All `Accept` header values of a request joined with `,` (`None` when there is none).
pub fn accept_header(headers: &HeaderMap) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

/// The error for an Accept header Herald cannot satisfy.
pub fn not_acceptable() -> ApiError {
    ApiError::not_acceptable(
        "only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    )
}

/// Picks the representation for a GET/LIST/WATCH response. An absent or blank header means
/// plain JSON; otherwise the first servable clause wins, and none servable is a 406.
pub fn negotiate_output(accept: Option<&str>, target: Target) -> Result<Output, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::Object);
    };
    for m in parse_accept(accept) {
        if !m.is_json() {
            continue;
        }
        let Some(as_) = m.param("as") else {
            return Ok(Output::Object);
        };
        if m.param("g") != Some("meta.k8s.io") {
            continue;
        }
        let Some(v) = m.param("v").and_then(MetaVersion::parse) else {
            continue;
        };
        let out = match (as_, target) {
            ("Table", _) => Output::Table(v),
            ("PartialObjectMetadata", Target::Object) => Output::PartialObjectMetadata(v),
            ("PartialObjectMetadataList", Target::List) => Output::PartialObjectMetadataList(v),
            _ => continue,
        };
        return Ok(out);
    }
    Err(not_acceptable())
}

/// Picks the discovery format for `/api` and `/apis`: aggregated only when a clause asks for
/// `as=APIGroupDiscoveryList;g=apidiscovery.k8s.io` in a known version before any plain JSON
/// clause; legacy for plain JSON, `*/*` or no header; 406 otherwise.
pub fn negotiate_discovery(accept: Option<&str>) -> Result<DiscoveryFormat, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(DiscoveryFormat::Legacy);
    };
    for m in parse_accept(accept) {
        if !m.is_json() {
            continue;
        }
        let Some(as_) = m.param("as") else {
            return Ok(DiscoveryFormat::Legacy);
        };
        if as_ != "APIGroupDiscoveryList" || m.param("g") != Some("apidiscovery.k8s.io") {
            continue;
        }
        match m.param("v") {
            Some("v2") => return Ok(DiscoveryFormat::AggregatedV2),
            Some("v2beta1") => return Ok(DiscoveryFormat::AggregatedV2Beta1),
            _ => continue,
        }
    }
    Err(not_acceptable())
}

/// `includeObject` of a Table request: what each row's `object` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// `null`.
    None,
    /// A `PartialObjectMetadata` (the default; kubectl needs it for NAMESPACE and labels).
    #[default]
    Metadata,
    /// The full object in the requested version (`kubectl get --sort-by` asks for it).
    Object,
}

impl IncludeObject {
    /// Parses the query value of a Table request (kube's `ValidateTableOptions`): absent or
    /// empty means [`IncludeObject::Metadata`]; an unknown value is kube-apiserver's 400
    /// `Unable to convert to Table as requested: includeObject: Invalid value: "x": must be
    /// 'Metadata', 'Object', 'None', or empty`.
    pub fn from_query(v: Option<&str>) -> Result<Self, ApiError> {
        match v.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => {
                let cause = herald_core::event::causes::invalid(
                    "includeObject",
                    other,
                    "must be 'Metadata', 'Object', 'None', or empty",
                );
                Err(ApiError::bad_request(format!(
                    "Unable to convert to Table as requested: {}: {}",
                    cause.field, cause.message
                )))
            }
        }
    }

    /// The `includeObject` of a response of `out`: parsed ([`IncludeObject::from_query`])
    /// only for a Table, the one output it applies to; every other output ignores the
    /// parameter, whatever its value, as kube-apiserver does.
    pub fn for_output(out: Output, v: Option<&str>) -> Result<Self, ApiError> {
        match out {
            Output::Table(_) => Self::from_query(v),
            _ => Ok(IncludeObject::Metadata),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGG: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const TBL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn plain_json_and_wildcards() {
        for a in [
            None,
            Some(""),
            Some("application/json"),
            Some("application/json, */*"),
            Some("*/*"),
            Some("application/*"),
        ] {
            assert_eq!(
                negotiate_output(a, Target::List).unwrap(),
                Output::Object,
                "{a:?}"
            );
        }
    }

    #[test]
    fn protobuf_first_falls_back_to_json() {
        let a = Some("application/vnd.kubernetes.protobuf,application/json");
        assert_eq!(negotiate_output(a, Target::Object).unwrap(), Output::Object);
        let only_pb = Some("application/vnd.kubernetes.protobuf");
        assert_eq!(
            negotiate_output(only_pb, Target::Object).unwrap_err().code,
            406
        );
    }

    #[test]
    fn table_v1_and_v1beta1() {
        assert_eq!(
            negotiate_output(Some(TBL), Target::List).unwrap(),
            Output::Table(MetaVersion::V1)
        );
        let beta = "application/json;as=Table;v=v1beta1;g=meta.k8s.io";
        assert_eq!(
            negotiate_output(Some(beta), Target::Object).unwrap(),
            Output::Table(MetaVersion::V1Beta1)
        );
        // Parameter order and spacing do not matter.
        let odd = "application/json; g=meta.k8s.io; v=v1; as=Table";
        assert_eq!(
            negotiate_output(Some(odd), Target::List).unwrap(),
            Output::Table(MetaVersion::V1)
        );
    }

    #[test]
    fn unknown_transform_skipped_then_406() {
        let a = "application/json;as=Bogus;v=v1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate_output(Some(a), Target::List).unwrap(),
            Output::Object
        );
        let a = "application/json;as=Table;v=v9;g=meta.k8s.io";
        let err = negotiate_output(Some(a), Target::List).unwrap_err();
        assert_eq!(err.code, 406);
        assert_eq!(err.reason.as_str(), "NotAcceptable");
        assert_eq!(
            negotiate_output(Some("text/html"), Target::List)
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn partial_object_metadata_by_target() {
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate_output(Some(list), Target::List).unwrap(),
            Output::PartialObjectMetadataList(MetaVersion::V1)
        );
        assert_eq!(
            negotiate_output(Some(list), Target::Object)
                .unwrap_err()
                .code,
            406
        );
        let one = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            negotiate_output(Some(one), Target::Object).unwrap(),
            Output::PartialObjectMetadata(MetaVersion::V1)
        );
        assert_eq!(
            negotiate_output(Some(one), Target::List).unwrap(),
            Output::Object
        );
    }

    #[test]
    fn q_values_reorder() {
        let a = "application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(
            negotiate_output(Some(a), Target::List).unwrap(),
            Output::Table(MetaVersion::V1)
        );
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io;q=0,application/json";
        assert_eq!(
            negotiate_output(Some(a), Target::List).unwrap(),
            Output::Object
        );
    }

    #[test]
    fn discovery_formats() {
        assert_eq!(
            negotiate_discovery(Some(AGG)).unwrap(),
            DiscoveryFormat::AggregatedV2
        );
        let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        assert_eq!(
            negotiate_discovery(Some(beta)).unwrap(),
            DiscoveryFormat::AggregatedV2Beta1
        );
        assert_eq!(
            negotiate_discovery(Some("application/json, */*")).unwrap(),
            DiscoveryFormat::Legacy
        );
        assert_eq!(negotiate_discovery(None).unwrap(), DiscoveryFormat::Legacy);
        assert_eq!(
            negotiate_discovery(Some("text/plain")).unwrap_err().code,
            406
        );
        assert_eq!(
            DiscoveryFormat::AggregatedV2.content_type(),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
    }

    #[test]
    fn include_object_values() {
        assert_eq!(
            IncludeObject::from_query(None).unwrap(),
            IncludeObject::Metadata
        );
        assert_eq!(
            IncludeObject::from_query(Some("None")).unwrap(),
            IncludeObject::None
        );
        assert_eq!(
            IncludeObject::from_query(Some("Object")).unwrap(),
            IncludeObject::Object
        );
        let e = IncludeObject::from_query(Some("all")).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            r#"Unable to convert to Table as requested: includeObject: Invalid value: "all": must be 'Metadata', 'Object', 'None', or empty"#
        );
        // Only a Table reads it.
        for out in [
            Output::Object,
            Output::PartialObjectMetadata(MetaVersion::V1),
            Output::PartialObjectMetadataList(MetaVersion::V1),
        ] {
            assert_eq!(
                IncludeObject::for_output(out, Some("all")).unwrap(),
                IncludeObject::Metadata
            );
        }
        assert_eq!(
            IncludeObject::for_output(Output::Table(MetaVersion::V1), Some("all"))
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn accept_header_joins_values() {
        let mut h = HeaderMap::new();
        assert_eq!(accept_header(&h), None);
        h.append(http::header::ACCEPT, "application/json".parse().unwrap());
        h.append(http::header::ACCEPT, "*/*".parse().unwrap());
        assert_eq!(accept_header(&h).as_deref(), Some("application/json,*/*"));
    }

    #[test]
    fn parse_caps_clauses() {
        let long = vec!["application/json"; 500].join(",");
        assert_eq!(parse_accept(&long).len(), MAX_ACCEPT_CLAUSES);
        assert!(parse_accept("garbage,,;;").is_empty());
    }
}
