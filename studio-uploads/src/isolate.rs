//! Every uploaded document is converted in a child process of its own
//! (`sasha convert-document`), so a hostile file costs at most that child:
//! a stack overflow, an abort or an allocation that fails inside `lopdf`,
//! `pdf-extract`, `zip` or `html5ever` ends the child, never studio-core with
//! sign-in, the catalogue and OAuth.
//!
//! The child confines itself before it reads a byte of the file
//! ([`confine`]): address space [`MEMORY_BYTES`], CPU [`CPU_SECONDS`], no file
//! it may write or create, at most [`OPEN_FILES`] descriptors, and a seccomp
//! filter that refuses sockets, `exec`, `fork` and opening any file. It gets
//! an empty environment and only its stdin, stdout and stderr. The parent
//! gives it [`WALL_LIMIT`] in all, reads at most [`MAX_REPLY_BYTES`] of its
//! answer, and turns any other ending into the refusal
//! [`Refusal::Exhausted`] or [`Refusal::Failed`].
//!
//! Must never: convert a file in studio-core's own process; hand the child a
//! descriptor, a variable or a path beyond its three standard streams; believe
//! more of the child's reply than its bounds allow.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use prost::Message as _;
use sasha_proto::pb;
use sasha_proto::pb::convert_reply::Outcome;

use crate::convert;
use crate::limits::{MAX_MARKDOWN_BYTES, MAX_TOTAL_BYTES};
use crate::refusal::Refusal;

/// The child's address space. A 19 MB, 1,500-page text PDF peaks at 107 MiB
/// resident (measured, debug build); the rest is room for the converter
/// thread's 64 MiB stack and the allocator's reservations.
pub const MEMORY_BYTES: u64 = 2 << 30;
/// The child's CPU time. That PDF takes 11.7 s in a debug build (the PDF
/// crates optimised, see the root `Cargo.toml`); past this the kernel ends
/// the child (SIGXCPU, then SIGKILL a second later).
pub const CPU_SECONDS: u64 = 20;
/// The child's wall-clock time, for a child that waits instead of computing.
pub const WALL_LIMIT: Duration = Duration::from_secs(30);
/// Descriptors the child may hold: its three streams and what the runtime
/// needs for one converter thread.
pub const OPEN_FILES: u64 = 16;
/// Most bytes of a reply the parent reads: the longest Markdown with its
/// truncation note, and the framing.
const MAX_REPLY_BYTES: u64 = MAX_MARKDOWN_BYTES as u64 + 64 * 1024;
/// Most bytes of a request the child reads: one file of an upload.
const MAX_REQUEST_BYTES: u64 = MAX_TOTAL_BYTES as u64 + 64 * 1024;
/// Stack of the child's converter thread: third-party parsers recurse, and
/// their nesting is bounded, but not tightly (HTML depth, PDF forms).
const CONVERT_STACK_BYTES: usize = 64 * 1024 * 1024;
/// The longest refusal reason taken from a child.
const MAX_REASON_CHARS: usize = 300;

/// How studio-core starts a conversion child.
#[derive(Debug, Clone)]
pub struct Converter {
    program: PathBuf,
    args: Vec<OsString>,
    wall: Duration,
}

impl Converter {
    /// This executable's `convert-document` command: studio-core runs as
    /// `sasha serve studio-core`, so the child is the same binary.
    pub fn this_executable() -> std::io::Result<Converter> {
        Ok(Converter::command(
            std::env::current_exe()?,
            ["convert-document"],
            WALL_LIMIT,
        ))
    }

    /// `program` with `args` as the child, given `wall` in all.
    pub fn command(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
        wall: Duration,
    ) -> Converter {
        Converter {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            wall,
        }
    }

