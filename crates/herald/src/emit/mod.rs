//! `herald emit`: records an event through herald-runtime's real pipeline — `Recorder` →
//! `EventBroadcaster` → `EventCorrelator` (aggregation, counting, spam filter) → `KubeSink` —
//! once or as a storm (`--repeat N --rate R`), then shuts the pipeline down (which writes the
//! counts the spam filter held back, so the stored count is exact) and reports what the
//! pipeline did and how many API writes it cost. With `--api events.k8s.io` it records
//! events.k8s.io/v1 events through `herald_runtime::events` instead (series).

mod sink;
mod summary;

use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_runtime::events::{EventBroadcasterOptions, EventRecorder};
use herald_runtime::record::{
    BroadcasterOptions, EventBroadcaster, EventSource, KubeSink, Recorder,
};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DynamicObject};
use tokio_util::sync::CancellationToken;

use self::sink::ErrorMemo;
use self::summary::{Summary, What};
use crate::connect::{ConnectArgs, Connection};
use crate::for_object::{ForArg, ForObject};
use crate::style::Palette;
use crate::usage::usage_bail;

/// How long looking up the object's uid may take (it is optional).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The two event types Kubernetes accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Type {
    /// Something expected happened.
    #[value(name = "Normal", alias = "normal")]
    Normal,
    /// Something may need attention.
    #[value(name = "Warning", alias = "warning")]
    Warning,
}

impl Type {
    fn as_str(self) -> &'static str {
        match self {
            Type::Normal => "Normal",
            Type::Warning => "Warning",
        }
    }
}

/// Which events API to record to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EventsApi {
    /// core/v1 events (`count`, `firstTimestamp`, `lastTimestamp`): client-go's tools/record.
    #[value(name = "v1", alias = "core")]
    CoreV1,
    /// events.k8s.io/v1 events (repeats counted in `series`): client-go's tools/events.
    #[value(name = "events.k8s.io", alias = "events.k8s.io/v1")]
    EventsV1,
}

/// Summary formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Three human-readable lines.
    Text,
    /// One JSON object with stable field names.
    Json,
}

/// Arguments of `herald emit`.
#[derive(Debug, clap::Args)]
pub struct EmitArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// The object the event is about, e.g. pod/web-1, deployment/api, node/node-1
    #[arg(long = "for", value_name = "KIND/NAME")]
    for_object: String,
    /// Event type
    #[arg(long = "type", value_enum, default_value_t = Type::Normal)]
    type_: Type,
    /// Why it happened: a short CamelCase word, e.g. BackOff
    #[arg(long)]
    reason: String,
    /// What happened, for people
    #[arg(long, default_value = "")]
    message: String,
    /// The events API to write: v1 (core) or events.k8s.io (series)
    #[arg(long, value_enum, default_value_t = EventsApi::CoreV1)]
    api: EventsApi,
    /// What was done (events.k8s.io only: its `action`)
    #[arg(long, default_value = "Emit")]
    action: String,
    /// Record the event this many times (a storm)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    repeat: u64,
    /// Occurrences per second, from 0.001 to 1000000 [default: as fast as the pipeline
    /// takes them]
    #[arg(long, value_name = "PER_SECOND", value_parser = crate::parse_rate)]
    rate: Option<f64>,
    /// The reporting component (source.component; events.k8s.io: reportingController)
    #[arg(long, default_value = "herald-emit")]
    source: String,
    /// The reporting instance (source.host; events.k8s.io: reportingInstance, which
    /// defaults to the component) [default: none]
    #[arg(
        long,
        value_name = "HOST",
        default_value = "",
        hide_default_value = true
    )]
    source_host: String,
    /// Summary format
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// Emits and prints the summary; fails (exit 1) when occurrences could not be written.
pub fn run(args: EmitArgs) -> anyhow::Result<()> {
    let for_arg = ForArg::parse(&args.for_object)?;
    if args.reason.trim().is_empty() {
        usage_bail!("--reason must not be empty; use a short CamelCase word like BackOff");
    }
    let runtime = crate::runtime()?;
    let (summary, why) = runtime.block_on(emit(&args, &for_arg))?;
    let text = match args.output {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&summary)?),
        Output::Text => summary.render(Palette::stdout()),
    };
    // A reader that went away (`herald emit … | true`) does not change what was written.
    crate::stdout::print(&text)?;
    if summary.lost() > 0 {
        let why = why.map(|e| format!(": {e}")).unwrap_or_default();
        anyhow::bail!(
            "{} of {} occurrences were not written{why}",
            summary.lost(),
            summary.emitted
        );
    }
    Ok(())
}

