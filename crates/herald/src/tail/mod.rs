//! `herald tail`: a live stream of events driven by herald-runtime's `SharedInformer` — the
//! newest stored events first, then one line per new or updated event, updated in place on
//! a terminal. The informer lists, watches, and after a disconnect resumes from where it
//! was (relisting when the server's history no longer reaches back), so the stream survives
//! server restarts. Ctrl-C stops it and prints how many events were shown. So does a failed
//! write to stdout, except that a reader that went away (`herald tail | head`) ends it
//! quietly, like `kubectl get -w | head`.

mod screen;

use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex, MutexGuard};

use herald_core::clock::{Clock, SystemClock};
use herald_runtime::cache::{
    HandlerFns, InformerOptions, KubeListerWatcher, ListWatchError, SharedInformer,
};
use k8s_openapi::api::core::v1::Event;
use tokio_util::sync::CancellationToken;

use self::screen::{Change, RealTerm, Screen, TermSize};
use crate::connect::ConnectArgs;
use crate::event_text::sort_by_last_seen;
use crate::filter::{EventQuery, FilterArgs};
use crate::style::Palette;

/// Arguments of `herald tail`.
#[derive(Debug, clap::Args)]
pub struct TailArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// How many of the already stored events to show first (the most recent ones)
    #[arg(long, value_name = "N", default_value_t = 10)]
    initial: usize,
}

/// What the handler does with an event before the initial list has been shown.
enum Phase {
    /// Collecting the initial list (and changes that arrive meanwhile, in order).
    Syncing {
        initial: Vec<Event>,
        early: Vec<(Event, Change)>,
    },
    /// Printing as events arrive.
    Live,
}

/// The screen and the phase, behind one lock so lines never interleave.
struct State {
    screen: Screen<std::io::Stdout>,
    phase: Phase,
    /// A connection problem was reported and no event arrived since.
    outage: bool,
    clock: SystemClock,
    /// Cancelled at the first failed write to stdout: the stream ends.
    closed: CancellationToken,
    /// That write's error.
    write_error: Option<std::io::Error>,
}

impl State {
    fn show(&mut self, e: &Event, change: Change) {
        if self.write_error.is_some() {
            return;
        }
        self.outage = false;
        let now = self.clock.now();
        let written = self.screen.show(e, change, now);
        self.check(written);
    }

    fn note(&mut self, text: &str) {
        if self.write_error.is_none() {
            let written = self.screen.note(text);
            self.check(written);
        }
    }

    /// Ends the stream at the first write error (nobody reads what follows).
    fn check(&mut self, written: std::io::Result<()>) {
        if let Err(e) = written {
            self.write_error = Some(e);
            self.closed.cancel();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Streams events until Ctrl-C.
pub fn run(args: TailArgs) -> anyhow::Result<()> {
    let checked = args.filter.check()?;
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let conn = args.connect.connect().await?;
        let query = checked.resolve(&conn).await?;
        tail(&conn, query, args.initial).await
    })
}

async fn tail(
    conn: &crate::connect::Connection,
    query: EventQuery,
    initial: usize,
) -> anyhow::Result<()> {
    let interrupt = crate::interrupt::on_ctrl_c();
    let closed = CancellationToken::new();
    let terminal = std::io::stdout().is_terminal();
    let term: Option<Box<dyn TermSize>> = terminal.then(|| Box::new(RealTerm) as _);
    let state = Arc::new(Mutex::new(State {
        screen: Screen::new(
            std::io::stdout(),
            Palette::stdout(),
            term,
            query.all_namespaces,
        ),
        phase: Phase::Syncing {
            initial: Vec::new(),
            early: Vec::new(),
        },
        outage: false,
        clock: SystemClock,
        closed: closed.clone(),
        write_error: None,
    }));

    let informer = informer(conn, &query);
    {
        let state = state.clone();
        let server = conn.server.clone();
        informer.set_watch_error_handler(move |e: &ListWatchError| {
            if matches!(e, ListWatchError::Expired(_)) {
                return; // routine: the informer relists
            }
            let mut st = lock(&state);
            if !st.outage {
                st.outage = true;
                st.note(&format!(
                    "-- lost {server} ({e}); resuming when it is back --"
                ));
            }
        })?;
    }
    let handler = {
        let on_add = state.clone();
        let on_update = state.clone();
        let q_add = query.clone();
        let q_update = query.clone();
        HandlerFns::new()
            .on_add(move |e: Arc<Event>, in_initial_list| {
                if q_add.matches(&e) {
                    deliver(&on_add, &e, Change::New, in_initial_list);
                }
            })
            .on_update(move |old: Arc<Event>, new: Arc<Event>| {
                // A relist re-delivers unchanged objects; only a new revision is news.
                if old.metadata.resource_version != new.metadata.resource_version
                    && q_update.matches(&new)
                {
                    deliver(&on_update, &new, Change::Updated, false);
                }
            })
    };
    let registration = informer.add_event_handler(handler)?;
    let stop = interrupt.child_token();
    let task = informer.spawn(stop.clone());

    let ended = async {
        tokio::select! {
            _ = interrupt.cancelled() => {}
            _ = closed.cancelled() => {}
        }
    };
    tokio::pin!(ended);
    tokio::select! {
        _ = &mut ended => {}
        synced = registration.wait_synced() => {
            if synced {
                go_live(&state, initial);
                ended.await;
            }
        }
    }
    stop.cancel();
    let _ = task.await;
    let mut st = lock(&state);
    if let Some(e) = st.write_error.take() {
        // A closed pipe ends the stream quietly; any other error is the run's error.
        return crate::stdout::finish(Err(e.into()));
    }
    eprintln!(
        "herald tail: {} new, {} updated events shown",
        st.screen.new_events, st.screen.updates
    );
    Ok(())
}

/// The informer over the query's events (server-side field selector where possible).
fn informer(conn: &crate::connect::Connection, query: &EventQuery) -> SharedInformer<Event> {
    let mut lw = KubeListerWatcher::new(query.api(conn.client.clone()));
    if let Some(fs) = query.field_selector() {
        lw = lw.fields(&fs);
    }
    SharedInformer::new(lw, InformerOptions::default())
}

fn deliver(state: &Mutex<State>, e: &Event, change: Change, in_initial_list: bool) {
    let mut st = lock(state);
    match &mut st.phase {
        Phase::Syncing { initial, .. } if in_initial_list => initial.push(e.clone()),
        Phase::Syncing { early, .. } => early.push((e.clone(), change)),
        Phase::Live => st.show(e, change),
    }
}

/// Prints the newest `keep` events of the initial list (oldest first), then whatever
/// arrived meanwhile, and switches to printing events as they come.
fn go_live(state: &Mutex<State>, keep: usize) {
    let mut st = lock(state);
    let Phase::Syncing { mut initial, early } = std::mem::replace(&mut st.phase, Phase::Live)
    else {
        return;
    };
    sort_by_last_seen(&mut initial);
    let skip = initial.len().saturating_sub(keep);
    for e in &initial[skip..] {
        st.show(e, Change::New);
    }
    for (e, change) in early {
        st.show(&e, change);
    }
}
