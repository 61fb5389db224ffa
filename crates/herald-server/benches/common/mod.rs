//! The event the server benchmarks measure.

use herald_core::event::CoreEvent;
use serde_json::json;

/// Kubelet event `i` (its name, uid and message numbered) as a create leaves it: with its
/// `managedFields` entry.
pub fn kubelet_event(i: usize) -> CoreEvent {
    serde_json::from_value(json!({
        "metadata": {"name": format!("web-{i}.17f3a2b4c5d6e7f8"), "namespace": "default",
                     "uid": format!("0b9c6f2e-3d4a-4e8b-9f1a-{i:012}"),
                     "creationTimestamp": "2026-11-25T09:48:17Z",
                     "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                         "time": "2026-11-25T09:48:17Z", "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:count": {}, "f:firstTimestamp": {}, "f:involvedObject": {},
                                      "f:lastTimestamp": {}, "f:message": {}, "f:reason": {},
                                      "f:reportingComponent": {}, "f:reportingInstance": {},
                                      "f:source": {"f:component": {}, "f:host": {}}, "f:type": {}}}]},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": format!("web-{i}"),
                           "uid": "5e1d7c3a-2b4f-4a6e-8d9c-000000000001", "apiVersion": "v1",
                           "resourceVersion": "8123", "fieldPath": "spec.containers{app}"},
        "reason": "BackOff", "message": format!("Back-off restarting failed container app in pod web-{i}"),
        "source": {"component": "kubelet", "host": "node-1"}, "count": 1, "type": "Warning",
        "firstTimestamp": "2026-11-25T09:48:17Z", "lastTimestamp": "2026-11-25T09:48:17Z",
        "reportingComponent": "kubelet", "reportingInstance": "node-1",
    }))
    .expect("event")
}
