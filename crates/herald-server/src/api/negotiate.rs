//! Content negotiation: which representation a request's `Accept` header asks for.
//!
//! Every request is negotiated once, into a [`Negotiated`] value: its wire [`Encoding`]
//! (JSON, indented JSON, YAML or protobuf: client-go's typed clientset sends
//! `application/vnd.kubernetes.protobuf,application/json`) and the representation the
//! handler writes. Besides the plain object, the server offers the transforms kube-apiserver
//! offers on GET/LIST/WATCH, selected by media-type parameters (a protobuf clause that
//! reaches this choice is skipped):
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
pub use herald_wire::table::{IncludeObject, MetaVersion};
use http::{HeaderMap, header};

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

impl Output {
    /// The `includeObject` of a response of `out`: parsed ([`IncludeObject::from_query`])
    /// only for a Table, the one output it applies to; every other output ignores the
    /// parameter, whatever its value, as kube-apiserver does.
    pub fn include_object(self, v: Option<&str>) -> Result<IncludeObject, ApiError> {
        match self {
            Output::Table(_) => IncludeObject::from_query(v),
            _ => Ok(IncludeObject::Metadata),
        }
    }
}

/// How a response body goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JSON as the handler wrote it.
    Json,
    /// JSON indented (`?pretty=true`, or curl, Wget and browsers unless `pretty=false`).
    PrettyJson,
    /// YAML, re-encoded from the handler's JSON.
    Yaml,
    /// Kubernetes' protobuf: written by the handler where it has the event at hand (an
    /// event, a list, a watch's frames), else re-encoded from its JSON.
    Protobuf,
}

/// What a request asked its answer to be, decided once per request: by the
/// [output layer](super::output), which every request passes, and handed to the handlers as
/// a request extension (extract it as an argument; without the layer it is computed from
/// the request the same way).
///
/// - [`Negotiated::encoding`] is the wire encoding: the first clause of `Accept` Herald can
///   serve names JSON, plain `application/yaml` or plain protobuf; a watch streams JSON lines
///   or protobuf frames (YAML is not a watch encoding: such a watch gets a 406).
/// - [`Negotiated::output`] is the representation the handler writes (the object, a
///   `Table`, `PartialObjectMetadata`), from the `Accept` clauses; for a YAML or protobuf
///   answer it is the object, which the layer (or the handler) encodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The wire encoding of the answer.
    pub encoding: Encoding,
    /// The request streams a watch ([`is_watch`](super::path::is_watch)).
    pub watch: bool,
    /// The `Accept` header the representation is chosen from: the client's, or none where
    /// the encoding is YAML or protobuf (the handlers then write the plain object).
    accept: Option<String>,
}

impl Negotiated {
    /// Negotiates the answer of a request to `uri` with `headers`.
    pub fn of(uri: &http::Uri, headers: &HeaderMap) -> Self {
        let watch = super::path::is_watch(
            uri.path(),
            query_value(uri.query(), "watch")
                .is_some_and(|v| crate::registry::options::parse_bool(&v)),
        );
        let encoding = match (preferred(headers), watch) {
            (Preferred::Protobuf, _) => Encoding::Protobuf,
            // Watches are JSON lines; the handler answers a YAML-only one with 406.
            (_, true) => Encoding::Json,
            (Preferred::Yaml, false) => Encoding::Yaml,
            (Preferred::Json, false) if wants_pretty(uri, headers) => Encoding::PrettyJson,
            (Preferred::Json, false) => Encoding::Json,
        };
        let accept = match encoding {
            Encoding::Yaml | Encoding::Protobuf => None,
            Encoding::Json | Encoding::PrettyJson => accept_header(headers),
        };
        Negotiated {
            encoding,
            watch,
            accept,
        }
    }

    /// The representation of a GET/LIST/WATCH answer ([`negotiate_output`]).
    pub fn output(&self, target: Target) -> Result<Output, ApiError> {
        negotiate_output(self.accept.as_deref(), target)
    }

    /// The discovery format of `/api` and `/apis` ([`negotiate_discovery`]).
    pub fn discovery(&self) -> Result<DiscoveryFormat, ApiError> {
        negotiate_discovery(self.accept.as_deref())
    }

    /// The answer is protobuf.
    pub fn protobuf(&self) -> bool {
        self.encoding == Encoding::Protobuf
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Negotiated {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(match parts.extensions.get::<Negotiated>() {
            Some(n) => n.clone(),
            None => Negotiated::of(&parts.uri, &parts.headers),
        })
    }
}

/// The first `?key=…` value (kube-apiserver reads the first of repeated keys), the key and
/// value percent-decoded as the handlers decode them; `None` when absent.
pub fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    let query = query?;
    // The common case skips the parse; an encoded key (`wat%63h`) must not.
    if !query.contains(key) && !query.contains('%') {
        return None;
    }
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// What the first clause of `Accept` that Herald can serve names, as far as this layer is
/// concerned: plain `application/yaml`, plain protobuf, or JSON (any JSON clause, a
/// transform such as `as=Table` included, `*/*`, or no header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Preferred {
    Json,
    Yaml,
    Protobuf,
}

