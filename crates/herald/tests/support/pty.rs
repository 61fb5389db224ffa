//! The `herald` binary in a real pseudo-terminal (portable-pty), its output interpreted by a
//! terminal emulator (vt100), so tests assert what a person would see on the screen.
//!
//! Every wait is bounded by [`SCREEN_GUARD`] and wakes on new output (no sleeps): a reader
//! thread feeds the emulator and signals each chunk.

use std::ffi::OsStr;
use std::io::{Read as _, Write as _};
use std::num::NonZeroU16;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

/// How long a test waits for the screen to show what it expects, or for the program to exit.
pub const SCREEN_GUARD: Duration = Duration::from_secs(30);

/// A program running in a pseudo-terminal; killed when dropped.
pub struct Pty {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn std::io::Write + Send>,
    parser: Arc<Mutex<vt100::Parser>>,
    /// Everything the program wrote, raw (bounded by the tests' short runs).
    raw: Arc<Mutex<Vec<u8>>>,
    output: Receiver<()>,
    _master: Box<dyn MasterPty + Send>,
    what: String,
}

impl Pty {
    /// Runs `herald ARGS…` in a `rows`×`cols` terminal with `env` added (and `NO_COLOR`
    /// removed, so colors are on as for a person).
    pub fn herald<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        args: &[&str],
        env: &[(K, V)],
        rows: u16,
        cols: u16,
    ) -> Pty {
        let system = native_pty_system();
        let pair = system
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pseudo-terminal");
        let mut cmd = CommandBuilder::new(super::herald_bin());
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("NO_COLOR");
        cmd.env_remove("RUST_LOG");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair
            .slave
            .spawn_command(cmd)
            .expect("start herald in the pty");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let nz = |n: u16| NonZeroU16::new(n).expect("a non-empty terminal");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(nz(rows), nz(cols), 0)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (tx, output) = channel();
        {
            let parser = parser.clone();
            let raw = raw.clone();
            // Ends at EOF, i.e. when the program (and everything holding the pty) exits.
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            parser.lock().unwrap().process(&buf[..n]);
                            raw.lock().unwrap().extend_from_slice(&buf[..n]);
                            if tx.send(()).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
        Pty {
            child,
            writer,
            parser,
            raw,
            output,
            _master: pair.master,
            what: format!("herald {}", args.join(" ")),
        }
    }

    /// The visible screen, one string per row (trailing spaces trimmed).
    pub fn lines(&self) -> Vec<String> {
        let p = self.parser.lock().unwrap();
        let (_, cols) = p.screen().size();
        p.screen()
            .rows(0, cols.get())
            .map(|r| r.trim_end().to_string())
            .collect()
    }

    /// The visible screen as one string.
    pub fn text(&self) -> String {
        self.lines().join("\n")
    }

    /// Waits until `pred(screen rows)` holds, failing with the screen after
    /// [`SCREEN_GUARD`].
    #[track_caller]
    pub fn wait_for(&self, what: &str, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + SCREEN_GUARD;
        loop {
            let lines = self.lines();
            if pred(&lines) {
                return lines;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(()) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    let lines = self.lines();
                    assert!(
                        pred(&lines),
                        "{} ended before the screen showed {what}:\n{}",
                        self.what,
                        lines.join("\n")
                    );
                    return lines;
                }
                Err(RecvTimeoutError::Timeout) => panic!(
                    "{} did not show {what} within {SCREEN_GUARD:?}; screen:\n{}",
                    self.what,
                    lines.join("\n")
                ),
            }
        }
    }

    /// Types `bytes` (e.g. `b"q"`, or `b"\x03"` for Ctrl-C).
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write to the pty");
        self.writer.flush().expect("flush the pty");
    }

    /// Waits (bounded) for the program to exit and returns its exit code.
    #[track_caller]
    pub fn wait_exit(&mut self) -> u32 {
        let deadline = Instant::now() + SCREEN_GUARD;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the child") {
                self.drain(deadline);
                return status.exit_code();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{} did not exit within {SCREEN_GUARD:?}; screen:\n{}",
                self.what,
                self.text()
            );
            match self.output.recv_timeout(left) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                // The pty closed: the program is gone or going; reap it.
                Err(RecvTimeoutError::Disconnected) => {
                    return self.child.wait().expect("reap the child").exit_code();
                }
            }
        }
    }

    /// Takes in what the program wrote before it exited (until the pty reports EOF).
    fn drain(&self, deadline: Instant) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(()) => {}
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "{}: the terminal stayed open {SCREEN_GUARD:?} after the program exited",
                    self.what
                ),
            }
        }
    }

    /// Everything written to the terminal so far, escape codes included.
    pub fn raw(&self) -> Vec<u8> {
        self.raw.lock().unwrap().clone()
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}
