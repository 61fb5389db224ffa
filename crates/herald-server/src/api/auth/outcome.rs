//! What authentication and authorization made of one request: the authorization
//! [`Decision`] (with kube-apiserver's reason), and the [`AuthOutcome`] through which a
//! layer *outside* the [`AuthLayer`](super::AuthLayer) (the [audit log](crate::api::audit))
//! learns who the request came from and what was decided, once the request has gone down.
//!
//! ```
//! use herald_server::api::auth::outcome::{Admitted, AuthOutcome, Decision};
//! use herald_server::api::auth::UserInfo;
//!
//! let outcome = AuthOutcome::default(); // the outer layer keeps a clone…
//! let mut req = http::Request::new(());
//! req.extensions_mut().insert(outcome.clone()); // …and hands the other down.
//! // The AuthLayer fills it in:
//! if let Some(o) = req.extensions().get::<AuthOutcome>() {
//!     o.record(Admitted {
//!         user: UserInfo::authenticated("jane", "", vec![]),
//!         decision: Some(Decision::deny(String::new())),
//!     });
//! }
//! assert_eq!(outcome.get().unwrap().user.name, "jane");
//! ```

use std::sync::{Arc, OnceLock};

use super::user::UserInfo;

/// An authorization decision, as kube-apiserver's authorizers give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why, in the authorizer's words (`RBAC: allowed by ClusterRoleBinding "…" of
    /// ClusterRole "…" to User "jane"`); empty when the authorizer gives no reason (a denial,
    /// `system:masters`, `AlwaysAllow`).
    pub reason: String,
}

impl Decision {
    /// Allowed, for `reason`.
    pub fn allow(reason: String) -> Decision {
        Decision {
            allowed: true,
            reason,
        }
    }

    /// Denied, for `reason`.
    pub fn deny(reason: String) -> Decision {
        Decision {
            allowed: false,
            reason,
        }
    }
}

/// A request that passed authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// Who it came from.
    pub user: UserInfo,
    /// The authorization decision; `None` on the [open paths](super::layer::is_open_path),
    /// which are not authorized.
    pub decision: Option<Decision>,
}

/// A slot for the [`Admitted`] of one request, shared between the layer that inserts it
/// into the request's extensions and the [`AuthLayer`](super::AuthLayer), which fills it in.
/// Empty when authentication failed (a 401) or the request never reached the auth layer.
/// Cheap to clone (one `Arc`); filled at most once.
#[derive(Debug, Clone, Default)]
pub struct AuthOutcome(Arc<OnceLock<Admitted>>);

impl AuthOutcome {
    /// Records `admitted` (a second call is ignored: a request is admitted once).
    pub fn record(&self, admitted: Admitted) {
        let _ = self.0.set(admitted);
    }

    /// What was recorded, if anything.
    pub fn get(&self) -> Option<&Admitted> {
        self.0.get()
    }
}
