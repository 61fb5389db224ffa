//! The mirror's persisted position: the source resourceVersion up to which the copy is
//! complete, in `<data>/mirror-position.json` (owner-only, replaced atomically).
//!
//! ```json
//! {"source":"https://10.0.0.1:6443","group":"v1","resourceVersion":"48213"}
//! ```
//!
//! A position is only used for the source and API group it was taken from: a file naming
//! another source (the kubeconfig now points elsewhere) or group is ignored, and the mirror
//! lists the source from scratch, reconciling by uid.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The file name of the position, in the data directory.
pub const POSITION_FILE: &str = "mirror-position.json";

/// What the file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Position {
    /// The source's URL (the kubeconfig's cluster server).
    pub source: String,
    /// The API group followed: `v1` (core) or `events.k8s.io/v1`.
    pub group: String,
    /// The source resourceVersion the copy is complete up to.
    pub resource_version: String,
}

/// Where the position lives: a file, or nowhere (a `--store memory` server, whose copy does
/// not outlive it either).
#[derive(Debug, Clone)]
pub struct PositionFile {
    path: Option<PathBuf>,
}

impl PositionFile {
    /// The position file in `data` (`None`: not persisted).
    pub fn new(data: Option<&Path>) -> Self {
        PositionFile {
            path: data.map(|d| d.join(POSITION_FILE)),
        }
    }

    /// The persisted position for `source` and `group`, if there is one. An unreadable or
    /// malformed file, or one for another source or group, is logged and ignored (the
    /// mirror then relists, which loses nothing).
    pub fn load(&self, source: &str, group: &str) -> Option<String> {
        let path = self.path.as_ref()?;
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "cannot read the mirror position; listing the source again");
                return None;
            }
        };
        match serde_json::from_slice::<Position>(&text) {
            Ok(p) if p.source == source && p.group == group && !p.resource_version.is_empty() => {
                Some(p.resource_version)
            }
            Ok(p) => {
                tracing::info!(file = %path.display(), source = %p.source, group = %p.group,
                    "the mirror position is for another source or API group; listing the source again");
                None
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "the mirror position is malformed; listing the source again");
                None
            }
        }
    }

    /// Replaces the persisted position (synced before it is renamed into place). Call it
    /// only once every local write the position covers is durable.
    pub async fn save(&self, position: Position) -> anyhow::Result<()> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || {
            let text = serde_json::to_vec(&position).context("encoding the mirror position")?;
            herald_server::files::write_private(&path, &text)
                .with_context(|| format!("cannot write the mirror position {}", path.display()))
        })
        .await
        .context("the mirror position writer stopped")?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rv: &str) -> Position {
        Position {
            source: "https://a:6443".into(),
            group: "v1".into(),
            resource_version: rv.into(),
        }
    }

    #[tokio::test]
    async fn saved_positions_load_for_their_source_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = PositionFile::new(Some(dir.path()));
        assert_eq!(file.load("https://a:6443", "v1"), None);
        file.save(at("17")).await.unwrap();
        file.save(at("42")).await.unwrap();
        assert_eq!(file.load("https://a:6443", "v1").as_deref(), Some("42"));
        assert_eq!(file.load("https://b:6443", "v1"), None);
        assert_eq!(file.load("https://a:6443", "events.k8s.io/v1"), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join(POSITION_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[tokio::test]
    async fn a_malformed_file_is_no_position() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(POSITION_FILE), b"{not json").unwrap();
        let file = PositionFile::new(Some(dir.path()));
        assert_eq!(file.load("https://a:6443", "v1"), None);
        // Without a data directory nothing is written or read.
        let none = PositionFile::new(None);
        none.save(at("1")).await.unwrap();
        assert_eq!(none.load("https://a:6443", "v1"), None);
    }
}
