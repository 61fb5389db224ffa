//! `--token-auth-file`: kube-apiserver's static token file, a CSV of
//! `token,user,uid[,"group1,group2"]` lines.
//!
//! Parsed as kube-apiserver's `tokenfile` authenticator does (Go's `encoding/csv` with a
//! variable number of fields and leading spaces trimmed): a line with fewer than three
//! columns is an error naming the file and line; a line with an empty token is skipped with a
//! warning; a token listed twice keeps the later line (with a warning). Empty lines are
//! skipped. The file is read once at start (kube-apiserver does not reload it either).
//!
//! ```
//! use herald_server::api::auth::token::TokenFile;
//! let tokens = TokenFile::parse("tokens.csv", "s3cr3t,jane,42,\"dev,ops\"\n").unwrap();
//! let jane = tokens.user("s3cr3t").unwrap();
//! assert_eq!(jane.name, "jane");
//! assert_eq!(jane.groups, ["dev", "ops", "system:authenticated"]);
//! assert!(tokens.user("wrong").is_none());
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::user::UserInfo;

/// A start-up error in the token file: the file, the line (1-based) and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("reading token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid record.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong and what the line must look like.
        message: String,
    },
}

/// The tokens of a token file, each mapped to its user. Its `Debug` shows the users, never
/// the tokens.
#[derive(Clone, Default)]
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("users", &self.users.len())
            .finish()
    }
}

impl TokenFile {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<TokenFile, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses the text of a token file; `path` only names it in errors and warnings.
    pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<TokenFile, TokenFileError> {
        let path = path.as_ref();
        let mut users = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line_no = n + 1;
            let bad = |message: String| TokenFileError::Line {
                path: path.to_path_buf(),
                line: line_no,
                message,
            };
            if line.trim().is_empty() {
                continue;
            }
            let fields = csv_fields(line).map_err(|m| bad(m.to_string()))?;
            if fields.len() < 3 {
                return Err(bad(format!(
                    "a token line must have at least 3 columns (token, user name, user uid), found {}",
                    fields.len()
                )));
            }
            let token = fields[0].clone();
            if token.is_empty() {
                tracing::warn!(file = %path.display(), line = line_no, "skipped a token line with an empty token");
                continue;
            }
            let groups = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let user = UserInfo::authenticated(fields[1].clone(), fields[2].clone(), groups);
            if users.insert(token, user).is_some() {
                tracing::warn!(file = %path.display(), line = line_no, "a token is listed twice; the later line wins");
            }
        }
        Ok(TokenFile { users })
    }

    /// The user of `token`, if the file lists it.
    pub fn user(&self, token: &str) -> Option<&UserInfo> {
        self.users.get(token)
    }

    /// How many tokens the file holds.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the file holds no token.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// The fields of one CSV line (RFC 4180 quoting with `""` escapes; leading spaces of a field
/// trimmed, as Go's `TrimLeadingSpace`). A quoted field cannot span lines.
fn csv_fields(line: &str) -> Result<Vec<String>, &'static str> {
    let mut fields = Vec::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("a quoted field is not closed on its line"),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(_) => return Err("extraneous text after a quoted field"),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => break,
                    Some('"') => return Err("a bare \" in an unquoted field"),
                    Some(c) => field.push(c),
                }
            }
            fields.push(field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_quotes() {
        assert_eq!(csv_fields("a,b,c").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            csv_fields(r#"t, u,1,"g1,g2""#).unwrap(),
            ["t", "u", "1", "g1,g2"]
        );
        assert_eq!(csv_fields(r#""a""b",x"#).unwrap(), [r#"a"b"#, "x"]);
        assert_eq!(csv_fields("a,,").unwrap(), ["a", "", ""]);
        assert!(csv_fields(r#""open,x"#).is_err());
        assert!(csv_fields(r#""a"b,x"#).is_err());
    }

    #[test]
    fn users_groups_and_skips() {
        let f = TokenFile::parse(
            "t.csv",
            "tok1,jane,1\n\n,nobody,2\ntok2,bob,3,\"a, b,,c\"\ntok1,later,4\n",
        )
        .unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f.user("tok1").unwrap().name, "later");
        assert_eq!(
            f.user("tok2").unwrap().groups,
            ["a", "b", "c", "system:authenticated"]
        );
        assert_eq!(f.user("tok2").unwrap().uid, "3");
        assert!(f.user("").is_none());
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let e = TokenFile::parse("/etc/tokens.csv", "a,b,c\nonly,two\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/tokens.csv:2: a token line must have at least 3 columns (token, user name, user uid), found 2"
        );
        let e = TokenFile::parse("t.csv", "a,b,\"c\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv:1: a quoted field is not closed on its line"
        );
    }

    #[test]
    fn debug_never_shows_tokens() {
        let f = TokenFile::parse("t.csv", "supersecret,jane,1\n").unwrap();
        assert!(!format!("{f:?}").contains("supersecret"));
    }
}
