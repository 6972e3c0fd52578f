//! Seeing at once that the target exited. The collector learns it from its own pidfd,
//! but then drains, detaches and writes the footer before the final frame can be built;
//! meanwhile no tick comes and the screen would stand still without a word. The render
//! loop polls this pidfd (never blocking) and says "target exited" right away.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Whether a process has exited, from a pidfd.
#[derive(Debug)]
pub struct ExitWatch {
    /// `None` once the exit was seen, or when the kernel gives no pidfd.
    fd: Option<OwnedFd>,
    exited: bool,
}

impl ExitWatch {
    /// Watches `pid`. A pid that no longer exists has exited; any other failure (no
    /// `pidfd_open`) gives a watch that never reports an exit.
    pub fn new(pid: u32) -> ExitWatch {
        // SAFETY: plain syscall; on success the return value is a new fd we own.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            let gone = std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            return ExitWatch {
                fd: None,
                exited: gone,
            };
        }
        ExitWatch {
            // SAFETY: `fd` is a fresh fd owned by nobody else.
            fd: Some(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
            exited: false,
        }
    }

    /// Whether the process has exited (a zombie not yet reaped has). Does not block.
    pub fn exited(&mut self) -> bool {
        if let Some(fd) = &self.fd {
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, timeout 0.
            let n = unsafe { libc::poll(&mut p, 1, 0) };
            if n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0 {
                self.exited = true;
                self.fd = None;
            }
        }
        self.exited
    }
}

#[cfg(test)]
mod tests {
    use std::{
        process::Command,
        time::{Duration, Instant},
    };

    use super::*;

    #[test]
    fn sees_a_child_exit_before_it_is_reaped() {
        let mut child = Command::new("sleep")
            .arg("0.2")
            .spawn()
            .expect("sleep runs");
        let mut watch = ExitWatch::new(child.id());
        assert!(!watch.exited(), "still running");
        let start = Instant::now();
        while !watch.exited() {
            assert!(start.elapsed() < Duration::from_secs(10), "exit not seen");
            std::thread::sleep(Duration::from_millis(10));
        }
        // A zombie: exited, not reaped yet.
        assert!(watch.exited());
        child.wait().expect("reaped");
    }

    #[test]
    fn a_pid_that_is_gone_has_exited() {
        let mut child = Command::new("true").spawn().expect("true runs");
        let pid = child.id();
        child.wait().expect("reaped");
        // The pid may be reused by then in theory; on a quiet test machine it is not.
        assert!(ExitWatch::new(pid).exited());
    }
}
