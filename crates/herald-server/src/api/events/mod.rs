//! The events endpoints: `/api/v1[/namespaces/{ns}]/events[/{name}]` and the same under
//! `/apis/events.k8s.io/v1`, over one [`EventRegistry`].
//!
//! - Every handler takes the request's [`Negotiated`] answer (decided once, by the output
//!   layer) and passes it down: GET/LIST/WATCH answer JSON, `Table` (with `includeObject`)
//!   or `PartialObjectMetadata[List]`, and protobuf where negotiated; watches stream one `{"type":…,"object":…}` JSON line per
//!   event over chunked transfer encoding, Table-transformed when asked. The lines of the
//!   events that are ready together go out as one chunk; a plain JSON line of a change is
//!   encoded once and the bytes shared by every watcher without selectors.
//! - Writes take JSON, YAML or protobuf bodies of at most [`MAX_BODY_BYTES`] (413 beyond;
//!   [`EventsApi::with_max_body`] changes it), 415 for other content types,
//!   `fieldValidation` (Strict/Warn/Ignore), `dryRun=All` and `fieldManager` (recorded in
//!   `managedFields`; required for server-side apply). A protobuf body is decoded to the
//!   event the JSON path would make of it ([`protobuf::event_body`]).
//! - A protobuf watch streams length-framed `WatchEvent`s; the frame of a change is made
//!   once and shared, as the JSON line is ([`render`]).
//! - DELETE answers a `Status` Success, or, for an event its finalizers keep (marked as being
//!   deleted), the event itself: 200, or 202 when the request set `orphanDependents: false`.
//! - Every failure is a `Status`; no input makes a handler panic.
//!
//! ```no_run
//! use std::sync::Arc;
//! use herald_core::clock::SystemClock;
//! use herald_server::api::{self, ApiState, events::EventsApi};
//! use herald_server::registry::{EventRegistry, RegistryOptions};
//! use herald_server::storage::{HistoryOptions, MemoryBackend};
//! # async fn run() -> std::io::Result<()> {
//! let clock = Arc::new(SystemClock);
//! let backend = Arc::new(MemoryBackend::new(clock.clone(), HistoryOptions::default()));
//! let registry = EventRegistry::new(backend, clock.clone(), RegistryOptions::default());
//! let events = EventsApi::new(registry, clock.clone()).router();
//! let app = api::router_with(ApiState::new(clock), events);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! api::serve(listener, app, std::future::pending()).await
//! # }
//! ```

pub mod render;

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use herald_core::clock::Clock;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::status::ApiError;
use herald_wire::body::{
    BodyFormat, EventSeed, decode_body_as, decode_json_body, parse_json_object, parse_object,
};
use herald_wire::protobuf;
use herald_wire::schema::GroupVersion;
use herald_wire::schema::known_fields::decode_if_known;
use herald_wire::stored::Stored;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::auth::UserInfo;
use super::compression::Streaming;
use super::error::StatusError;
use super::field_validation::{FieldValidation, add_warnings, check_fields, duplicate_fields};
use super::metrics::{Metrics, WatchGuard};
use super::negotiate::{Negotiated, Output, Target};
use super::path::ApiPath;
use crate::registry::options::{self, parse_bool};
use crate::registry::write::{check_options, check_segment, check_update_options};
use crate::registry::{
    DeleteParams, Deletion, EventRegistry, EventWatch, ListParams, PatchKind, WatchItem,
    WriteOptions,
};

use herald_wire::limits::MAX_BODY_BYTES;

/// The events API: registry, clock (Table ages), shutdown signal for open watches, metrics.
#[derive(Clone)]
pub struct EventsApi {
    registry: EventRegistry,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
    metrics: Option<Arc<Metrics>>,
    max_body: usize,
}

impl std::fmt::Debug for EventsApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventsApi")
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

/// A group's handler state; axum clones it for every request, so the API sits behind one
/// `Arc` rather than being cloned field by field (four reference counts per request).
#[derive(Clone)]
struct GroupState {
    api: Arc<EventsApi>,
    group: ApiGroup,
}

