//! The traced process: started by us and held before its first instruction until the
//! probes are attached, or an already running process.
//!
//! A started target is put in its own process group, so Ctrl-C in the terminal reaches
//! only the tracer (which then stops recording while the target keeps running). It has no
//! parent-death signal: if the tracer dies, the target runs on.

use std::{
    ffi::CString,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::{Path, PathBuf},
};

/// Why the target could not be started or found.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The command was not found in `PATH`.
    #[error("command `{command}` not found")]
    NotFound {
        /// The command.
        command: String,
    },
    /// An argument contains a NUL byte.
    #[error("argument {index} contains a NUL byte")]
    NulInArgument {
        /// Its index.
        index: usize,
    },
    /// The process does not exist.
    #[error("no process with pid {pid}")]
    NoSuchProcess {
        /// The pid.
        pid: u32,
    },
    /// `/proc/PID/exe` exists but cannot be read (EACCES/EPERM: another user's process
    /// without CAP_SYS_PTRACE, or a kernel thread, which has no executable).
    #[error("cannot read the executable of pid {pid} (/proc/{pid}/exe)")]
    ExeUnreadable {
        /// The pid.
        pid: u32,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The process exists but has no executable (a kernel thread, or a zombie).
    #[error("pid {pid} has no executable (a kernel thread or an exited process)")]
    NoExecutable {
        /// The pid.
        pid: u32,
    },
    /// A system call failed.
    #[error("{call} failed")]
    Sys {
        /// The call.
        call: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The child could not `exec` the command.
    #[error("cannot execute `{command}`")]
    Exec {
        /// The command.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn sys(call: &'static str) -> TargetError {
    TargetError::Sys {
        call,
        source: std::io::Error::last_os_error(),
    }
}

/// Finds `command` like `execvp` would.
pub fn which(command: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let p = PathBuf::from(command);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(command))
        .find(|p| p.is_file())
}

/// A child forked and blocked before `exec`; [`HeldChild::release`] lets it run.
#[derive(Debug)]
pub struct HeldChild {
    pid: u32,
    go: Option<OwnedFd>,
    exec_err: OwnedFd,
    command: String,
}

impl HeldChild {
    /// Forks a child that waits for [`HeldChild::release`], then execs `argv`.
    pub fn spawn(argv: &[String]) -> Result<HeldChild, TargetError> {
        let command = argv.first().cloned().unwrap_or_default();
        let exe = which(&command).ok_or_else(|| TargetError::NotFound {
            command: command.clone(),
        })?;
        let exe_c = CString::new(exe.as_os_str().as_encoded_bytes())
            .map_err(|_| TargetError::NulInArgument { index: 0 })?;
        let args: Vec<CString> = argv
            .iter()
            .enumerate()
            .map(|(index, a)| {
                CString::new(a.as_bytes()).map_err(|_| TargetError::NulInArgument { index })
            })
            .collect::<Result<_, _>>()?;
        let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        arg_ptrs.push(std::ptr::null());

        let mut go = [0i32; 2];
        let mut err = [0i32; 2];
        // SAFETY: `pipe2` writes two fds into the arrays.
        if unsafe { libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(sys("pipe2"));
        }
        // SAFETY: as above.
        if unsafe { libc::pipe2(err.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(sys("pipe2"));
        }
        // SAFETY: fork in a process that may have threads; the child only calls
        // async-signal-safe functions (setpgid, read, close, execv, write, _exit) on data
        // prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(sys("fork"));
        }
        if pid == 0 {
            // SAFETY: child side; async-signal-safe calls only, see above.
            unsafe {
                libc::setpgid(0, 0);
                libc::close(go[1]);
                libc::close(err[0]);
                let mut b = 0u8;
                let n = libc::read(go[0], (&raw mut b).cast(), 1);
                if n == 1 {
                    libc::execv(exe_c.as_ptr(), arg_ptrs.as_ptr());
                    let e = *libc::__errno_location();
                    libc::write(err[1], (&raw const e).cast(), size_of::<i32>());
                }
                libc::_exit(127);
            }
        }
        // SAFETY: the fds were just created by pipe2 and are owned here.
        let (go_r, go_w, err_r, err_w) = unsafe {
            (
                OwnedFd::from_raw_fd(go[0]),
                OwnedFd::from_raw_fd(go[1]),
                OwnedFd::from_raw_fd(err[0]),
                OwnedFd::from_raw_fd(err[1]),
            )
        };
        drop(go_r);
        drop(err_w);
        // Also set the group from the parent side (no race on who runs first).
        // SAFETY: plain syscall on our child.
        unsafe { libc::setpgid(pid, pid) };
        Ok(HeldChild {
            pid: pid as u32,
            go: Some(go_w),
            exec_err: err_r,
            command,
        })
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Lets the child exec; returns once the exec succeeded or failed.
    pub fn release(&mut self) -> Result<(), TargetError> {
        if let Some(go) = self.go.take() {
            let b = 1u8;
            // SAFETY: writes one byte from a valid buffer to our pipe end.
            unsafe { libc::write(go.as_raw_fd(), (&raw const b).cast(), 1) };
        }
        let mut e = 0i32;
        // SAFETY: reads at most 4 bytes into `e`; EOF (0) means exec succeeded (CLOEXEC).
        let n = unsafe {
            libc::read(
                self.exec_err.as_raw_fd(),
                (&raw mut e).cast(),
                size_of::<i32>(),
            )
        };
        if n == size_of::<i32>() as isize {
            return Err(TargetError::Exec {
                command: self.command.clone(),
                source: std::io::Error::from_raw_os_error(e),
            });
        }
        Ok(())
    }

    /// Kills a child that was never released (recording failed to start).
    pub fn abort(&mut self) {
        if self.go.is_some() {
            // SAFETY: signals and reaps our own child.
            unsafe {
                libc::kill(self.pid as i32, libc::SIGKILL);
                libc::waitpid(self.pid as i32, std::ptr::null_mut(), 0);
            }
            self.go = None;
        }
    }
}

/// Checks that `pid` exists.
pub fn check_pid(pid: u32) -> Result<(), TargetError> {
    if pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(TargetError::NoSuchProcess { pid });
    }
    Ok(())
}

/// Classifies a failure to read `/proc/PID/exe`. ESRCH, or ENOENT while `/proc/PID` is
/// gone too (`proc_dir_exists` false), is [`TargetError::NoSuchProcess`]; ENOENT while
/// the process is still listed is [`TargetError::NoExecutable`] (kernel thread, zombie);
/// anything else (EACCES, EPERM, ...) is [`TargetError::ExeUnreadable`] with the OS error.
pub fn exe_error(pid: u32, source: std::io::Error, proc_dir_exists: bool) -> TargetError {
    match source.raw_os_error() {
        Some(libc::ESRCH) => TargetError::NoSuchProcess { pid },
        Some(libc::ENOENT) if !proc_dir_exists => TargetError::NoSuchProcess { pid },
        Some(libc::ENOENT) => TargetError::NoExecutable { pid },
        _ => TargetError::ExeUnreadable { pid, source },
    }
}

/// The executable of a running process.
pub fn exe_of(pid: u32) -> Result<PathBuf, TargetError> {
    let dir = PathBuf::from(format!("/proc/{pid}"));
    std::fs::read_link(dir.join("exe")).map_err(|e| exe_error(pid, e, dir.exists()))
}

/// The thread ids of a running process.
pub fn threads_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A pidfd for `pid`: readable once the process exits.
pub fn pidfd_open(pid: u32) -> Result<OwnedFd, TargetError> {
    // SAFETY: plain syscall; on success the return value is a new fd we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(sys("pidfd_open"));
    }
    // SAFETY: `fd` is a fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// How a target started by `profinfer record` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetEnd {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
    /// It ended some other way.
    Other,
}

