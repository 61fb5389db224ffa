//! `herald top`: a full-screen, live view of event storms — which objects and reasons emit
//! the most, their rate over a sliding window, and how much the correlator and the server
//! compressed them (occurrences per API write). Fed by herald-runtime's `SharedInformer`,
//! drawn with ratatui; `q` (or Esc, or Ctrl-C) quits and prints a one-line summary.

mod view;
mod window;

use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use herald_core::clock::{Clock, SystemClock};
use herald_runtime::cache::{
    DeletedObject, HandlerFns, InformerOptions, KubeListerWatcher, ListWatchError, SharedInformer,
};
use k8s_openapi::api::core::v1::Event;
use ratatui::crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};

use self::view::Header;
use self::window::Window;
use crate::connect::ConnectArgs;
use crate::filter::FilterArgs;
use crate::usage::usage_bail;

/// Arguments of `herald top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// How far back rates and totals look, e.g. 5m, 30s, 1h
    #[arg(long, default_value = "5m", value_parser = crate::parse_duration)]
    window: Duration,
    /// How often the screen is redrawn
    #[arg(long, default_value = "1s", value_parser = crate::parse_duration)]
    refresh: Duration,
}

/// What the informer's handlers and the UI share.
struct Shared {
    window: Window,
    status: String,
}

fn lock(s: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the full-screen view until `q`.
pub fn run(args: TopArgs) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        usage_bail!(
            "herald top draws a full screen and needs a terminal; for plain output use `herald get events`"
        );
    }
    if args.window.is_zero() || args.refresh.is_zero() {
        usage_bail!("--window and --refresh must be longer than 0s");
    }
    let checked = args.filter.check()?;
    let runtime = crate::runtime()?;
    let (conn, query) = runtime.block_on(async {
        let conn = args.connect.connect().await?;
        let query = checked.resolve(&conn).await?;
        anyhow::Ok((conn, query))
    })?;

    let shared = Arc::new(Mutex::new(Shared {
        window: Window::new(args.window, query.all_namespaces),
        status: "syncing".to_string(),
    }));
    let stop = tokio_util::sync::CancellationToken::new();
    let (interrupt, task) = runtime.block_on(async {
        let mut lw = KubeListerWatcher::new(query.api(conn.client.clone()));
        if let Some(fs) = query.field_selector() {
            lw = lw.fields(&fs);
        }
        let informer = SharedInformer::new(lw, InformerOptions::default());
        {
            let shared = shared.clone();
            informer.set_watch_error_handler(move |e: &ListWatchError| {
                if !matches!(e, ListWatchError::Expired(_)) {
                    lock(&shared).status = format!("reconnecting ({e})");
                }
            })?;
        }
        informer.add_event_handler(handlers(&shared, &query))?;
        let task = informer.spawn(stop.clone());
        tokio::spawn(track_status(
            informer.clone(),
            conn.clone(),
            shared.clone(),
            stop.clone(),
        ));
        anyhow::Ok((crate::interrupt::on_ctrl_c(), task))
    })?;

    let header = Header {
        server: conn.server.clone(),
        scope: describe(&query),
        status: String::new(),
        color: crate::style::Palette::new(true).is_on(),
    };
    let started = Instant::now();
    let mut terminal = ratatui::try_init()?;
    let ui = ui_loop(&mut terminal, &shared, header, args.refresh, &interrupt);
    ratatui::restore();
    stop.cancel();
    let _ = runtime.block_on(task);
    ui?;

    let snap = lock(&shared).window.snapshot(SystemClock.now());
    let busiest = snap
        .objects
        .first()
        .map(|r| {
            format!(
                "; busiest {} ({} occurrences, {} writes)",
                r.name, r.occurrences, r.writes
            )
        })
        .unwrap_or_default();
    crate::stdout::print(&format!(
        "herald top: {} occurrences in {} API writes over the last {}{busiest} (watched for {})\n",
        snap.total.occurrences,
        snap.total.writes,
        herald_wire::table::human_duration(snap.span),
        herald_wire::table::human_duration(started.elapsed()),
    ))
}

/// Keeps the header's status true: `syncing` until the first list is in, `reconnecting (…)`
/// after a list/watch error (set by the error hook), `live` again once the server answers
/// (the informer resumes on its own; it is told nothing).
async fn track_status(
    informer: SharedInformer<Event>,
    conn: crate::connect::Connection,
    shared: Arc<Mutex<Shared>>,
    stop: tokio_util::sync::CancellationToken,
) {
    const CHECK: Duration = Duration::from_secs(1);
    tokio::select! {
        _ = stop.cancelled() => return,
        synced = informer.wait_for_cache_sync() => if !synced { return },
    }
    lock(&shared).status = "live".to_string();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(CHECK) => {}
        }
        if lock(&shared).status != "live" && conn.probe().await.is_ok() {
            lock(&shared).status = "live".to_string();
        }
    }
}

/// Feeds every add/update the query selects into the window.
fn handlers(shared: &Arc<Mutex<Shared>>, query: &crate::filter::EventQuery) -> HandlerFns<Event> {
    let (s_add, s_update, s_delete) = (shared.clone(), shared.clone(), shared.clone());
    let (q_add, q_update) = (query.clone(), query.clone());
    HandlerFns::new()
        .on_add(move |e: Arc<Event>, initial| {
            if q_add.matches(&e) {
                lock(&s_add).window.observe(&e, initial, SystemClock.now());
            }
        })
        .on_update(move |old: Arc<Event>, new: Arc<Event>| {
            if old.metadata.resource_version != new.metadata.resource_version
                && q_update.matches(&new)
            {
                lock(&s_update)
                    .window
                    .observe(&new, false, SystemClock.now());
            }
        })
        .on_delete(move |d: DeletedObject<Event>| {
            if let Some(e) = d.object() {
                lock(&s_delete).window.forget(e);
            }
        })
}

fn describe(query: &crate::filter::EventQuery) -> String {
    let mut s = query.scope();
    if let Some(o) = &query.object {
        s.push_str(&format!(" · for {}/{}", o.kind.kind.to_lowercase(), o.name));
    }
    if !query.types.is_empty() {
        s.push_str(&format!(" · {}", query.types.join(",")));
    }
    s
}

/// Draws every `refresh` (and on resize) and handles keys until quit or Ctrl-C.
fn ui_loop(
    terminal: &mut ratatui::DefaultTerminal,
    shared: &Mutex<Shared>,
    mut header: Header,
    refresh: Duration,
    interrupt: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    // Keys are polled in short slices so an external SIGINT is noticed promptly too.
    const SLICE: Duration = Duration::from_millis(100);
    loop {
        let (snap, length) = {
            let mut s = lock(shared);
            header.status.clone_from(&s.status);
            (s.window.snapshot(SystemClock.now()), s.window.length())
        };
        terminal.draw(|f| view::draw(f, &snap, length, &header))?;
        let next = Instant::now() + refresh;
        loop {
            if interrupt.is_cancelled() {
                return Ok(());
            }
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if !event::poll(left.min(SLICE))? {
                continue;
            }
            match event::read()? {
                TermEvent::Key(k) if k.kind != KeyEventKind::Release => match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(());
                    }
                    _ => {}
                },
                TermEvent::Resize(..) => break,
                _ => {}
            }
        }
    }
}