type Res = Result<Response, StatusError>;

impl EventsApi {
    /// The API over `registry`; Table ages are computed on `clock`.
    pub fn new(registry: EventRegistry, clock: Arc<dyn Clock>) -> Self {
        EventsApi {
            registry,
            clock,
            shutdown: CancellationToken::new(),
            metrics: None,
            max_body: MAX_BODY_BYTES,
        }
    }

    /// Ends every open watch stream when `token` is cancelled (graceful shutdown).
    pub fn with_shutdown(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// Counts watches in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Overrides the body size limit (bytes).
    pub fn with_max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The routes of both groups, state applied, without fallbacks (merge it with
    /// [`crate::api::router_with`]).
    pub fn router(self) -> Router {
        let api = Arc::new(self);
        let mut r = Router::new();
        for (base, group) in [
            ("/api/v1", ApiGroup::Core),
            ("/apis/events.k8s.io/v1", ApiGroup::EventsV1),
        ] {
            let st = GroupState {
                api: api.clone(),
                group,
            };
            let g = Router::new()
                .route(&format!("{base}/events"), get(list_all))
                .route(
                    &format!("{base}/namespaces/{{ns}}/events"),
                    get(list_ns).post(create).delete(delete_collection),
                )
                .route(
                    &format!("{base}/namespaces/{{ns}}/events/{{name}}"),
                    get(get_one).put(update).patch(patch).delete(delete_one),
                )
                // The deprecated watch paths kube-apiserver still serves.
                .route(&format!("{base}/watch/events"), get(watch_all))
                .route(
                    &format!("{base}/watch/namespaces/{{ns}}/events"),
                    get(watch_ns),
                )
                .route(
                    &format!("{base}/watch/namespaces/{{ns}}/events/{{name}}"),
                    get(watch_one),
                )
                .with_state(st);
            r = r.merge(g);
        }
        r
    }
}

fn query_pairs(uri: &http::Uri) -> Result<Vec<(String, String)>, ApiError> {
    Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))
}

/// The first value of `key`: kube-apiserver decodes its options from the first of repeated
/// query keys.
fn q<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn list_params(pairs: &[(String, String)]) -> Result<ListParams, ApiError> {
    ListParams::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// Every `dryRun` value of the query, in order (kube decodes the parameter as a list). The
/// registry's options validation refuses any but `All` (422).
fn dry_run_values(pairs: &[(String, String)]) -> Vec<String> {
    pairs
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.clone())
        .collect()
}

/// The answer to a write or a GET: the event in `group`'s shape, encoded straight from it as
/// protobuf when the client asked for protobuf (kubelet's recorder patches events this way),
/// else as JSON (which the output layer turns into YAML where asked). A core/v1 JSON answer
/// is the `stored` bytes where given, with `kind`, `apiVersion` and the resourceVersion put
/// in (no second encoding); events.k8s.io/v1 JSON is written straight from the event (no
/// `Value` tree); core/v1 otherwise through its canonical JSON.
fn event_response(
    code: StatusCode,
    group: ApiGroup,
    event: CoreEvent,
    stored: Option<&Stored>,
    neg: &Negotiated,
) -> Res {
    if neg.protobuf() {
        return Ok(protobuf_response(
            code,
            Body::from(protobuf::event_object(group, &event)),
        ));
    }
    if group == ApiGroup::Core
        && let Some(stored) = stored
    {
        let mut body = Vec::with_capacity(stored.bytes.len() + 64);
        if render::stored_object_into(&mut body, group, &stored.bytes, stored.revision).is_ok() {
            return Ok(json_bytes_response(code, body));
        }
    }
    match group {
        ApiGroup::Core => Ok(json_response(
            code,
            &herald_wire::json::event_json(group, &event),
        )),
        ApiGroup::EventsV1 => {
            let mut body = Vec::with_capacity(1536);
            herald_wire::json::write_events_v1_object(&mut body, event)
                .map_err(|e| ApiError::internal(format!("encoding the event: {e}")))?;
            Ok(json_bytes_response(code, body))
        }
    }
}

