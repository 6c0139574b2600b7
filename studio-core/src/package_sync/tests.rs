//! Two working copies (two `DOCS_ROOT`s, as two replicas on two nodes have)
//! settled against one core database: what each gives, takes, keeps aside
//! and refuses. The replicas behind a real proxy are in
//! `tests/process/core_replicas.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use studio_store::Store;

use super::*;

struct Node {
    docs: tempfile::TempDir,
    sync: PackageSync,
}

impl Node {
    fn new() -> Node {
        let docs = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(docs.path().join("apps")).unwrap();
        let sync = PackageSync::open(docs.path());
        Node { docs, sync }
    }

    /// The same docs folder as a restarted process opens it.
    fn restarted(self) -> Node {
        let sync = PackageSync::open(self.docs.path());
        Node { sync, ..self }
    }

    fn app(&self, id: &str) -> PathBuf {
        self.docs.path().join("apps").join(id)
    }

    fn write(&self, id: &str, path: &str, text: &str) {
        let file = self.app(id).join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    fn settle(&self, store: &Store, id: &str) -> Settled {
        let heads = store.package_head_generations().unwrap();
        self.sync.settle(store, id, &heads).unwrap()
    }

    fn files(&self, id: &str) -> BTreeMap<String, String> {
        files_under(&self.app(id))
    }
}

fn files_under(dir: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut stack = vec![(dir.to_owned(), String::new())];
    while let Some((folder, prefix)) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{prefix}{}", entry.file_name().to_str().unwrap());
            if entry.file_type().unwrap().is_dir() {
                stack.push((entry.path(), format!("{name}/")));
            } else {
                found.insert(name, std::fs::read_to_string(entry.path()).unwrap());
            }
        }
    }
    found
}

fn text(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
        .collect()
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("core.sqlite")).unwrap();
    (dir, store)
}

#[test]
fn a_folder_no_replica_gave_is_given_and_another_replica_takes_it_whole() {
    let (_db, store) = store();
    let (one, two) = (Node::new(), Node::new());
    one.write("notes", "APP.md", "manifest");
    one.write("notes", "ui/index.html", "<p>");
    assert_eq!(one.settle(&store, "notes"), Settled::Gave(1));
    assert_eq!(two.settle(&store, "notes"), Settled::Took(1));
    assert_eq!(
        two.files("notes"),
        text(&[("APP.md", "manifest"), ("ui/index.html", "<p>")])
    );
    // Settling again changes nothing on either side.
    assert_eq!(one.settle(&store, "notes"), Settled::Unchanged);
    assert_eq!(two.settle(&store, "notes"), Settled::Unchanged);
}

#[test]
fn each_change_moves_the_head_one_generation_and_reaches_the_other_replica() {
    let (_db, store) = store();
    let (one, two) = (Node::new(), Node::new());
    one.write("notes", "APP.md", "v1");
    one.settle(&store, "notes");
    two.settle(&store, "notes");
    two.write("notes", "APP.md", "v2");
    two.write("notes", "extra.css", "p{}");
    assert_eq!(two.settle(&store, "notes"), Settled::Gave(2));
    assert_eq!(one.settle(&store, "notes"), Settled::Took(2));
    assert_eq!(
        one.files("notes"),
        text(&[("APP.md", "v2"), ("extra.css", "p{}")])
    );
    // A removed file is removed on the other side too.
    std::fs::remove_file(one.app("notes").join("extra.css")).unwrap();
    assert_eq!(one.settle(&store, "notes"), Settled::Gave(3));
    assert_eq!(two.settle(&store, "notes"), Settled::Took(3));
    assert_eq!(two.files("notes"), text(&[("APP.md", "v2")]));
}

#[test]
fn a_removed_package_is_removed_everywhere_and_can_come_back() {
    let (_db, store) = store();
    let (one, two) = (Node::new(), Node::new());
    one.write("notes", "APP.md", "v1");
    one.settle(&store, "notes");
    two.settle(&store, "notes");
    std::fs::remove_dir_all(one.app("notes")).unwrap();
    assert_eq!(one.settle(&store, "notes"), Settled::Gave(2));
    assert_eq!(two.settle(&store, "notes"), Settled::Took(2));
    assert!(!two.app("notes").exists());
    two.write("notes", "APP.md", "again");
    assert_eq!(two.settle(&store, "notes"), Settled::Gave(3));
    assert_eq!(one.settle(&store, "notes"), Settled::Took(3));
    assert_eq!(one.files("notes"), text(&[("APP.md", "again")]));
}

