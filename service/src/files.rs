//! The open flags of every file a role reads or writes below a folder whose
//! contents it does not trust (a package folder, an upload area): folders and
//! files are opened one segment at a time relative to their parent's
//! descriptor with these, so a planted link is never followed.
//!
//! What it must never do: follow a link, block on a FIFO, or hand a
//! descriptor to a child process.

use rustix::fs::OFlags;

/// Flags of every folder open: a folder, read-only, never a link.
pub const FOLDER_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC);
/// Flags of every file read: never a link, never blocking on a FIFO, never
/// becoming a controlling terminal.
pub const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);
/// Flags of the temporary file of a write: a new file, never a link.
pub const CREATE_FLAGS: OFlags = OFlags::CREATE
    .union(OFlags::EXCL)
    .union(OFlags::WRONLY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
