//! What Herald knows of the events schema: the group versions it serves
//! ([`GroupVersion`]), the OpenAPI documents and the checks driven by them ([`openapi`]),
//! and a decoder that tells known fields from unknown ones in one pass ([`known_fields`]).

pub mod known_fields;
pub mod openapi;

/// The `events.k8s.io` group name.
pub const EVENTS_GROUP: &str = "events.k8s.io";

/// One API group version Herald serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupVersion {
    /// Group; empty for core.
    pub group: &'static str,
    /// Version, `v1`.
    pub version: &'static str,
}

impl GroupVersion {
    /// core/v1.
    pub const CORE_V1: GroupVersion = GroupVersion {
        group: "",
        version: "v1",
    };
    /// events.k8s.io/v1.
    pub const EVENTS_V1: GroupVersion = GroupVersion {
        group: EVENTS_GROUP,
        version: "v1",
    };

    /// The version Herald serves `group` in.
    pub fn of(group: herald_core::event::ApiGroup) -> GroupVersion {
        match group {
            herald_core::event::ApiGroup::Core => GroupVersion::CORE_V1,
            herald_core::event::ApiGroup::EventsV1 => GroupVersion::EVENTS_V1,
        }
    }

    /// `v1` or `events.k8s.io/v1`.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}