    /// Converts `data`, whose name ends in `.<extension>`, in a child: what
    /// [`convert::convert`] would answer, or the refusal for a child that
    /// did not answer. Blocking.
    pub fn convert(&self, extension: Option<&str>, data: &[u8]) -> Result<String, Refusal> {
        let request = pb::ConvertRequest {
            extension: extension.map(str::to_owned),
            data: data.to_vec(),
        }
        .encode_to_vec();
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| {
                tracing::error!(%error, program = %self.program.display(), "cannot start a document conversion");
                Refusal::Failed
            })?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Refusal::Failed);
        };
        let (sender, received) = mpsc::channel();
        let read = std::thread::scope(|scope| {
            // A child that stops reading must not hold the parent: the writer
            // ends with the child (EPIPE), the reader at its end of file.
            scope.spawn(move || {
                let _ = stdin.write_all(&request);
            });
            scope.spawn(move || {
                let mut reply = Vec::new();
                let outcome = stdout
                    .take(MAX_REPLY_BYTES + 1)
                    .read_to_end(&mut reply)
                    .map(|_| reply);
                let _ = sender.send(outcome);
            });
            let read = received.recv_timeout(self.wall);
            if read.is_err() {
                let _ = child.kill();
            }
            read
        });
        let status = child.wait();
        let reply = match (read, status) {
            (Err(_), _) => {
                tracing::warn!(
                    limit_ms = self.wall.as_millis(),
                    "a document conversion ran out of time and was stopped"
                );
                return Err(Refusal::Exhausted);
            }
            (Ok(Err(error)), _) | (_, Err(error)) => {
                tracing::error!(%error, "cannot read a document conversion's answer");
                return Err(Refusal::Failed);
            }
            (Ok(Ok(reply)), Ok(status)) if !status.success() => {
                let signal = status.signal();
                tracing::warn!(
                    ?signal,
                    code = status.code(),
                    bytes = reply.len(),
                    "a document conversion ended abnormally"
                );
                // Killed by its limits (SIGXCPU, SIGKILL), an allocation that
                // failed (SIGABRT) or a stack that overflowed (SIGSEGV).
                return Err(if signal.is_some() {
                    Refusal::Exhausted
                } else {
                    Refusal::Failed
                });
            }
            (Ok(Ok(reply)), Ok(_)) => reply,
        };
        if reply.len() as u64 > MAX_REPLY_BYTES {
            tracing::error!(
                bytes = reply.len(),
                "a document conversion answered more than it may"
            );
            return Err(Refusal::Failed);
        }
        match pb::ConvertReply::decode(reply.as_slice()) {
            Ok(pb::ConvertReply {
                outcome: Some(Outcome::Markdown(markdown)),
            }) if markdown.len() <= MAX_MARKDOWN_BYTES + 1024 => Ok(markdown),
            Ok(pb::ConvertReply {
                outcome: Some(Outcome::Refused(reason)),
            }) => Err(Refusal::Reported(bounded_reason(&reason))),
            _ => {
                tracing::error!(
                    bytes = reply.len(),
                    "a document conversion's answer is not a reply"
                );
                Err(Refusal::Failed)
            }
        }
    }
}

/// A child's reason, as one bounded line.
fn bounded_reason(reason: &str) -> String {
    reason
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_REASON_CHARS)
        .collect()
}

/// `sasha convert-document`: the child. Confines itself, reads one
/// [`pb::ConvertRequest`] from stdin, writes one [`pb::ConvertReply`] to
/// stdout. Exit status 0 with a reply; otherwise non-zero with nothing.
pub fn run_child() -> ExitCode {
    if let Err(error) = confine() {
        eprintln!("sasha convert-document: cannot confine the conversion: {error}");
        return ExitCode::from(3);
    }
    let mut input = Vec::new();
    if std::io::stdin()
        .lock()
        .take(MAX_REQUEST_BYTES)
        .read_to_end(&mut input)
        .is_err()
    {
        return ExitCode::from(4);
    }
    let Ok(request) = pb::ConvertRequest::decode(input.as_slice()) else {
        return ExitCode::from(4);
    };
    drop(input);
    let converted = std::thread::Builder::new()
        .name("sasha-convert".to_owned())
        .stack_size(CONVERT_STACK_BYTES)
        .spawn(move || convert::convert(request.extension.as_deref(), &request.data))
        .map_err(|_| Refusal::Failed)
        .and_then(|worker| worker.join().unwrap_or(Err(Refusal::Failed)));
    let outcome = match converted {
        Ok(markdown) => Outcome::Markdown(markdown),
        Err(refusal) => Outcome::Refused(refusal.reason()),
    };
    let reply = pb::ConvertReply {
        outcome: Some(outcome),
    }
    .encode_to_vec();
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(&reply)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::from(5);
    }
    ExitCode::SUCCESS
}

/// The child's limits and syscall filter, applied to itself before it reads
/// the file.
fn confine() -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let limit = |resource, value: u64, hard: u64| {
        setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(hard),
            },
        )
        .map_err(|error| format!("{resource:?}: {error}"))
    };
    limit(Resource::As, MEMORY_BYTES, MEMORY_BYTES)?;
    // The soft limit sends SIGXCPU; the hard one, a second later, SIGKILL.
    limit(Resource::Cpu, CPU_SECONDS, CPU_SECONDS + 1)?;
    limit(Resource::Fsize, 0, 0)?;
    limit(Resource::Core, 0, 0)?;
    limit(Resource::Nofile, OPEN_FILES, OPEN_FILES)?;
    seccomp()
}

/// Refuses (EPERM) every syscall that would reach a network, start a
/// program or process, or open a file; the converters need none of them.
fn seccomp() -> Result<(), String> {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    // x86_64 keeps the older calls that aarch64 has only as `*at` forms.
    #[cfg(target_arch = "x86_64")]
    let legacy = [
        libc::SYS_fork,
        libc::SYS_vfork,
        libc::SYS_open,
        libc::SYS_creat,
    ];
    #[cfg(not(target_arch = "x86_64"))]
    let legacy: [libc::c_long; 0] = [];
    let refused = [
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept,
        libc::SYS_accept4,
        libc::SYS_sendto,
        libc::SYS_sendmsg,
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_openat,
        libc::SYS_openat2,
        libc::SYS_ptrace,
    ];
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|error| error.to_string())?;
    let filter = SeccompFilter::new(
        refused
            .iter()
            .chain(&legacy)
            .map(|call| (*call, Vec::new()))
            .collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|error| error.to_string())?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|error: seccompiler::BackendError| error.to_string())?;
    seccompiler::apply_filter(&program).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests;
