//! The source tree's unit tests: reads, writes and deletes of app files
//! under the docs root, path checks, races and every refusal. This file
//! holds the fixture and helpers; the tests are in `paths`, `files` and
//! `links`.

use std::collections::BTreeMap;

use super::*;

mod files;
mod links;
mod paths;

/// The file engine's own tests check no policy: every change passes.
const NO_VET: Vet<'static> = &|_, _| Ok(());

const APP: &str = "demo";
const MANIFEST_TEXT: &str = "---\nid: demo\n---\nA demo.\n";

/// `<tmp>/apps/demo` (holding `APP.md`) and `<tmp>/outside`, a folder no call
/// may ever touch.
struct Fixture {
    root: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let fixture = Fixture {
            root: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(fixture.app()).unwrap();
        std::fs::create_dir_all(fixture.outside()).unwrap();
        fixture.put("APP.md", MANIFEST_TEXT.as_bytes());
        fixture
    }

    fn apps(&self) -> PathBuf {
        self.root.path().join("apps")
    }

    fn app(&self) -> PathBuf {
        self.apps().join(APP)
    }

    fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }

    /// The tree, with `openat2` and with the plain `openat` fallback.
    fn trees(&self) -> [SourceTree; 2] {
        [self.tree(), self.tree_without_openat2()]
    }

    fn tree(&self) -> SourceTree {
        SourceTree::new(&self.apps())
    }

    fn tree_without_openat2(&self) -> SourceTree {
        let tree = SourceTree::new(&self.apps());
        tree.openat2.store(false, Ordering::Relaxed);
        tree
    }

    /// Writes a file into the package directly (creating its folders).
    fn put(&self, path: &str, bytes: &[u8]) {
        let full = self.app().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, bytes).unwrap();
    }

    fn get(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.app().join(path)).ok()
    }

    /// Every entry below the temp root, links not followed: what a refused
    /// call must leave exactly as it was.
    fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut entries = BTreeMap::new();
        let mut pending = vec![self.root.path().to_owned()];
        while let Some(folder) = pending.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                let described = if meta.file_type().is_symlink() {
                    format!("link {:?}", std::fs::read_link(&path).unwrap())
                } else if meta.is_dir() {
                    pending.push(path.clone());
                    "folder".to_owned()
                } else {
                    format!("file {}", version_of(&std::fs::read(&path).unwrap()))
                };
                entries.insert(path, described);
            }
        }
        entries
    }

    fn outside_names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.outside())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn sha(text: &str) -> String {
    version_of(text.as_bytes())
}

fn code<T: fmt::Debug>(result: Result<T, AppError>) -> ErrorCode {
    result.expect_err("the call must be refused").code
}

fn error<T: fmt::Debug>(result: Result<T, AppError>) -> AppError {
    result.expect_err("the call must be refused")
}

fn check(path: &str, expected: PathRule) {
    assert_eq!(check_path(path), Err(expected), "path {path:?}");
}
