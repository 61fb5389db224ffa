//! Which events a reading command (`get`, `tail`, `top`) looks at: a namespace or all of
//! them (`-A`), one object (`--for`), some types (`--types`). The object and a single type
//! become a server-side field selector; everything is also checked client side, so a server
//! that ignores a selector still shows the right events.

use k8s_openapi::api::core::v1::Event;
use kube::Api;

use crate::connect::Connection;
use crate::for_object::{ForArg, ForObject};
use crate::usage::UsageError;

/// The flags that choose events.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterArgs {
    /// Events in all namespaces
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only events about this object, e.g. pod/web-1, deployment/api, node/node-1
    #[arg(long = "for", value_name = "KIND/NAME")]
    pub for_object: Option<String>,
    /// Only events of these types, comma-separated: Normal, Warning
    #[arg(long, value_name = "TYPES", value_delimiter = ',')]
    pub types: Vec<String>,
}

/// The validated flags, before the kind in `--for` is resolved against the server.
#[derive(Debug, Clone)]
pub struct Checked {
    all_namespaces: bool,
    for_arg: Option<ForArg>,
    types: Vec<String>,
}

impl FilterArgs {
    /// Checks `--for` and `--types` without contacting the server.
    pub fn check(&self) -> Result<Checked, UsageError> {
        let for_arg = self.for_object.as_deref().map(ForArg::parse).transpose()?;
        let mut types = Vec::new();
        for t in &self.types {
            let canonical = match t.trim() {
                t if t.eq_ignore_ascii_case("normal") => "Normal",
                t if t.eq_ignore_ascii_case("warning") => "Warning",
                _ => {
                    return Err(UsageError(format!(
                        "--types {t:?}: valid types are Normal and Warning"
                    )));
                }
            };
            if !types.iter().any(|x| x == canonical) {
                types.push(canonical.to_string());
            }
        }
        Ok(Checked {
            all_namespaces: self.all_namespaces,
            for_arg,
            types,
        })
    }
}

impl Checked {
    /// Resolves `--for` (see [`crate::for_object::resolve`]) into the query to run.
    pub async fn resolve(self, conn: &Connection) -> anyhow::Result<EventQuery> {
        let object = match &self.for_arg {
            Some(a) => Some(crate::for_object::resolve(a, conn).await?),
            None => None,
        };
        Ok(EventQuery {
            all_namespaces: self.all_namespaces,
            namespace: conn.namespace.clone(),
            object,
            types: self.types,
        })
    }
}

/// A resolved choice of events.
#[derive(Debug, Clone)]
pub struct EventQuery {
    /// `-A`.
    pub all_namespaces: bool,
    /// The namespace when not `-A`.
    pub namespace: String,
    /// `--for`, resolved.
    pub object: Option<ForObject>,
    /// `--types`, canonical; empty = all.
    pub types: Vec<String>,
}

impl EventQuery {
    /// The events API this query reads.
    pub fn api(&self, client: kube::Client) -> Api<Event> {
        if self.all_namespaces {
            Api::all(client)
        } else {
            Api::namespaced(client, &self.namespace)
        }
    }

    /// The field selector the server can apply, if any.
    pub fn field_selector(&self) -> Option<String> {
        let mut terms = Vec::new();
        if let Some(o) = &self.object {
            terms.push(o.field_selector());
        }
        if let [only] = self.types.as_slice() {
            terms.push(format!("type={only}"));
        }
        (!terms.is_empty()).then(|| terms.join(","))
    }

    /// Whether `event` is one this query shows.
    pub fn matches(&self, event: &Event) -> bool {
        let type_ok = self.types.is_empty()
            || event
                .type_
                .as_deref()
                .is_some_and(|t| self.types.iter().any(|x| x.eq_ignore_ascii_case(t)));
        let object_ok = self
            .object
            .as_ref()
            .is_none_or(|o| o.matches(&event.involved_object));
        type_ok && object_ok
    }

    /// Where the query looks, for messages: `namespace default`, `all namespaces`.
    pub fn scope(&self) -> String {
        if self.all_namespaces {
            "all namespaces".to_string()
        } else {
            format!("namespace {}", self.namespace)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::for_object::builtin;

    fn args(for_object: Option<&str>, types: &[&str]) -> FilterArgs {
        FilterArgs {
            all_namespaces: false,
            for_object: for_object.map(str::to_string),
            types: types.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn types_are_checked_and_canonical() {
        let c = args(None, &["warning", "Warning", "NORMAL"])
            .check()
            .unwrap();
        assert_eq!(c.types, ["Warning", "Normal"]);
        let e = args(None, &["Error"]).check().unwrap_err();
        assert_eq!(
            e.0,
            r#"--types "Error": valid types are Normal and Warning"#
        );
        assert!(args(Some("web"), &[]).check().is_err());
    }

    #[test]
    fn selector_and_client_side_match() {
        let q = EventQuery {
            all_namespaces: false,
            namespace: "default".into(),
            object: Some(ForObject {
                kind: builtin("pod", None).unwrap(),
                name: "web-1".into(),
            }),
            types: vec!["Warning".into()],
        };
        assert_eq!(
            q.field_selector().as_deref(),
            Some("involvedObject.kind=Pod,involvedObject.name=web-1,type=Warning")
        );
        let mut e = Event::default();
        e.involved_object.kind = Some("Pod".into());
        e.involved_object.name = Some("web-1".into());
        e.type_ = Some("Warning".into());
        assert!(q.matches(&e));
        e.type_ = Some("Normal".into());
        assert!(!q.matches(&e));
        let both = EventQuery {
            object: None,
            types: vec!["Normal".into(), "Warning".into()],
            ..q
        };
        assert_eq!(both.field_selector(), None);
        assert!(both.matches(&e));
    }
}
