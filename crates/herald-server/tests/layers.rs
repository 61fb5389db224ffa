//! The server's layers import only downward (see the crate docs): `storage` ← `registry` ←
//! `api` ← `server`. Cargo enforces the crate boundaries (herald-wire cannot import the
//! server); this test enforces the module boundaries inside the crate, by reading the source.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lines of the files under `src/<layer>` (and `src/<layer>.rs`) that name a module of
/// `forbidden` through `crate::` (in a `use`, a path or a doc link), comments that only
/// talk about it excepted.
fn offending_lines(layer: &str, forbidden: &[&str]) -> Vec<String> {
    offending_lines_in(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        layer,
        forbidden,
    )
}

fn offending_lines_in(src: &Path, layer: &str, forbidden: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    if src.join(layer).is_dir() {
        files.extend(sources(&src.join(layer)));
    }
    if src.join(format!("{layer}.rs")).is_file() {
        files.push(src.join(format!("{layer}.rs")));
    }
    assert!(!files.is_empty(), "no sources for layer {layer}");
    let mut bad = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") && !code.starts_with("///") && !code.starts_with("//!") {
                continue;
            }
            for module in forbidden {
                let direct = format!("crate::{module}");
                let hit = code.match_indices(&direct).any(|(at, m)| {
                    // `crate::api` but not `crate::apis_of_something`.
                    !code[at + m.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
                }) || grouped(code).any(|name| name == *module);
                if hit {
                    bad.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    bad
}

/// The first path segments of the `crate::{…}` groups on `line` (one line of them).
fn grouped(line: &str) -> impl Iterator<Item = &str> {
    line.match_indices("crate::{")
        .filter_map(move |(at, m)| {
            let rest = &line[at + m.len()..];
            rest.find('}').map(|end| &rest[..end])
        })
        .flat_map(|group| group.split(','))
        .map(|item| item.trim().split("::").next().unwrap_or(""))
}

#[test]
fn storage_imports_no_layer_above_it() {
    let bad = offending_lines("storage", &["registry", "api", "server"]);
    assert!(bad.is_empty(), "storage reaches up:\n{}", bad.join("\n"));
}

#[test]
fn the_registry_imports_neither_http_nor_the_server() {
    let bad = offending_lines("registry", &["api", "server"]);
    assert!(
        bad.is_empty(),
        "the registry reaches up:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_http_layer_reaches_events_only_through_the_registry() {
    let bad = offending_lines("api", &["storage", "server"]);
    assert!(
        bad.is_empty(),
        "the API skips the registry:\n{}",
        bad.join("\n")
    );
}

/// The check itself finds what it is for: upward imports in either form are reported,
/// comments and look-alike names are not.
#[test]
fn the_check_finds_an_upward_import() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("registry")).unwrap();
    std::fs::write(
        dir.path().join("registry/x.rs"),
        "use crate::api::events;\n\
         // crate::api in a comment\n\
         use crate::apis_elsewhere;\n\
         use crate::{storage, api::output};\n\
         /// See [`crate::api::output`].\n",
    )
    .unwrap();
    let bad = offending_lines_in(dir.path(), "registry", &["api"]);
    assert_eq!(bad.len(), 3, "{bad:#?}");
    assert!(bad[0].ends_with(":1: use crate::api::events;"));
    assert!(bad[1].ends_with(":4: use crate::{storage, api::output};"));
    assert!(bad[2].ends_with(":5: /// See [`crate::api::output`]."));
}
