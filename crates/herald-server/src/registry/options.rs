//! List, watch and delete parameters, parsed from query strings and validated the way
//! kube-apiserver validates `ListOptions` (422 `ListOptions.meta.k8s.io "" is invalid`).

use herald_core::event::causes::{forbidden, invalid, not_supported, not_supported_repr};
use herald_core::event::fields::FieldSelector;
use herald_core::event::meta::go_string_slice;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_core::labels::Selector;
use herald_core::status::{ApiError, FieldCause, Resource};

/// `resourceVersionMatch=Exact`.
pub const MATCH_EXACT: &str = "Exact";
/// `resourceVersionMatch=NotOlderThan`.
pub const MATCH_NOT_OLDER_THAN: &str = "NotOlderThan";

/// The query parameters of a list or watch (kube's `ListOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (0 or negative = no limit).
    pub limit: Option<i64>,
    /// `continue`.
    pub continue_: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `timeoutSeconds` (watch only): 0 means the server default, a negative one has already
    /// passed (the watch ends at once, as in kube-apiserver).
    pub timeout_seconds: Option<i64>,
    /// `watch`.
    pub watch: bool,
}

/// A query-string boolean as kube-apiserver decodes its options
/// (`runtime.Convert_Slice_string_To_bool`): only `0` and `false` (in any case) are false;
/// anything else, an empty value included, is true. It never fails.
pub fn parse_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

fn parse_int(key: &str, v: &str) -> Result<i64, ApiError> {
    v.parse::<i64>().map_err(|_| {
        ApiError::bad_request(format!("invalid value for {key}: {v:?} is not an integer"))
    })
}

impl ListParams {
    /// Parses decoded query pairs; unknown keys are ignored (kube ignores them too), bad
    /// integers are 400s (booleans cannot be bad, see [`parse_bool`]).
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ApiError> {
        let mut p = ListParams::default();
        // kube-apiserver decodes each option from the first of repeated keys.
        let mut seen = std::collections::HashSet::new();
        for (k, v) in pairs {
            if !seen.insert(k) {
                continue;
            }
            match k {
                "labelSelector" => p.label_selector = Some(v.to_string()),
                "fieldSelector" => p.field_selector = Some(v.to_string()),
                "limit" => p.limit = Some(parse_int(k, v)?),
                "continue" => p.continue_ = Some(v.to_string()),
                "resourceVersion" => p.resource_version = Some(v.to_string()),
                "resourceVersionMatch" => p.resource_version_match = Some(v.to_string()),
                "sendInitialEvents" => p.send_initial_events = Some(parse_bool(v)),
                "allowWatchBookmarks" => p.allow_watch_bookmarks = parse_bool(v),
                "timeoutSeconds" => p.timeout_seconds = Some(parse_int(k, v)?),
                "watch" => p.watch = parse_bool(v),
                _ => {}
            }
        }
        Ok(p)
    }

    /// The resourceVersion, `None` when absent or empty.
    pub fn rv(&self) -> Option<&str> {
        self.resource_version.as_deref().filter(|s| !s.is_empty())
    }

    /// The resourceVersionMatch, `None` when absent or empty.
    pub fn rv_match(&self) -> Option<&str> {
        self.resource_version_match
            .as_deref()
            .filter(|s| !s.is_empty())
    }

    /// The continue token, `None` when absent or empty.
    pub fn continue_token(&self) -> Option<&str> {
        self.continue_.as_deref().filter(|s| !s.is_empty())
    }