async fn emit(args: &EmitArgs, for_arg: &ForArg) -> anyhow::Result<(Summary, Option<String>)> {
    let conn = args.connect.connect().await?;
    let object = crate::for_object::resolve(for_arg, &conn).await?;
    let reference = with_uid(&conn, &object, object.reference(&conn.namespace)).await;
    let namespace =
        herald_core::naming::event_namespace(reference.namespace.as_deref()).to_string();

    let interrupt = crate::interrupt::on_ctrl_c();
    let last_error = Arc::new(Mutex::new(None));
    // Without kube's own retry layer, as KubeSink's docs ask: the recorder retries (and
    // counts every attempt), and the last error it saw is the reason given at the end.
    let sink = KubeSink::new(conn.client_without_retries()?).with_field_manager("herald-emit");
    let sink = ErrorMemo::new(sink, last_error.clone());
    let progress = progress_bar(args.repeat);
    let stats = match args.api {
        EventsApi::CoreV1 => {
            let broadcaster = EventBroadcaster::new(BroadcasterOptions::default());
            broadcaster.start_recording_to_named_sink("api", sink);
            let recorder = broadcaster.new_recorder(EventSource::new(
                args.source.clone(),
                args.source_host.clone(),
            ));
            let one = Occurrence::CoreV1(&recorder);
            record(args, one, &reference, &progress, &interrupt).await;
            progress.set_message("writing held-back counts");
            // Shutdown writes what is queued and what the spam filter held back (the
            // trailing flush), so the stored count equals the number of occurrences.
            broadcaster.shutdown().await;
            broadcaster.stats()
        }
        EventsApi::EventsV1 => {
            let broadcaster =
                herald_runtime::events::EventBroadcaster::new(EventBroadcasterOptions::default());
            broadcaster.start_recording_to_named_sink("api", sink);
            let instance = if args.source_host.is_empty() {
                args.source.clone()
            } else {
                args.source_host.clone()
            };
            let recorder = broadcaster.new_recorder(args.source.clone(), instance);
            let one = Occurrence::EventsV1(&recorder);
            record(args, one, &reference, &progress, &interrupt).await;
            progress.set_message("writing the final series count");
            // Shutdown writes what is queued and the series' final count.
            broadcaster.shutdown().await;
            broadcaster.stats()
        }
    };
    progress.finish_and_clear();

    let what = What {
        object: format!("{}/{}", object.kind.kind.to_lowercase(), object.name),
        namespace,
        type_: args.type_.as_str().to_string(),
        reason: args.reason.clone(),
        requested: args.repeat,
    };
    let summary = Summary::new(what, &stats, interrupt.is_cancelled());
    let last = last_error.lock().unwrap_or_else(|p| p.into_inner()).take();
    Ok((summary, summary::why_lost(&stats, last)))
}

/// The recorder of the chosen API.
#[derive(Clone, Copy)]
enum Occurrence<'a> {
    CoreV1(&'a Recorder),
    EventsV1(&'a EventRecorder),
}

impl Occurrence<'_> {
    fn record(self, args: &EmitArgs, reference: &ObjectReference) {
        match self {
            Occurrence::CoreV1(r) => r.event_with_type_str(
                reference,
                None,
                args.type_.as_str(),
                &args.reason,
                &args.message,
            ),
            Occurrence::EventsV1(r) => r.event_with_type_str(
                reference,
                None,
                None,
                args.type_.as_str(),
                &args.reason,
                &args.action,
                &args.message,
            ),
        }
    }
}

/// Hands `--repeat` occurrences to the recorder, paced by `--rate`, until done or Ctrl-C.
async fn record(
    args: &EmitArgs,
    recorder: Occurrence<'_>,
    reference: &ObjectReference,
    progress: &indicatif::ProgressBar,
    interrupt: &CancellationToken,
) {
    let mut ticker = args.rate.map(|rate| {
        let mut t = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        // Late ticks fire at once, so the average rate holds over the run.
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        t
    });
    for i in 0..args.repeat {
        match &mut ticker {
            Some(t) => tokio::select! {
                biased;
                _ = interrupt.cancelled() => break,
                _ = t.tick() => {}
            },
            None => {
                if interrupt.is_cancelled() {
                    break;
                }
                // Let the pipeline's tasks (and Ctrl-C) in during a flat-out storm.
                if i % 1024 == 1023 {
                    tokio::task::yield_now().await;
                }
            }
        }
        recorder.record(args, reference);
        if i % 256 == 0 || i + 1 == args.repeat {
            progress.set_position(i + 1);
        }
    }
}

/// Fills the reference's uid and resourceVersion from the live object when the server has
/// it (so `kubectl describe` on a real cluster lists the event); herald-server stores no
/// pods, and then the reference stays as it is.
async fn with_uid(
    conn: &Connection,
    object: &ForObject,
    mut r: ObjectReference,
) -> ObjectReference {
    let (group, version) = match object.kind.api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), object.kind.api_version.clone()),
    };
    let ar = ApiResource {
        group,
        version,
        api_version: object.kind.api_version.clone(),
        kind: object.kind.kind.clone(),
        plural: object.kind.plural.clone(),
    };
    let api: Api<DynamicObject> = match &r.namespace {
        Some(ns) => Api::namespaced_with(conn.client.clone(), ns, &ar),
        None => Api::all_with(conn.client.clone(), &ar),
    };
    match tokio::time::timeout(LOOKUP_TIMEOUT, api.get_opt(&object.name)).await {
        Ok(Ok(Some(live))) => {
            r.uid = live.metadata.uid;
            r.resource_version = live.metadata.resource_version;
        }
        Ok(Ok(None)) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "object lookup failed; emitting without uid"),
        Err(_) => tracing::debug!("object lookup timed out; emitting without uid"),
    }
    r
}

/// A progress bar on stderr for storms, drawn only when stderr is a terminal.
fn progress_bar(total: u64) -> indicatif::ProgressBar {
    if total < 2 || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} {per_sec} {msg}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.enable_steady_tick(Duration::from_millis(100));
    pb
}