#[test]
fn two_replicas_changing_one_package_at_once_keep_the_first_and_set_the_second_aside() {
    let (_db, store) = store();
    let (one, two) = (Node::new(), Node::new());
    one.write("notes", "APP.md", "v1");
    one.settle(&store, "notes");
    two.settle(&store, "notes");
    one.write("notes", "APP.md", "one's change");
    two.write("notes", "APP.md", "two's change");
    assert_eq!(one.settle(&store, "notes"), Settled::Gave(2));
    assert_eq!(two.sync.overtaken("notes"), 0);
    let Settled::Overtaken(kept) = two.settle(&store, "notes") else {
        panic!("the second change must lose to the head");
    };
    assert_eq!(two.sync.overtaken("notes"), 1);
    assert_eq!(two.files("notes"), text(&[("APP.md", "one's change")]));
    // Nothing is lost: the losing folder is kept whole, outside the apps folder.
    assert!(kept.starts_with(two.docs.path().join(CONFLICTS_DIR)));
    assert_eq!(files_under(&kept), text(&[("APP.md", "two's change")]));
    let head = store.package_head("notes").unwrap().unwrap();
    assert_eq!(head.generation, 2);
}

#[test]
fn a_restarted_replica_gives_what_was_edited_while_it_was_stopped() {
    let (_db, store) = store();
    let one = Node::new();
    one.write("notes", "APP.md", "v1");
    one.settle(&store, "notes");
    let one = one.restarted();
    one.write("notes", "APP.md", "edited while stopped");
    assert_eq!(one.settle(&store, "notes"), Settled::Gave(2));
    assert_eq!(
        store.package_head("notes").unwrap().unwrap().files.unwrap()["APP.md"],
        b"edited while stopped"
    );
}

#[test]
fn a_restarted_replica_takes_what_others_changed_while_it_was_stopped() {
    let (_db, store) = store();
    let (one, two) = (Node::new(), Node::new());
    one.write("notes", "APP.md", "v1");
    one.settle(&store, "notes");
    two.settle(&store, "notes");
    let two = two.restarted();
    one.write("notes", "APP.md", "v2");
    one.settle(&store, "notes");
    assert_eq!(two.settle(&store, "notes"), Settled::Took(2));
    assert_eq!(two.files("notes"), text(&[("APP.md", "v2")]));
}

#[test]
fn a_new_replica_whose_folder_differs_takes_the_head_and_keeps_its_folder_aside() {
    let (_db, store) = store();
    let (one, fresh) = (Node::new(), Node::new());
    one.write("notes", "APP.md", "the head");
    one.settle(&store, "notes");
    fresh.write("notes", "APP.md", "an older copy");
    assert!(matches!(
        fresh.settle(&store, "notes"),
        Settled::Overtaken(_)
    ));
    assert_eq!(fresh.files("notes"), text(&[("APP.md", "the head")]));
    // A new replica whose folder already matches simply adopts it.
    let same = Node::new();
    same.write("notes", "APP.md", "the head");
    assert_eq!(same.settle(&store, "notes"), Settled::Took(1));
}

#[test]
fn a_folder_that_cannot_be_read_in_full_is_not_given() {
    let (_db, store) = store();
    let (one, two) = (Node::new(), Node::new());
    one.write("notes", "APP.md", "v1");
    one.settle(&store, "notes");
    two.settle(&store, "notes");
    std::os::unix::fs::symlink("/etc/passwd", one.app("notes").join("linked.md")).unwrap();
    assert!(matches!(
        one.settle(&store, "notes"),
        Settled::Unreadable(_)
    ));
    assert_eq!(store.package_head("notes").unwrap().unwrap().generation, 1);
    assert_eq!(two.settle(&store, "notes"), Settled::Unchanged);
}

#[test]
fn the_shared_folder_and_hidden_folders_are_never_packages() {
    let (_db, store) = store();
    let one = Node::new();
    one.write(crate::seed::SHARED, "x.css", "p{}");
    one.write(".hidden", "APP.md", "no");
    one.write("notes", "APP.md", "v1");
    let heads = store.package_head_generations().unwrap();
    assert_eq!(
        one.sync.known_ids(&heads).into_iter().collect::<Vec<_>>(),
        ["notes"]
    );
}

#[test]
fn a_settle_on_heads_read_before_this_replicas_own_advance_gives_the_folder() {
    let (_db, store) = store();
    let one = Node::new();
    let stale = store.package_head_generations().unwrap();
    one.write("notes", "APP.md", "v1");
    assert_eq!(one.settle(&store, "notes"), Settled::Gave(1));
    // A second settle began before the first advanced, and the folder
    // changed again meanwhile: the change is this replica's, not a loss.
    one.write("notes", "APP.md", "v2");
    assert_eq!(
        one.sync.settle(&store, "notes", &stale).unwrap(),
        Settled::Gave(2)
    );
    assert_eq!(one.files("notes"), text(&[("APP.md", "v2")]));
    assert_eq!(one.sync.overtaken("notes"), 0);
}