    /// kube's `ValidateListOptions`: 422 with kind `ListOptions` on violations.
    pub fn validate(&self) -> Result<(), ApiError> {
        let mut causes = Vec::new();
        const F: &str = "resourceVersionMatch";
        if self.watch {
            if self.send_initial_events.is_some() && self.rv_match() != Some(MATCH_NOT_OLDER_THAN) {
                causes.push(forbidden(
                    F,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if let Some(m) = self.rv_match() {
                if self.send_initial_events.is_none() {
                    causes.push(forbidden(
                        F,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != MATCH_NOT_OLDER_THAN {
                    causes.push(not_supported(F, m, &[MATCH_NOT_OLDER_THAN]));
                }
                if self.continue_token().is_some() {
                    causes.push(forbidden(
                        F,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            if let Some(m) = self.rv_match() {
                if self.rv().is_none() {
                    causes.push(forbidden(
                        F,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if self.continue_token().is_some() {
                    causes.push(forbidden(
                        F,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if m != MATCH_EXACT && m != MATCH_NOT_OLDER_THAN {
                    causes.push(not_supported(
                        F,
                        m,
                        &[MATCH_EXACT, MATCH_NOT_OLDER_THAN, ""],
                    ));
                }
                if m == MATCH_EXACT && self.rv() == Some("0") {
                    causes.push(forbidden(
                        F,
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.send_initial_events.is_some() {
                causes.push(forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(options_invalid("ListOptions", causes))
        }
    }
}

/// `dryRun=All`, the one value kube accepts.
pub const DRY_RUN_ALL: &str = "All";

/// The `fieldValidation` values kube accepts, in the order its messages list them.
pub const FIELD_VALIDATION_VALUES: [&str; 4] = ["", "Ignore", "Strict", "Warn"];

/// Whether `values` (the `dryRun` values of a request) ask for a dry run: some were sent,
/// all `All`. Requests with other values are refused before anything is written
/// ([`dry_run_causes`]).
pub fn asks_dry_run(values: &[String]) -> bool {
    !values.is_empty() && values.iter().all(|v| v == DRY_RUN_ALL)
}

/// kube's `ValidateDryRun`: every `dryRun` value sent must be `All` (an empty one too is
/// refused). The cause quotes the values as Go prints a `[]string`:
/// `Unsupported value: []string{"Foo"}: supported values: "All"`.
pub fn dry_run_causes(values: &[String]) -> Vec<FieldCause> {
    if values.iter().all(|v| v == DRY_RUN_ALL) {
        return Vec::new();
    }
    vec![not_supported_repr(
        "dryRun",
        &go_string_slice(values),
        &[DRY_RUN_ALL],
    )]
}

/// kube's `ValidateFieldValidation`: `fieldValidation`, when sent, is empty, `Ignore`,
/// `Strict` or `Warn`.
pub fn field_validation_causes(value: Option<&str>) -> Vec<FieldCause> {
    match value {
        Some(v) if !FIELD_VALIDATION_VALUES.contains(&v) => {
            vec![not_supported(
                "fieldValidation",
                v,
                &FIELD_VALIDATION_VALUES,
            )]
        }
        _ => Vec::new(),
    }
}

/// A 422 about request options (`<Kind>.meta.k8s.io "" is invalid: …`).
pub fn options_invalid(kind: &'static str, causes: Vec<FieldCause>) -> ApiError {
    let r = Resource {
        group: "meta.k8s.io",
        resource: kind,
        kind,
    };
    let mut e = ApiError::invalid(r, "", causes);
    if let Some(rest) = e.message.strip_prefix(kind) {
        e.message = format!("{kind}.meta.k8s.io{rest}");
    }
    e
}

/// Label and field selectors of a list or watch, compiled for one group.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    labels: Selector,
    fields: FieldSelector,
}

impl Filter {
    /// Compiles the selectors of `p` for `group`; with `name`, the field selector must pin
    /// (or is set to) `metadata.name=<name>`. Bad selectors are 400s.
    pub fn new(group: ApiGroup, p: &ListParams, name: Option<&str>) -> Result<Self, ApiError> {
        let labels = match p.label_selector.as_deref() {
            Some(s) if !s.trim().is_empty() => Selector::parse(s)?,
            _ => Selector::everything(),
        };
        let mut fields = match p.field_selector.as_deref() {
            Some(s) if !s.trim().is_empty() => FieldSelector::parse_for(group, s)?,
            _ => FieldSelector::everything(),
        };
        if let Some(name) = name {
            fields = fields.for_single_object(name)?;
        }
        Ok(Filter { labels, fields })
    }

    /// True when it matches every event.
    pub fn is_everything(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// The storage index that narrows a list with this filter, if its field selector pins an
    /// indexed field ([`super::index`]).
    pub fn index_query(&self) -> Option<crate::storage::IndexQuery> {
        super::index::index_query(&self.fields)
    }

    /// Whether `event` passes both selectors.
    pub fn matches(&self, event: &CoreEvent) -> bool {
        self.fields.matches(event) && self.labels.matches_opt(event.metadata.labels.as_ref())
    }
}

/// The parameters of a delete (kube's `DeleteOptions`, from the body or the query).
///
/// Herald has no garbage collector and events have no dependents, so neither
/// `propagationPolicy` nor `orphanDependents` changes what a delete does. In particular herald
/// never adds the `orphan` or `foregroundDeletion` finalizers kube-apiserver would add for the
/// garbage collector to remove later: with nobody to remove them, an event deleted with
/// `propagationPolicy: Foreground` would stay until its TTL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteParams {
    /// Every `dryRun` value the request sent. `All` checks everything and deletes nothing
    /// ([`DeleteParams::is_dry_run`]); any other value is refused ([`dry_run_causes`]).
    pub dry_run: Vec<String>,
    /// `preconditions.uid`: delete only if the object has this uid (else 409).
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`: delete only at this resourceVersion (else 409).
    pub precondition_resource_version: Option<String>,
    /// `propagationPolicy` (validated; see the type docs for why it changes nothing).
    pub propagation_policy: Option<String>,
    /// `orphanDependents` (deprecated in kube; validated). `Some(false)` makes the delete of
    /// an event that is only marked for deletion (it has finalizers) answer 202 instead of
    /// 200, as kube-apiserver does.
    pub orphan_dependents: Option<bool>,
    /// `gracePeriodSeconds` (validated; events are deleted at once).
    pub grace_period_seconds: Option<i64>,
}

impl DeleteParams {
    /// Whether the request asked for a dry run (`dryRun=All`).
    pub fn is_dry_run(&self) -> bool {
        asks_dry_run(&self.dry_run)
    }

    /// kube's `ValidateDeleteOptions`: `orphanDependents` and `propagationPolicy` are not both
    /// set, propagationPolicy is one of Orphan, Background, Foreground, and every `dryRun`
    /// value is `All` (422 `DeleteOptions`, all causes in one).
    pub fn validate(&self) -> Result<(), ApiError> {
        let mut causes = Vec::new();
        if self.orphan_dependents.is_some()
            && let Some(p) = self.propagation_policy.as_deref()
        {
            causes.push(invalid(
                "propagationPolicy",
                p,
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if let Some(p) = self.propagation_policy.as_deref()
            && !["Orphan", "Background", "Foreground"].contains(&p)
        {
            causes.push(not_supported(
                "propagationPolicy",
                p,
                &["Background", "Foreground", "Orphan", "nil"],
            ));
        }
        causes.extend(dry_run_causes(&self.dry_run));
        if causes.is_empty() {
            Ok(())
        } else {
            Err(options_invalid("DeleteOptions", causes))
        }
    }
}

#[cfg(test)]
mod query_tests {
    use super::*;

    #[test]
    fn booleans_are_false_only_for_0_and_false() {
        for v in ["", "1", "true", "t", "f", "F", "no", "yes", "maybe"] {
            assert!(parse_bool(v), "{v:?}");
        }
        for v in ["0", "false", "FALSE", "FaLsE"] {
            assert!(!parse_bool(v), "{v:?}");
        }
    }

    #[test]
    fn dry_run_and_field_validation_causes() {
        assert!(dry_run_causes(&[]).is_empty());
        assert!(dry_run_causes(&["All".into(), "All".into()]).is_empty());
        let c = dry_run_causes(&["All".into(), "Foo".into()]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "dryRun");
        assert_eq!(c[0].reason, "FieldValueNotSupported");
        assert_eq!(
            c[0].message,
            r#"Unsupported value: []string{"All", "Foo"}: supported values: "All""#
        );
        for ok in [None, Some(""), Some("Ignore"), Some("Warn"), Some("Strict")] {
            assert!(field_validation_causes(ok).is_empty(), "{ok:?}");
        }
        let c = field_validation_causes(Some("strict"));
        assert_eq!(
            c[0].message,
            r#"Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn""#
        );
        let p = DeleteParams {
            dry_run: vec!["x".into()],
            propagation_policy: Some("Sideways".into()),
            ..DeleteParams::default()
        };
        let e = p.validate().unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.causes
                .iter()
                .map(|c| c.field.as_str())
                .collect::<Vec<_>>(),
            ["propagationPolicy", "dryRun"]
        );
    }

    #[test]
    fn the_first_of_repeated_keys_counts() {
        let p = ListParams::from_pairs([
            ("watch", "1"),
            ("watch", "0"),
            ("limit", "5"),
            ("limit", "x"),
        ])
        .unwrap();
        assert!(p.watch);
        assert_eq!(p.limit, Some(5));
    }
}
