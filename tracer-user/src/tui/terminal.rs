//! The terminal while the live view runs: [`TerminalGuard`] draws on `/dev/tty` in raw
//! mode on the alternate screen and restores it on drop; [`StdioRedirect`] sends this
//! process's stdout/stderr (and so the target's, which inherits them, and the
//! collector's messages) to a log file so nothing scribbles over the view. A panic hook
//! undoes both before the panic message is printed.

use std::{
    fs::{File, OpenOptions},
    io,
    os::fd::{AsRawFd, RawFd},
    path::{Path, PathBuf},
    sync::{
        Once,
        atomic::{AtomicI32, Ordering},
    },
};

use ratatui::{
    Terminal,
    backend::CrosstermBackend,
    crossterm::{
        cursor::{Hide, Show},
        execute,
        terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode},
    },
};

/// Why the live view could not take the terminal.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    /// `/dev/tty` could not be opened (no controlling terminal).
    #[error("the live view needs a terminal: cannot open /dev/tty")]
    NoTty {
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Raw mode, the alternate screen or the first draw failed.
    #[error("setting up the terminal failed")]
    Setup {
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The log file for the target's output could not be created.
    #[error("cannot create the target output log {}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `dup`/`dup2` of stdout or stderr failed.
    #[error("redirecting stdout/stderr failed")]
    Redirect {
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// The ratatui terminal the live view draws on.
pub type LiveTerminal = Terminal<CrosstermBackend<File>>;

/// Raw mode + alternate screen on `/dev/tty`, undone on drop.
pub struct TerminalGuard {
    /// The terminal to draw on.
    pub terminal: LiveTerminal,
}

impl TerminalGuard {
    /// Takes the terminal (and installs the panic hook once).
    pub fn enter() -> Result<TerminalGuard, TerminalError> {
        let mut tty = open_tty().map_err(|source| TerminalError::NoTty { source })?;
        install_panic_hook();
        enable_raw_mode().map_err(|source| TerminalError::Setup { source })?;
        if let Err(source) = execute!(tty, EnterAlternateScreen, Hide) {
            restore_terminal();
            return Err(TerminalError::Setup { source });
        }
        match Terminal::new(CrosstermBackend::new(tty)) {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(source) => {
                restore_terminal();
                Err(TerminalError::Setup { source })
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn open_tty() -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open("/dev/tty")
}

/// Leaves raw mode and the alternate screen (idempotent enough to call twice).
fn restore_terminal() {
    let _ = disable_raw_mode();
    if let Ok(mut tty) = open_tty() {
        let _ = execute!(tty, LeaveAlternateScreen, Show);
    }
}

/// Saved stdout/stderr while redirected (-1: not redirected), for the panic hook.
static SAVED_STDOUT: AtomicI32 = AtomicI32::new(-1);
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);

/// Stdout and stderr of this process (and of children started meanwhile) go to a
/// file until dropped.
#[derive(Debug)]
pub struct StdioRedirect {
    path: PathBuf,
}

impl StdioRedirect {
    /// Redirects fds 1 and 2 to `path` (created or truncated).
    pub fn to_file(path: &Path) -> Result<StdioRedirect, TerminalError> {
        let file = File::create(path).map_err(|source| TerminalError::Log {
            path: path.to_path_buf(),
            source,
        })?;
        let redirect = |fd: RawFd, saved: &AtomicI32| -> io::Result<()> {
            // SAFETY: `dup` of an fd this process owns; the copy is owned by `saved`.
            let copy = unsafe { libc::dup(fd) };
            if copy < 0 {
                return Err(io::Error::last_os_error());
            }
            // Relaxed: the value is only read by this thread or the panic hook after it.
            saved.store(copy, Ordering::Relaxed);
            // SAFETY: `file` is open; `fd` is 1 or 2.
            if unsafe { libc::dup2(file.as_raw_fd(), fd) } < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        };
        let result = redirect(libc::STDOUT_FILENO, &SAVED_STDOUT)
            .and_then(|()| redirect(libc::STDERR_FILENO, &SAVED_STDERR));
        if let Err(source) = result {
            restore_stdio();
            return Err(TerminalError::Redirect { source });
        }
        Ok(StdioRedirect {
            path: path.to_path_buf(),
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StdioRedirect {
    fn drop(&mut self) {
        restore_stdio();
    }
}

/// Puts the saved stdout/stderr back (once).
fn restore_stdio() {
    for (fd, saved) in [
        (libc::STDOUT_FILENO, &SAVED_STDOUT),
        (libc::STDERR_FILENO, &SAVED_STDERR),
    ] {
        let copy = saved.swap(-1, Ordering::Relaxed);
        if copy >= 0 {
            // SAFETY: `copy` is the fd saved by `to_file` and owned by us; it is closed
            // after being duplicated back onto 1 or 2.
            unsafe {
                libc::dup2(copy, fd);
                libc::close(copy);
            }
        }
    }
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            restore_stdio();
            previous(info);
        }));
    });
}
