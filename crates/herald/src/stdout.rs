//! Writing results to stdout. A reader that went away (`herald get events | head`,
//! `herald emit … | true`) is not an error: the output ends quietly, as it does for other
//! Unix tools. Every other write error is reported (`print!` would panic on either).

use std::io::Write as _;

/// True when `e`, anywhere in its chain, is a write to a closed pipe.
pub fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            // serde_json keeps its I/O error inside rather than as a source.
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|j| j.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
    })
}

/// `written` (the outcome of writing a command's output to stdout), with a closed pipe
/// turned into success and any other error said to be about stdout.
pub fn finish(written: anyhow::Result<()>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    match written {
        Err(e) if broken_pipe(&e) => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// Writes `text` to stdout and flushes it, as the raw I/O result (for callers that carry
/// on whatever happens, like `serve`).
pub fn write(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes `text` to stdout: `Ok` when written or when the reader has gone away.
pub fn print(text: &str) -> anyhow::Result<()> {
    finish(write(text).map_err(anyhow::Error::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    fn pipe_error() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::BrokenPipe)
    }

    #[test]
    fn a_closed_pipe_is_found_anywhere_in_the_chain() {
        let e = anyhow::Error::from(pipe_error()).context("writing the events as YAML");
        assert!(broken_pipe(&e));
        assert!(finish(Err(e)).is_ok());
        let json = serde_json::Error::io(pipe_error());
        assert!(broken_pipe(&anyhow::Error::from(json).context("x")));
    }

    #[test]
    fn other_write_errors_are_reported_as_about_stdout() {
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let e = finish(Err(anyhow::Error::from(full))).unwrap_err();
        assert!(!broken_pipe(&e));
        assert!(format!("{e:#}").starts_with("writing to stdout: "), "{e:#}");
        let plain: anyhow::Result<()> = Err(anyhow::anyhow!("no")).context("ctx");
        assert!(finish(plain).is_err());
    }
}