fn json_response(code: StatusCode, v: &Value) -> Response {
    json_bytes_response(code, serde_json::to_vec(v).unwrap_or_default())
}

/// An answer of `content_type`, whole or streamed.
fn typed_response(code: StatusCode, body: Body, content_type: &'static str) -> Response {
    let mut resp = (code, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// A protobuf answer (a wrapped object, whole or in parts).
fn protobuf_response(code: StatusCode, body: Body) -> Response {
    typed_response(code, body, protobuf::MEDIA_TYPE)
}

fn json_bytes_response(code: StatusCode, body: Vec<u8>) -> Response {
    typed_response(code, Body::from(body), "application/json")
}

fn segments(ns: &str, name: Option<&str>) -> Result<(), ApiError> {
    check_segment("namespace", ns)?;
    if let Some(n) = name {
        check_segment("resource name", n)?;
    }
    Ok(())
}

async fn read_body(req: Request, limit: usize) -> Result<(HeaderMap, Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    if let Some(len) = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        && len > limit as u64
    {
        return Err(too_large(limit));
    }
    match axum::body::to_bytes(body, limit).await {
        Ok(b) => Ok((parts.headers, b)),
        Err(e) => {
            // axum wraps http-body-util's `LengthLimitError` ("length limit exceeded").
            let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            while let Some(s) = src {
                if s.to_string().contains("length limit exceeded") {
                    return Err(too_large(limit));
                }
                src = s.source();
            }
            Err(ApiError::bad_request(format!(
                "error reading request body: {e}"
            )))
        }
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::too_large(format_args!("limit is {limit}"))
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

// ---- reads -------------------------------------------------------------------------------

async fn list_all(State(st): State<GroupState>, neg: Negotiated, req: Request) -> Res {
    read(st, None, None, false, neg, req).await
}

async fn list_ns(
    State(st): State<GroupState>,
    ApiPath(ns): ApiPath<String>,
    neg: Negotiated,
    req: Request,
) -> Res {
    read(st, Some(ns), None, false, neg, req).await
}

/// GET of one event. As in kube-apiserver, `?watch` does not apply here: a watch of one
/// event is a list path with `fieldSelector=metadata.name=…`, or the deprecated
/// `/watch/…/events/{name}`.
async fn get_one(
    State(st): State<GroupState>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    neg: Negotiated,
    req: Request,
) -> Res {
    read(st, Some(ns), Some(name), false, neg, req).await
}

async fn watch_all(State(st): State<GroupState>, neg: Negotiated, req: Request) -> Res {
    read(st, None, None, true, neg, req).await
}

async fn watch_ns(
    State(st): State<GroupState>,
    ApiPath(ns): ApiPath<String>,
    neg: Negotiated,
    req: Request,
) -> Res {
    read(st, Some(ns), None, true, neg, req).await
}

/// The deprecated watch of one event: the watch of its namespace narrowed to its name (a
/// field selector naming another is a 400).
async fn watch_one(
    State(st): State<GroupState>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    neg: Negotiated,
    req: Request,
) -> Res {
    read(st, Some(ns), Some(name), true, neg, req).await
}

async fn read(
    st: GroupState,
    ns: Option<String>,
    name: Option<String>,
    watch_path: bool,
    neg: Negotiated,
    req: Request,
) -> Res {
    if let Some(ns) = &ns {
        segments(ns, name.as_deref())?;
    }
    let pairs = query_pairs(req.uri())?;
    let p = list_params(&pairs)?;
    // Checked only for a Table, and as kube-apiserver does, once the read succeeded.
    let include = |out: Output| out.include_object(q(&pairs, "includeObject"));
    let group = st.group;
    let registry = &st.api.registry;
    if watch_path || (p.watch && name.is_none()) {
        let out = neg.output(Target::Object)?;
        let w = registry
            .watch(group, ns.as_deref(), name.as_deref(), &p)
            .await?;
        if neg.protobuf() && out == Output::Object {
            let frames = move |batch: Vec<WatchItem>| {
                let mut chunk = Vec::new();
                for frame in batch
                    .into_iter()
                    .filter_map(|item| render::protobuf_frame(group, item))
                {
                    chunk.extend_from_slice(&frame);
                }
                Bytes::from(chunk)
            };
            return Ok(stream_response(
                &st.api,
                w,
                protobuf::WATCH_MEDIA_TYPE,
                frames,
            ));
        }
        let mut lines = render::WatchLines::new(group, out, include(out)?, st.api.clock.clone());
        let chunks = move |batch: Vec<WatchItem>| {
            let lines: Vec<Bytes> = batch
                .into_iter()
                .filter_map(|item| lines.line(item))
                .collect();
            // One chunk (one write) per batch.
            match <[Bytes; 1]>::try_from(lines) {
                Ok([one]) => one,
                Err(lines) => Bytes::from(lines.concat()),
            }
        };
        return Ok(stream_response(&st.api, w, "application/json", chunks));
    }
    let now = st.api.clock.now();
    match name {
        Some(name) => {
            let out = neg.output(Target::Object)?;
            let ns = ns.unwrap_or_default();
            let stored = registry.get(group, &ns, &name, p.rv()).await?;
            let e = stored.decode()?;
            if out == Output::Object {
                return event_response(StatusCode::OK, group, e, Some(&stored), &neg);
            }
            Ok(json_response(
                StatusCode::OK,
                &render::object(group, &e, out, include(out)?, now, false),
            ))
        }
        None => {
            let out = neg.output(Target::List)?;
            if out == Output::Object && neg.protobuf() {
                // The envelope's length prefix needs every item: a list of one page is
                // encoded whole; a longer one is read twice, for its length, then to send.
                let (l, rest) = registry.list_streamed(group, ns.as_deref(), &p).await?;
                if let Some(rest) = rest {
                    let again = same_snapshot(&p, &l.resource_version);
                    let registry = registry.clone();
                    let body = render::streamed_protobuf_list(group, l, rest, move || async move {
                        registry.list_streamed(group, ns.as_deref(), &again).await
                    });
                    return Ok(protobuf_response(StatusCode::OK, Body::from_stream(body)));
                }
                let parts = render::protobuf_list(group, l).await?;
                // The length is known: with it the compression layer leaves small lists
                // alone, as it does JSON ones.
                let len: usize = parts.iter().map(Vec::len).sum();
                let body = Body::from_stream(futures::stream::iter(
                    parts
                        .into_iter()
                        .map(|c| Ok::<_, Infallible>(Bytes::from(c))),
                ));
                let mut resp = protobuf_response(StatusCode::OK, body);
                resp.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
                return Ok(resp);
            }
            let (l, rest) = registry.list_streamed(group, ns.as_deref(), &p).await?;
            let shape = render::ListShape::of(out, include(out)?, now);
            if let Some(rest) = rest {
                let body = Body::from_stream(render::streamed_list(group, shape, l, rest));
                return Ok(typed_response(StatusCode::OK, body, "application/json"));
            }
            if shape.decodes(group) && l.items.len() > render::LIST_BLOCK {
                let body = Body::from_stream(render::parallel_list(group, shape, l));
                return Ok(typed_response(StatusCode::OK, body, "application/json"));
            }
            let mut chunks = render::list(group, shape, l);
            let first = chunks.next().unwrap_or_default();
            let body = match chunks.next() {
                // Small lists go out whole, with a Content-Length.
                None => Body::from(first),
                Some(second) => Body::from_stream(futures::stream::iter(
                    [first, second]
                        .into_iter()
                        .chain(chunks)
                        .map(|c| Ok::<_, Infallible>(Bytes::from(c))),
                )),
            };
            Ok(typed_response(StatusCode::OK, body, "application/json"))
        }
    }
}

/// The unpaged list `p` again, at the revision `resource_version` its first read was at:
/// its continue token holds that revision; without one, an exact resourceVersion.
fn same_snapshot(p: &ListParams, resource_version: &str) -> ListParams {
    let mut again = p.clone();
    if again.continue_.is_none() {
        again.resource_version = Some(resource_version.to_owned());
        again.resource_version_match = Some(options::MATCH_EXACT.to_owned());
    }
    again
}

/// The response of a watch: each batch the registry has ready, encoded by `encode` into one
/// chunk (one write), until the watch ends or the server shuts down; counted in the watch
/// metrics while open, and marked [`Streaming`] so no layer holds it back.
fn stream_response(
    api: &EventsApi,
    w: EventWatch,
    content_type: &'static str,
    mut encode: impl FnMut(Vec<WatchItem>) -> Bytes + Send + 'static,
) -> Response {
    let guard = api.metrics.clone().map(WatchGuard::new);
    let stream = w
        .take_until(api.shutdown.clone().cancelled_owned())
        .map(move |batch| {
            let _keep = &guard;
            encode(batch)
        })
        // An empty chunk would end a chunked body.
        .filter(|chunk| std::future::ready(!chunk.is_empty()))
        .map(Ok::<_, Infallible>);
    let mut resp = Response::new(Body::from_stream(stream));
    resp.extensions_mut().insert(Streaming);
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

// ---- writes ------------------------------------------------------------------------------

struct WriteCtx {
    validation: FieldValidation,
    opts: WriteOptions,
}

/// The write options of a create, update or patch request, the user authentication found
/// (a [`UserInfo`] extension) included.
fn write_ctx(req: &Request) -> Result<WriteCtx, ApiError> {
    let (uri, headers) = (req.uri(), req.headers());
    let pairs = query_pairs(uri)?;
    let field_validation = q(&pairs, "fieldValidation");
    // An unsupported value is refused by the options validation, before the directive is
    // ever applied.
    let validation = FieldValidation::from_query(field_validation).unwrap_or_default();
    let opts = WriteOptions {
        dry_run: dry_run_values(&pairs),
        field_validation: field_validation.map(str::to_string),
        force: q(&pairs, "force").map(parse_bool),
        field_manager: q(&pairs, "fieldManager").map(str::to_string),
        user_agent: headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        field_check: None,
        user: req.extensions().get::<UserInfo>().map(|u| u.name.clone()),
    };
    Ok(WriteCtx { validation, opts })
}

/// Parses a create/update body: JSON or YAML (unknown fields per `fieldValidation`), or
/// protobuf.
fn event_body(
    group: ApiGroup,
    headers: &HeaderMap,
    body: &[u8],
    validation: FieldValidation,
) -> Result<(herald_core::event::CoreEvent, Vec<String>), ApiError> {
    let ct = content_type(headers);
    let decoded;
    let (format, body, validation) = match BodyFormat::from_content_type(&ct) {
        Some(format) => (format, body, validation),
        // A protobuf body has no unknown or repeated fields to report. It is decoded
        // straight to the event, or, rarely, to JSON for the JSON path's checks and messages.
        None if protobuf::is_protobuf(&ct) => match protobuf::event_body(group, body)? {
            protobuf::EventBody::Event(e) => return Ok((e, Vec::new())),
            protobuf::EventBody::Json(json) => {
                decoded = json;
                (BodyFormat::Json, &decoded[..], FieldValidation::Ignore)
            }
        },
        None => return Err(ApiError::unsupported_media_type(&ct)),
    };
    // The common case in one pass over the text: a JSON body that decodes and has no unknown
    // field. Anything else takes the full path below, which builds the exact answer.
    if format == BodyFormat::Json
        && let Ok(text) = std::str::from_utf8(body)
        && let Some(e) = match validation {
            FieldValidation::Ignore => decode_json_body(group, text),
            _ => decode_if_known(GroupVersion::of(group), text, EventSeed(group)),
        }
    {
        return Ok((e, Vec::new()));
    }
    let v = parse_object(format, body)?;
    let duplicates = if format == BodyFormat::Json && validation != FieldValidation::Ignore {
        duplicate_fields(body)
    } else {
        // A YAML body with a repeated key does not parse at all.
        Vec::new()
    };
    let warnings = check_fields(GroupVersion::of(group), validation, &v, &duplicates)?;
    let e = decode_body_as(group, v, Some((format, body)))?;
    Ok((e, warnings))
}

async fn create(
    State(st): State<GroupState>,
    ApiPath(ns): ApiPath<String>,
    neg: Negotiated,
    req: Request,
) -> Res {
    segments(&ns, None)?;
    let ctx = write_ctx(&req)?;
    let (headers, body) = read_body(req, st.api.max_body).await?;
    check_options(&ctx.opts, None)?;
    let (event, warnings) = event_body(st.group, &headers, &body, ctx.validation)?;
    // Boxed, as in the other write handlers: the registry's future is kilobytes, and axum's
    // layers move the handler's future several times before it first runs.
    let created = Box::pin(st.api.registry.create(st.group, &ns, event, &ctx.opts)).await?;
    let mut resp = event_response(
        StatusCode::CREATED,
        st.group,
        created.event,
        created.stored.as_ref(),
        &neg,
    )?;
    add_warnings(&mut resp, &warnings);
    Ok(resp)
}

async fn update(
    State(st): State<GroupState>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    neg: Negotiated,
    req: Request,
) -> Res {
    segments(&ns, Some(&name))?;
    let ctx = write_ctx(&req)?;
    let (headers, body) = read_body(req, st.api.max_body).await?;
    check_update_options(&ctx.opts)?;
    let (event, warnings) = event_body(st.group, &headers, &body, ctx.validation)?;
    let w = Box::pin(
        st.api
            .registry
            .update(st.group, &ns, &name, event, &ctx.opts),
    )
    .await?;
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut resp = event_response(code, st.group, w.event, w.stored.as_ref(), &neg)?;
    add_warnings(&mut resp, &warnings);
    Ok(resp)
}

async fn patch(
    State(st): State<GroupState>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    neg: Negotiated,
    req: Request,
) -> Res {
    segments(&ns, Some(&name))?;
    let mut ctx = write_ctx(&req)?;
    let (headers, body) = read_body(req, st.api.max_body).await?;
    let ct = content_type(&headers);
    let Some(mut kind) = PatchKind::from_content_type(&ct) else {
        return Err(ApiError::unsupported_patch_type(&ct).into());
    };
    if let PatchKind::Apply { force } = &mut kind {
        *force = ctx.opts.force.unwrap_or(false);
    }
    check_options(&ctx.opts, Some(kind))?;
    let group = st.group;
    let validation = ctx.validation;
    // The object paths of a merge, strategic-merge or apply patch are the object's own, so
    // its repeated keys are reported as the object's.
    let duplicates = match kind {
        PatchKind::Json => Vec::new(),
        _ if validation == FieldValidation::Ignore => Vec::new(),
        _ => duplicate_fields(&body),
    };
    ctx.opts.field_check = Some(Arc::new(move |v: &Value| {
        check_fields(GroupVersion::of(group), validation, v, &duplicates)
    }));
    let w = Box::pin(
        st.api
            .registry
            .patch(group, &ns, &name, kind, &body, &ctx.opts),
    )
    .await?;
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut resp = event_response(code, group, w.event, w.stored.as_ref(), &neg)?;
    add_warnings(&mut resp, &w.warnings);
    Ok(resp)
}

/// DeleteOptions from the query and the (optional) body, JSON, YAML or protobuf by its
/// Content-Type; the body wins.
fn delete_params(
    pairs: &[(String, String)],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<DeleteParams, ApiError> {
    let mut p = DeleteParams {
        dry_run: dry_run_values(pairs),
        propagation_policy: q(pairs, "propagationPolicy").map(str::to_string),
        orphan_dependents: q(pairs, "orphanDependents").map(parse_bool),
        grace_period_seconds: match q(pairs, "gracePeriodSeconds") {
            Some(s) => Some(s.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid gracePeriodSeconds: {s:?}"))
            })?),
            None => None,
        },
        ..DeleteParams::default()
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(p);
    }
    let ct = content_type(headers);
    let v = match BodyFormat::from_content_type(&ct) {
        Some(format) => parse_object(format, body)?,
        None if protobuf::is_protobuf(&ct) => {
            parse_json_object(&protobuf::delete_options_json(body)?)?
        }
        None => return Err(ApiError::unsupported_media_type(&ct)),
    };
    let bad =
        |f: &str| ApiError::bad_request(format!("invalid DeleteOptions: {f} has the wrong type"));
    if let Some(pp) = v.get("propagationPolicy").filter(|x| !x.is_null()) {
        p.propagation_policy = Some(
            pp.as_str()
                .ok_or_else(|| bad("propagationPolicy"))?
                .to_string(),
        );
    }
    if let Some(o) = v.get("orphanDependents").filter(|x| !x.is_null()) {
        p.orphan_dependents = Some(o.as_bool().ok_or_else(|| bad("orphanDependents"))?);
    }
    if let Some(g) = v.get("gracePeriodSeconds").filter(|x| !x.is_null()) {
        p.grace_period_seconds = Some(g.as_i64().ok_or_else(|| bad("gracePeriodSeconds"))?);
    }
    if let Some(d) = v.get("dryRun").filter(|x| !x.is_null()) {
        // Values other than `All` are the options validation's to refuse (422).
        p.dry_run = d
            .as_array()
            .ok_or_else(|| bad("dryRun"))?
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(|| bad("dryRun")))
            .collect::<Result<_, _>>()?;
    }
    if let Some(pre) = v.get("preconditions").filter(|x| !x.is_null()) {
        if let Some(u) = pre.get("uid").filter(|x| !x.is_null()) {
            p.precondition_uid = Some(
                u.as_str()
                    .ok_or_else(|| bad("preconditions.uid"))?
                    .to_string(),
            );
        }
        if let Some(r) = pre.get("resourceVersion").filter(|x| !x.is_null()) {
            p.precondition_resource_version = Some(
                r.as_str()
                    .ok_or_else(|| bad("preconditions.resourceVersion"))?
                    .to_string(),
            );
        }
    }
    Ok(p)
}

async fn delete_one(
    State(st): State<GroupState>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    neg: Negotiated,
    req: Request,
) -> Res {
    segments(&ns, Some(&name))?;
    let pairs = query_pairs(req.uri())?;
    let (headers, body) = read_body(req, st.api.max_body).await?;
    let p = delete_params(&pairs, &headers, &body)?;
    let gone = match st.api.registry.delete(st.group, &ns, &name, &p).await? {
        Deletion::Deleted(e) => e,
        Deletion::Marked(e) => {
            // Still there (finalizers): kube answers with the object, 202 only when the
            // client explicitly asked not to orphan dependents.
            let code = if p.orphan_dependents == Some(false) {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            return event_response(code, st.group, e, None, &neg);
        }
    };
    let mut details = json!({"name": name, "kind": "events", "uid": gone.metadata.uid.clone().unwrap_or_default()});
    if st.group == ApiGroup::EventsV1 {
        details["group"] = json!("events.k8s.io");
    }
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "details": details,
    });
    Ok(json_response(StatusCode::OK, &status))
}

async fn delete_collection(
    State(st): State<GroupState>,
    ApiPath(ns): ApiPath<String>,
    req: Request,
) -> Res {
    segments(&ns, None)?;
    let pairs = query_pairs(req.uri())?;
    let lp = list_params(&pairs)?;
    let (headers, body) = read_body(req, st.api.max_body).await?;
    let p = delete_params(&pairs, &headers, &body)?;
    let gone = Box::pin(
        st.api
            .registry
            .delete_collection(st.group, Some(&ns), &lp, &p),
    )
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &render::event_list(st.group, &gone.items, Some(&gone.resource_version), None),
    ))
}
