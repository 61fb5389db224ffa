//! Mistakes on the command line that clap cannot see (a malformed `--for`, an unknown kind,
//! a `--plot` file with an unknown extension): one line that says what to fix, exit code 2.

use std::fmt;

/// A command-line mistake found after parsing. `main` prints it as one line and exits with
/// status 2, like clap's own usage errors; every other error exits with status 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Returns early with a [`UsageError`] built like `format!`.
macro_rules! usage_bail {
    ($($arg:tt)*) => {
        return Err($crate::usage::UsageError(format!($($arg)*)).into())
    };
}
pub(crate) use usage_bail;

/// The exit status for an error: 2 for a [`UsageError`] anywhere in its chain, else 1.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_others_1() {
        let usage = anyhow::Error::from(UsageError("--for needs KIND/NAME".into()));
        assert_eq!(exit_code(&usage), 2);
        assert_eq!(exit_code(&usage.context("emitting")), 2);
        assert_eq!(exit_code(&anyhow::anyhow!("cannot reach x")), 1);
    }
}
