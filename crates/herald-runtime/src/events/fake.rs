//! [`FakeRecorder`]: an [`EventRecorder`] for controller unit tests that writes each event as
//! a line of text to a bounded channel instead of recording it (client-go's
//! `tools/events.FakeRecorder`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use k8s_openapi::api::core::v1::ObjectReference;

use super::event::Reporter;
use super::recorder::{EventRecorder, RecorderInner, Target};

/// Where a fake [`EventRecorder`] writes its lines.
#[derive(Debug)]
pub(crate) struct FakeTarget {
    lines: SyncSender<String>,
    verbose: bool,
}

/// One event as the fake recorder sees it.
pub(crate) struct FakeEvent<'a> {
    pub regarding: &'a ObjectReference,
    pub related: Option<&'a ObjectReference>,
    pub annotations: Option<&'a BTreeMap<String, String>>,
    pub type_: &'a str,
    pub reason: &'a str,
    pub action: &'a str,
    pub note: &'a str,
}

impl FakeTarget {
    /// Formats `e` (see [`FakeRecorder`]) and sends it, waiting while the channel is full; a
    /// dropped receiver discards it.
    pub(crate) fn send(&self, e: &FakeEvent<'_>) {
        let line = if self.verbose {
            verbose_line(e)
        } else {
            format!("{} {} {}", e.type_, e.reason, e.note)
        };
        // Err only when the receiver is gone: nobody reads the lines any more.
        let _ = self.lines.send(line);
    }
}

/// `<type> <reason> <action> <note>`, then ` {kind=K,apiVersion=V}` for the regarding and the
/// related object (each when its kind or apiVersion is set), then ` map[k1:v1 k2:v2]` when
/// there are annotations (Go's rendering of a map, keys sorted).
fn verbose_line(e: &FakeEvent<'_>) -> String {
    let mut line = format!("{} {} {} {}", e.type_, e.reason, e.action, e.note);
    for r in std::iter::once(e.regarding).chain(e.related) {
        let kind = r.kind.as_deref().unwrap_or("");
        let api_version = r.api_version.as_deref().unwrap_or("");
        if !kind.is_empty() || !api_version.is_empty() {
            let _ = write!(line, " {{kind={kind},apiVersion={api_version}}}");
        }
    }
    if let Some(annotations) = e.annotations.filter(|a| !a.is_empty()) {
        line.push_str(" map[");
        for (i, (k, v)) in annotations.iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            let _ = write!(line, "{k}:{v}");
        }
        line.push(']');
    }
    line
}

/// An [`EventRecorder`] for controller unit tests (client-go's `tools/events.FakeRecorder`):
/// every event the recorder is given becomes one line of text on a bounded channel, and
/// nothing is queued, correlated or written. Hand [`recorder`](Self::recorder) to the code
/// under test and read [`events`](Self::events).
///
/// Lines, as client-go writes them:
/// - by default `<type> <reason> <note>` (no action), e.g. `Warning FailedMount volume not
///   ready`;
/// - [`verbose`](Self::verbose): `<type> <reason> <action> <note>`, then
///   ` {kind=<kind>,apiVersion=<apiVersion>}` for the regarding and for the related object
///   (each when its kind or apiVersion is set), then ` map[k1:v1 k2:v2]` for annotations, if
///   any (keys sorted).
///
/// Bound: the channel holds `capacity` lines. When it is full, the recording call **waits**
/// until the test takes a line (client-go's blocking send), so size it for the events a test
/// expects, or read them from another thread. `capacity` 0 makes every call wait for a
/// reader. Once [`events`](Self::events) is dropped, lines are discarded. The type is not
/// checked (client-go's fake writes `Normal`, `Warning` and anything else alike).
///
/// ```
/// use herald_runtime::events::{EventRecorder, EventType, FakeRecorder};
/// use k8s_openapi::api::core::v1::{Node, Pod};
///
/// // The code under test takes an EventRecorder, as in production.
/// fn reconcile(pod: &Pod, recorder: &EventRecorder) {
///     recorder.eventf(pod, None::<&Node>, EventType::Warning, "FailedMount", "Mounting",
///         format_args!("volume {:?} not ready", "data"));
/// }
///
/// let fake = FakeRecorder::new(10);
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-1".into());
/// reconcile(&pod, &fake.recorder());
/// assert_eq!(fake.events.try_recv().unwrap(), r#"Warning FailedMount volume "data" not ready"#);
/// assert!(fake.events.try_recv().is_err()); // nothing else was recorded
///
/// let fake = FakeRecorder::verbose(10);
/// reconcile(&pod, &fake.recorder());
/// assert_eq!(
///     fake.events.try_recv().unwrap(),
///     r#"Warning FailedMount Mounting volume "data" not ready {kind=Pod,apiVersion=v1}"#
/// );
/// ```
#[derive(Debug)]
pub struct FakeRecorder {
    /// The lines, one per event, in the order the recorder was called.
    pub events: Receiver<String>,
    recorder: EventRecorder,
}

impl FakeRecorder {
    /// A fake recorder whose channel holds `capacity` lines, writing
    /// `<type> <reason> <note>` (client-go's `NewFakeRecorder(capacity)`).
    pub fn new(capacity: usize) -> Self {
        Self::with_verbose(capacity, false)
    }

    /// A fake recorder whose channel holds `capacity` lines, writing the action, the objects'
    /// kinds and the annotations too (client-go's `Verbose: true`).
    pub fn verbose(capacity: usize) -> Self {
        Self::with_verbose(capacity, true)
    }

    fn with_verbose(capacity: usize, verbose: bool) -> Self {
        let (lines, events) = sync_channel(capacity);
        let recorder = EventRecorder::new(RecorderInner {
            target: Target::Fake(FakeTarget { lines, verbose }),
            reporter: Arc::new(Reporter {
                controller: "fake-recorder".into(),
                instance: "fake-recorder".into(),
            }),
        });
        Self { events, recorder }
    }

    /// The recorder to hand to the code under test (a clone: every clone writes to
    /// [`events`](Self::events)). Its reporting controller and instance are `fake-recorder`.
    pub fn recorder(&self) -> EventRecorder {
        self.recorder.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_ref() -> ObjectReference {
        ObjectReference {
            kind: Some("Pod".into()),
            api_version: Some("v1".into()),
            name: Some("p".into()),
            ..ObjectReference::default()
        }
    }

    #[test]
    fn verbose_line_has_action_kinds_and_sorted_annotations() {
        let node = ObjectReference {
            kind: Some("Node".into()),
            api_version: Some("v1".into()),
            ..ObjectReference::default()
        };
        let annotations = BTreeMap::from([("b".into(), "2".into()), ("a".into(), "1".into())]);
        let e = FakeEvent {
            regarding: &pod_ref(),
            related: Some(&node),
            annotations: Some(&annotations),
            type_: "Normal",
            reason: "Scheduled",
            action: "Binding",
            note: "to n1",
        };
        assert_eq!(
            verbose_line(&e),
            "Normal Scheduled Binding to n1 {kind=Pod,apiVersion=v1} {kind=Node,apiVersion=v1} map[a:1 b:2]"
        );
    }

    #[test]
    fn verbose_line_skips_objects_without_kind_and_empty_annotations() {
        let empty = BTreeMap::new();
        let e = FakeEvent {
            regarding: &ObjectReference::default(),
            related: None,
            annotations: Some(&empty),
            type_: "Warning",
            reason: "R",
            action: "A",
            note: "n",
        };
        assert_eq!(verbose_line(&e), "Warning R A n");
    }
}