fn preferred(headers: &HeaderMap) -> Preferred {
    // Most requests name neither; they are answered without parsing the header.
    let mentions_other = headers.get_all(header::ACCEPT).iter().any(|v| {
        let v = v.as_bytes();
        memchr::memmem::find(v, b"yaml").is_some() || memchr::memmem::find(v, b"protobuf").is_some()
    });
    if !mentions_other {
        return Preferred::Json;
    }
    let Some(accept) = accept_header(headers) else {
        return Preferred::Json;
    };
    for m in parse_accept(&accept) {
        match (m.type_.as_str(), m.subtype.as_str()) {
            ("application", "yaml") if m.params.is_empty() => return Preferred::Yaml,
            // `stream=watch` is how a watch may name it; a transform (`as=…`) is JSON only.
            ("application", "vnd.kubernetes.protobuf")
                if m.params.iter().all(|(k, _)| k == "stream") =>
            {
                return Preferred::Protobuf;
            }
            ("application", "json" | "*") | ("*", "*") => return Preferred::Json,
            _ => {}
        }
    }
    Preferred::Json
}

/// `pretty=true`, or no `pretty` and a user agent kube-apiserver pretty-prints for. As there,
/// a non-empty `pretty` is read as Go's `strconv.ParseBool` (anything it cannot read is
/// false) and decides alone.
fn wants_pretty(uri: &http::Uri, headers: &HeaderMap) -> bool {
    if let Some(p) = query_value(uri.query(), "pretty").filter(|p| !p.is_empty()) {
        return matches!(p.as_str(), "1" | "t" | "T" | "true" | "True" | "TRUE");
    }
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| {
            ["curl", "Wget", "Mozilla/5.0"]
                .iter()
                .any(|p| ua.starts_with(p))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        h
    }

    #[test]
    fn yaml_or_protobuf_only_when_it_comes_before_json() {
        use Preferred::*;
        for (accept, want) in [
            ("application/yaml", Yaml),
            ("application/yaml, application/json", Yaml),
            ("application/json;q=0.5, application/yaml", Yaml),
            ("application/json, application/yaml", Json),
            ("*/*, application/yaml", Json),
            ("application/yaml;as=Table;v=v1;g=meta.k8s.io", Json),
            ("application/vnd.kubernetes.protobuf", Protobuf),
            (
                "application/vnd.kubernetes.protobuf,application/json",
                Protobuf,
            ),
            ("application/vnd.kubernetes.protobuf;stream=watch", Protobuf),
            ("application/json,application/vnd.kubernetes.protobuf", Json),
            (
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                Json,
            ),
            (
                "application/vnd.kubernetes.protobuf;q=0.1,application/yaml",
                Yaml,
            ),
            ("text/html", Json),
        ] {
            assert_eq!(preferred(&headers(accept)), want, "{accept}");
        }
        assert_eq!(preferred(&HeaderMap::new()), Json);
    }

    #[test]
    fn query_values_are_the_first_decoded_value() {
        let uris: Vec<http::Uri> = [
            "/x?pretty=true",
            "/x?pretty=1&a=b",
            "/x?pretty=false",
            "/x?pretty=maybe",
            "/x?prettyish=1",
            "/x?watch=%74rue",
            "/x",
            "/x?wat%63h=1",
            "/x?watch=1&watch=0",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let uri = |s: &str| uris.iter().find(|u| *u == s).unwrap().query();
        let value = |s: &str, key: &str| query_value(uri(s), key);
        assert_eq!(value("/x?pretty=true", "pretty").as_deref(), Some("true"));
        assert_eq!(value("/x?pretty=1&a=b", "pretty").as_deref(), Some("1"));
        assert_eq!(value("/x?pretty=false", "pretty").as_deref(), Some("false"));
        assert_eq!(value("/x?pretty=maybe", "pretty").as_deref(), Some("maybe"));
        assert_eq!(value("/x?prettyish=1", "pretty"), None);
        assert_eq!(value("/x?watch=%74rue", "watch").as_deref(), Some("true"));
        assert_eq!(value("/x", "watch"), None);
        assert_eq!(value("/x?wat%63h=1", "watch").as_deref(), Some("1"));
        assert_eq!(value("/x?watch=1&watch=0", "watch").as_deref(), Some("1"));
    }

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
                out.include_object(Some("all")).unwrap(),
                IncludeObject::Metadata
            );
        }
        assert_eq!(
            Output::Table(MetaVersion::V1)
                .include_object(Some("all"))
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