impl TargetEnd {
    /// The exit code a shell would report for it (`128 + signal` when killed), which
    /// `profinfer record` passes on so scripts see a failing target fail.
    pub fn exit_code(self) -> u8 {
        match self {
            TargetEnd::Exited(code) => code.clamp(0, 255) as u8,
            TargetEnd::Signaled(sig) => (128 + sig).clamp(0, 255) as u8,
            TargetEnd::Other => 1,
        }
    }
}

impl std::fmt::Display for TargetEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetEnd::Exited(code) => write!(f, "target exited with status {code}"),
            TargetEnd::Signaled(sig) => write!(f, "target killed by signal {sig}"),
            TargetEnd::Other => f.write_str("target ended"),
        }
    }
}

/// Reaps our child `pid` if it exited; returns how it ended.
pub fn reap(pid: u32) -> Option<(TargetEnd, std::time::Duration)> {
    let mut status = 0i32;
    // SAFETY: `rusage` is plain data that `wait4` fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid status and rusage pointers.
    let r = unsafe { libc::wait4(pid as i32, &mut status, libc::WNOHANG, &mut usage) };
    if r != pid as i32 {
        return None;
    }
    let end = if libc::WIFEXITED(status) {
        TargetEnd::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        TargetEnd::Signaled(libc::WTERMSIG(status))
    } else {
        TargetEnd::Other
    };
    let tv = |t: libc::timeval| {
        std::time::Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000)
    };
    Some((end, tv(usage.ru_utime) + tv(usage.ru_stime)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(code: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(code)
    }

    #[test]
    fn target_end_exit_codes_follow_the_shell() {
        assert_eq!(TargetEnd::Exited(0).exit_code(), 0);
        assert_eq!(TargetEnd::Exited(2).exit_code(), 2);
        assert_eq!(TargetEnd::Signaled(9).exit_code(), 137);
        assert_eq!(
            TargetEnd::Exited(2).to_string(),
            "target exited with status 2"
        );
    }

    #[test]
    fn exe_errors_are_classified_by_errno() {
        assert!(matches!(
            exe_error(7, os(libc::ESRCH), true),
            TargetError::NoSuchProcess { pid: 7 }
        ));
        assert!(matches!(
            exe_error(7, os(libc::ENOENT), false),
            TargetError::NoSuchProcess { pid: 7 }
        ));
        assert!(matches!(
            exe_error(7, os(libc::ENOENT), true),
            TargetError::NoExecutable { pid: 7 }
        ));
        for code in [libc::EACCES, libc::EPERM, libc::ELOOP] {
            let e = exe_error(7, os(code), true);
            let TargetError::ExeUnreadable { pid: 7, source } = &e else {
                panic!("errno {code} classified as {e:?}");
            };
            assert_eq!(source.raw_os_error(), Some(code));
            assert_eq!(
                e.to_string(),
                "cannot read the executable of pid 7 (/proc/7/exe)"
            );
        }
    }

    #[test]
    fn exe_of_self_is_the_test_binary_and_kernel_threads_have_none() {
        let own = exe_of(std::process::id()).expect("own /proc/self/exe is readable");
        assert_eq!(own, std::env::current_exe().expect("current_exe"));
        // pid 2 is kthreadd on Linux: listed in /proc but without an executable.
        if Path::new("/proc/2/stat").exists() {
            let e = exe_of(2).expect_err("kthreadd has no exe");
            assert!(
                matches!(
                    e,
                    TargetError::NoExecutable { pid: 2 }
                        | TargetError::ExeUnreadable { pid: 2, .. }
                ),
                "{e:?}"
            );
        }
        assert!(matches!(
            exe_of(u32::MAX - 1),
            Err(TargetError::NoSuchProcess { .. })
        ));
    }
}
