//! Which event fields the storage indexes, and which index a field-selected list reads.
//!
//! Every create and update hands the backend the values of [`INDEXED_FIELDS`] (see
//! [`crate::storage::index`]); a list or initial watch whose field selector pins one of them
//! with `=` or `==` asks the backend for the events holding that value in that slot only
//! ([`index_query`]). That is what `kubectl events --for pod/x` (involvedObject kind,
//! apiVersion and name) and `kubectl describe` (involvedObject name, namespace and uid) send,
//! and the usual `reason=`, `type=`, `source=` and `reportingComponent=`/`reportingController=`
//! queries: each costs O(matching events), not O(stored events). The selector is still applied
//! to every item the backend returns, so answers are the same as without the index; other
//! selectors scan as before.

use herald_core::event::CoreEvent;
use herald_core::event::fields::{FieldSelector, internal_field_value};

use crate::storage::{INDEX_SLOTS, IndexQuery, IndexValues};

/// The core field in each index slot (a value as [`internal_field_value`] reads it: an
/// absent field is `""`, `source` falls back to `reportingComponent`).
pub const INDEXED_FIELDS: [&str; INDEX_SLOTS] = [
    "involvedObject.name",
    "involvedObject.uid",
    "reason",
    "type",
    "source",
    "reportingComponent",
];

/// When a selector pins several indexed fields, the slot read first: the one that usually
/// matches the fewest events (a uid, a name, then a reason, a component, a type).
const PREFERENCE: [usize; INDEX_SLOTS] = [1, 0, 2, 4, 5, 3];

/// The index values of `event`, one per slot of [`INDEXED_FIELDS`]. An empty value (an
/// absent field) is not indexed: it costs every write an index entry and is rarely asked
/// for (a selector pinning `""` scans, see [`index_query`]).
pub fn values(event: &CoreEvent) -> IndexValues {
    IndexValues::of(std::array::from_fn(|slot| {
        internal_field_value(event, INDEXED_FIELDS[slot]).filter(|v| !v.is_empty())
    }))
}

/// The index to read for `fields`, if it pins an indexed field to a non-empty value.
pub fn index_query(fields: &FieldSelector) -> Option<IndexQuery> {
    PREFERENCE.iter().find_map(|&slot| {
        fields
            .requires_exact_match(INDEXED_FIELDS[slot])
            .filter(|value| !value.is_empty())
            .map(|value| IndexQuery {
                slot,
                value: value.to_owned(),
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::event::ApiGroup;

    #[test]
    fn the_most_selective_pinned_field_is_read() {
        let q = |s: &str| index_query(&FieldSelector::parse_for(ApiGroup::Core, s).unwrap());
        // kubectl events --for pod/x
        assert_eq!(
            q("involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=x"),
            Some(IndexQuery {
                slot: 0,
                value: "x".into()
            })
        );
        // kubectl describe: the uid wins over the name.
        assert_eq!(
            q("involvedObject.name=x,involvedObject.namespace=default,involvedObject.uid=u1")
                .map(|q| (q.slot, q.value)),
            Some((1, "u1".into()))
        );
        assert_eq!(q("type=Warning,reason=BackOff").map(|q| q.slot), Some(2));
        assert_eq!(q("type==Warning").map(|q| q.slot), Some(3));
        // Not pinned, or pinned to an empty value (not indexed): no index.
        assert_eq!(q("type!=Normal"), None);
        assert_eq!(q("involvedObject.uid=,reason=A").map(|q| q.slot), Some(2));
        assert_eq!(q("involvedObject.kind=Pod"), None);
        // events.k8s.io/v1 names map to the same slots.
        let v1 = FieldSelector::parse_for(ApiGroup::EventsV1, "reportingController=kubelet");
        assert_eq!(index_query(&v1.unwrap()).map(|q| q.slot), Some(5));
    }

    #[test]
    fn values_read_fields_as_selectors_do() {
        let mut ev = CoreEvent::default();
        ev.involved_object.name = Some("web-0".into());
        ev.reporting_component = Some("kubelet".into());
        let t = values(&ev).terms();
        let term = crate::storage::index::term;
        assert_eq!(t[0], Some(term("web-0")));
        assert_eq!(t[1], None, "an absent field is not indexed");
        assert_eq!(t[4], Some(term("kubelet")), "source falls back");
        assert_eq!(t[5], Some(term("kubelet")));
    }
}
