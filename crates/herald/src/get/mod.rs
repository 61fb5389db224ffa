//! `herald get events`: the events of a namespace (or all, `-A`), optionally about one object
//! (`--for`) and of some types (`--types`), sorted by when they were last seen — as a table
//! with kubectl events' `(x12 over 5m)` counts, or as stable JSON/YAML.

mod table;

use std::io::Write as _;

use herald_core::clock::{Clock, SystemClock};
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;

use crate::connect::ConnectArgs;
use crate::event_text::sort_by_last_seen;
use crate::filter::{EventQuery, FilterArgs};
use crate::style::Palette;

pub use table::Layout;

/// Events fetched per list request (kubectl's chunk size).
const PAGE: u32 = 500;

/// What `herald get` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Resource {
    /// Kubernetes events (core/v1).
    #[value(alias = "event", alias = "ev")]
    Events,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Adds SUBOBJECT, SOURCE, FIRST SEEN, COUNT and NAME columns.
    Wide,
    /// A v1 `List` of the events, as JSON (kubectl's shape; field order is stable).
    Json,
    /// The same `List` as YAML.
    Yaml,
}

/// Arguments of `herald get`.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// What to list
    #[arg(value_enum)]
    resource: Resource,
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Output format [default: a table]
    #[arg(short, long, value_enum)]
    output: Option<Format>,
    /// Leave out the table's header line
    #[arg(long)]
    no_headers: bool,
    /// Keep metadata.managedFields in JSON and YAML output (like kubectl, they are left
    /// out by default)
    #[arg(long)]
    show_managed_fields: bool,
}

/// Lists the events and prints them.
pub fn run(args: GetArgs) -> anyhow::Result<()> {
    let Resource::Events = args.resource;
    let checked = args.filter.check()?;
    let runtime = crate::runtime()?;
    let (query, mut events) = runtime.block_on(async {
        let conn = args.connect.connect().await?;
        let query = checked.resolve(&conn).await?;
        let events = list(&conn, &query).await?;
        anyhow::Ok((query, events))
    })?;
    if events.is_empty() && !matches!(args.output, Some(Format::Json | Format::Yaml)) {
        eprintln!("No events found in {}.", query.scope());
        return Ok(());
    }
    if !args.show_managed_fields {
        hide_managed_fields(&mut events);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = match args.output {
        // Streamed straight from the events: no intermediate JSON tree (100,000 events
        // would need several hundred MB more).
        Some(Format::Json) => serde_json::to_writer_pretty(&mut out, &List::of(&events))
            .map_err(anyhow::Error::from)
            .and_then(|()| Ok(out.write_all(b"\n")?)),
        Some(Format::Yaml) => {
            serde_saphyr::to_io_writer(&mut out, &List::of(&events)).map_err(yaml_error)
        }
        table_format => {
            let layout = Layout {
                wide: table_format == Some(Format::Wide),
                namespaces: query.all_namespaces,
                no_headers: args.no_headers,
            };
            let text = table::render(&events, SystemClock.now(), layout, Palette::stdout());
            out.write_all(text.as_bytes()).map_err(anyhow::Error::from)
        }
    }
    .and_then(|()| Ok(out.flush()?));
    // `herald get events | head` closes the pipe early; that is not an error.
    crate::stdout::finish(written)
}

/// A YAML writing error with its I/O error kept as the source (so a closed pipe is
/// recognised), and said once.
fn yaml_error(e: serde_saphyr::SerializeError) -> anyhow::Error {
    match e {
        serde_saphyr::SerializeError::IO { error } => {
            anyhow::Error::from(error).context("writing the events as YAML")
        }
        other => anyhow::anyhow!("writing the events as YAML: {other}"),
    }
}

/// Leaves `metadata.managedFields` out, as `kubectl get -o json/yaml` does unless given
/// `--show-managed-fields`: they are bookkeeping of server-side apply, not the event.
fn hide_managed_fields(events: &mut [Event]) {
    for e in events {
        e.metadata.managed_fields = None;
    }
}

/// Every event the query selects (all pages), sorted by last seen, oldest first.
pub async fn list(
    conn: &crate::connect::Connection,
    query: &EventQuery,
) -> anyhow::Result<Vec<Event>> {
    let api = query.api(conn.client.clone());
    let mut params = ListParams::default().limit(PAGE);
    if let Some(fs) = query.field_selector() {
        params = params.fields(&fs);
    }
    let mut events = Vec::new();
    loop {
        let page = api.list(&params).await.map_err(|e| conn.explain(e))?;
        events.extend(page.items.into_iter().filter(|e| query.matches(e)));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    sort_by_last_seen(&mut events);
    Ok(events)
}

/// kubectl's `-o json` shape for several objects: a v1 `List` (fields in kubectl's order).
#[derive(serde::Serialize)]
struct List<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    items: &'a [Event],
    kind: &'static str,
    metadata: ListMeta,
}

#[derive(serde::Serialize)]
struct ListMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: &'static str,
}

impl<'a> List<'a> {
    fn of(items: &'a [Event]) -> Self {
        List {
            api_version: "v1",
            items,
            kind: "List",
            metadata: ListMeta {
                resource_version: "",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader has gone away.
    struct ClosedPipe;

    impl std::io::Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_under_yaml_is_still_a_closed_pipe() {
        let events = vec![Event::default()];
        let e = serde_saphyr::to_io_writer(&mut ClosedPipe, &List::of(&events))
            .map_err(yaml_error)
            .unwrap_err();
        assert!(crate::stdout::broken_pipe(&e), "{e:#}");
        assert!(crate::stdout::finish(Err(e)).is_ok());
    }

    #[test]
    fn managed_fields_are_hidden() {
        let mut e = Event::default();
        e.metadata.managed_fields = Some(vec![Default::default()]);
        e.metadata.name = Some("a".into());
        let mut events = vec![e];
        hide_managed_fields(&mut events);
        assert_eq!(events[0].metadata.managed_fields, None);
        assert_eq!(events[0].metadata.name.as_deref(), Some("a"));
    }
}
