//! Every entry below a folder with its inode, modification and change times,
//! for tests that prove a folder was left untouched. Shared by the process
//! tests (`tests/common`) and, through a `#[path]` module, by studio-core's
//! seeding tests.
#![allow(dead_code, unreachable_pub)]

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// Every entry below `dir` (itself included) with its inode, modification and
/// change times: any write, removal or rename changes one of them.
pub fn identities(dir: &Path) -> Vec<(PathBuf, u64, i64, i64, i64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        out.push((
            path.clone(),
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        ));
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
    }
    out.sort();
    out
}
