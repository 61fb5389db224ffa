//! The event model rules kube-apiserver applies to events, with no I/O: the two API shapes
//! over one storage shape, per-group validation, field selectors and the create-time naming
//! rules.
//!
//! The storage shape is core/v1 [`CoreEvent`] (kube-apiserver's internal type has the same
//! fields under core/v1's names). A request on `events.k8s.io/v1` is converted to it on the way
//! in and back on the way out:
//!
//! - [`convert`]: `events.k8s.io/v1` ↔ core/v1, with the empty-value rules of the Go types.
//! - [`validate`]: lax core/v1 and strict `events.k8s.io/v1` create/update validation, plus the
//!   generic ObjectMeta rules, as 422 `Invalid` errors with kube-apiserver's field causes.
//! - [`fields`]: field selectors, the field labels each group supports, and field values.
//! - [`names`]: `generateName` expansion, the namespace/name checks of create and update, and
//!   the metadata of an object being deleted (deletion mark, delete-on-last-finalizer).
//!
//! ```
//! use herald_core::event::{ApiGroup, CoreEvent, convert, fields::FieldSelector};
//! let mut ev = CoreEvent::default();
//! ev.metadata.name = Some("web.1".into());
//! ev.metadata.namespace = Some("default".into());
//! ev.reason = Some("Started".into());
//! let v1 = convert::core_to_events_v1(ev.clone());
//! assert_eq!(v1.reason.as_deref(), Some("Started"));
//! let sel = FieldSelector::parse_for(ApiGroup::EventsV1, "reason=Started").unwrap();
//! assert!(sel.matches(&ev));
//! ```

// The HTTP layer's contract is `Result<_, ApiError>` (a `Status` body); errors are the cold
// path, so the size of `ApiError` is not worth a box here.
#![allow(clippy::result_large_err)]

pub mod causes;
pub mod convert;
pub mod fields;
pub mod meta;
pub mod names;
pub mod validate;

use crate::status::Resource;

/// The storage (and core/v1 wire) shape of an event.
pub type CoreEvent = k8s_openapi::api::core::v1::Event;
/// The `events.k8s.io/v1` wire shape of an event.
pub type EventsV1Event = k8s_openapi::api::events::v1::Event;

/// The API group a request came in on; validation rules and field-selector vocabulary depend
/// on it, not on the stored object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiGroup {
    /// `/api/v1` (core/v1): lax "legacy" validation, `involvedObject.*` field labels.
    Core,
    /// `/apis/events.k8s.io/v1`: strict validation, `regarding.*` field labels.
    EventsV1,
}

impl ApiGroup {
    /// The resource errors on this group are about.
    pub fn resource(self) -> Resource {
        match self {
            ApiGroup::Core => Resource::CORE_EVENTS,
            ApiGroup::EventsV1 => Resource::EVENTS_V1,
        }
    }

    /// The `apiVersion` objects of this group carry: `v1` or `events.k8s.io/v1`.
    pub fn api_version(self) -> &'static str {
        match self {
            ApiGroup::Core => "v1",
            ApiGroup::EventsV1 => "events.k8s.io/v1",
        }
    }
}
