//! Links, collisions and races: names that collide by case or form,
//! symlinked and hard-linked files and folders that are never followed, a
//! folder swapped for a symlink mid-call, and writers racing on one version.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::os::unix::fs::symlink;
use std::sync::Barrier;
use std::sync::atomic::AtomicUsize;
use std::thread;

use rustix::fs::{RenameFlags, inotify};

use super::*;

// ---- E6 collisions ------------------------------------------------------

#[test]
fn e6_names_differing_only_by_case_or_form_collide() {
    let fixture = Fixture::new();
    fixture.put("app.js", b"app");
    fixture.put("lib/x.js", b"x");
    fixture.put("e\u{301}.js", b"nfd");
    fixture.put("\u{212a}elvin.js", b"kelvin sign");
    let before = fixture.snapshot();
    let tree = fixture.tree();
    let refused = error(tree.write(APP, "App.js", "x", None, NO_VET));
    assert_eq!(refused.code, ErrorCode::Conflict);
    assert!(
        refused
            .message
            .starts_with("App.js collides with existing app.js"),
        "{}",
        refused.message
    );
    let refused = error(tree.write(APP, "LIB/y.js", "x", None, NO_VET));
    assert!(
        refused
            .message
            .starts_with("LIB collides with existing lib"),
        "{}",
        refused.message
    );
    assert_eq!(
        code(tree.write(APP, "lib/X.js", "x", None, NO_VET)),
        ErrorCode::Conflict
    );
    // The NFC form of a name that exists on disk in NFD.
    assert_eq!(
        code(tree.write(APP, "\u{e9}.js", "x", None, NO_VET)),
        ErrorCode::Conflict
    );
    // A plain `k` against a Kelvin sign on disk.
    assert_eq!(
        code(tree.write(APP, "kelvin.js", "x", None, NO_VET)),
        ErrorCode::Conflict
    );
    // Sent with the Kelvin sign itself, the path is not NFC: the catalogue
    // expects 409 here, the spec's "paths must be NFC" wins with 400.
    assert_eq!(
        code(tree.write(APP, "\u{212a}.js", "x", None, NO_VET)),
        ErrorCode::InputInvalid
    );
    assert_eq!(fixture.snapshot(), before);
    // The existing name itself is replaced as usual.
    tree.write(APP, "app.js", "new", Some(&sha("app")), NO_VET)
        .unwrap();
    tree.write(APP, "lib/y.js", "new", None, NO_VET).unwrap();
}

// ---- E7 links and races -------------------------------------------------

#[test]
fn e7_a_symlinked_folder_is_never_followed() {
    let fixture = Fixture::new();
    std::fs::write(fixture.outside().join("x.js"), b"outside").unwrap();
    symlink(fixture.outside(), fixture.app().join("lib")).unwrap();
    std::fs::create_dir(fixture.app().join("a")).unwrap();
    symlink(fixture.outside(), fixture.app().join("a/lib")).unwrap();
    let before = fixture.snapshot();
    for tree in fixture.trees() {
        let refused = error(tree.write(APP, "lib/x.js", "pwned", None, NO_VET));
        assert_eq!(refused.code, ErrorCode::InputInvalid);
        assert_eq!(
            refused.message,
            "lib is a symbolic link; the source tools never follow links"
        );
        for refused in [
            error(tree.write(APP, "lib/x.js", "pwned", Some(&sha("outside")), NO_VET)),
            error(tree.write(APP, "lib/new.js", "pwned", None, NO_VET)),
            error(tree.write(APP, "lib/new/y.js", "pwned", None, NO_VET)),
            error(tree.read(APP, "lib/x.js")),
            error(tree.edit(APP, "lib/x.js", "outside", "pwned", &sha("outside"), NO_VET)),
            error(tree.delete(APP, "lib/x.js", &sha("outside"), NO_VET)),
        ] {
            assert_eq!(refused.code, ErrorCode::InputInvalid);
        }
        let nested = error(tree.write(APP, "a/lib/x.js", "pwned", Some(&sha("outside")), NO_VET));
        assert_eq!(
            nested.message,
            "a/lib is a symbolic link; the source tools never follow links"
        );
        let listed = tree.list(APP).unwrap();
        assert!(
            listed.iter().all(|file| !file.path.contains("lib")),
            "{listed:?}"
        );
    }
    assert_eq!(fixture.snapshot(), before);
    assert_eq!(fixture.outside_names(), ["x.js"]);
}

#[test]
fn e7_a_symlinked_file_is_never_written_through() {
    let fixture = Fixture::new();
    std::fs::write(fixture.outside().join("target.js"), b"outside").unwrap();
    symlink(
        fixture.outside().join("target.js"),
        fixture.app().join("app.js"),
    )
    .unwrap();
    // A dangling link: creating "through" it would create outside/new.js.
    symlink(
        fixture.outside().join("new.js"),
        fixture.app().join("new.js"),
    )
    .unwrap();
    let before = fixture.snapshot();
    for tree in fixture.trees() {
        let refused = error(tree.write(APP, "app.js", "pwned", Some(&sha("outside")), NO_VET));
        assert_eq!(refused.code, ErrorCode::InputInvalid);
        assert_eq!(
            refused.message,
            "app.js is a symbolic link; the source tools never follow links"
        );
        for refused in [
            error(tree.write(APP, "app.js", "pwned", None, NO_VET)),
            error(tree.write(APP, "new.js", "pwned", None, NO_VET)),
            error(tree.read(APP, "app.js")),
            error(tree.edit(APP, "app.js", "outside", "pwned", &sha("outside"), NO_VET)),
            error(tree.delete(APP, "app.js", &sha("outside"), NO_VET)),
        ] {
            assert_eq!(refused.code, ErrorCode::InputInvalid);
        }
    }
    assert_eq!(fixture.snapshot(), before);
    assert_eq!(fixture.outside_names(), ["target.js"]);
}

#[test]
fn e7_a_symlinked_app_folder_is_refused() {
    let fixture = Fixture::new();
    std::fs::create_dir(fixture.outside().join("pkg")).unwrap();
    std::fs::write(fixture.outside().join("pkg/APP.md"), MANIFEST_TEXT).unwrap();
    symlink(fixture.outside().join("pkg"), fixture.apps().join("linked")).unwrap();
    let before = fixture.snapshot();
    for tree in fixture.trees() {
        let refusals = [
            error(tree.list("linked")),
            error(tree.read("linked", "APP.md")),
            error(tree.write("linked", "x.js", "pwned", None, NO_VET)),
            error(tree.edit("linked", "APP.md", "A", "B", &sha(MANIFEST_TEXT), NO_VET)),
            error(tree.delete("linked", "x.js", &sha("x"), NO_VET)),
        ];
        for refused in refusals {
            assert_eq!(refused.code, ErrorCode::InputInvalid);
            assert_eq!(
                refused.message,
                "the app folder is a symbolic link; the source tools work only on a real folder"
            );
        }
    }
    assert_eq!(fixture.snapshot(), before);
}

#[test]
fn e7_a_hard_linked_file_is_refused_for_changes() {
    let fixture = Fixture::new();
    std::fs::write(fixture.outside().join("target.js"), b"outside").unwrap();
    std::fs::hard_link(
        fixture.outside().join("target.js"),
        fixture.app().join("app.js"),
    )
    .unwrap();
    let before = fixture.snapshot();
    let tree = fixture.tree();
    for refused in [
        error(tree.write(APP, "app.js", "pwned", Some(&sha("outside")), NO_VET)),
        error(tree.edit(APP, "app.js", "outside", "pwned", &sha("outside"), NO_VET)),
        error(tree.delete(APP, "app.js", &sha("outside"), NO_VET)),
    ] {
        assert_eq!(refused.code, ErrorCode::InputInvalid);
        assert!(
            refused.message.contains("hard-linked"),
            "{}",
            refused.message
        );
    }
    assert_eq!(fixture.snapshot(), before);
    // Reading is harmless; the listing says the write tools refuse it.
    assert_eq!(tree.read(APP, "app.js").unwrap().content, "outside");
    let listed = tree.list(APP).unwrap();
    let entry = listed.iter().find(|file| file.path == "app.js").unwrap();
    assert!(!entry.editable);
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A thread swaps `lib` for a symlink to the outside folder and back (atomic
/// `RENAME_EXCHANGE` with a prepared link next to the package) while this one
/// creates (under a new folder, so `mkdirat` races too), deletes, replaces,
/// reads and lists below `lib`: nothing may ever land outside.
fn swap_race(fixture: &Fixture, tree: &SourceTree) {
    fixture.put("lib/probe.js", b"start");
    let lib = fixture.app().join("lib");
    let link = fixture.apps().join("swap");
    symlink(fixture.outside(), &link).unwrap();
    // Anything done in the outside folder is recorded, even if a later call
    // through the link undid it.
    let watch =
        inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(
        &watch,
        fixture.outside(),
        inotify::WatchFlags::CREATE
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::MODIFY
            | inotify::WatchFlags::DELETE
            | inotify::WatchFlags::ATTRIB,
    )
    .unwrap();
    let done = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    let (changed, refused) = (Cell::new(0usize), Cell::new(0usize));
    thread::scope(|scope| {
        scope.spawn(|| {
            let mut count = 0usize;
            while !done.load(Ordering::Relaxed) || count < 1000 || !count.is_multiple_of(2) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &lib,
                    rustix::fs::CWD,
                    &link,
                    RenameFlags::EXCHANGE,
                )
                .expect("RENAME_EXCHANGE");
                count += 1;
            }
            swaps.store(count, Ordering::Relaxed);
        });
        // Stops the swapper even when an assertion below fails.
        let _stop = StopOnDrop(&done);
        let mut probe = Some(sha("start"));
        // Files created and not deleted yet: (path, version).
        let mut created: Vec<(String, String)> = Vec::new();
        let record = |outcome: Result<Change, AppError>| match outcome {
            Ok(change) => {
                changed.set(changed.get() + 1);
                Some(change)
            }
            Err(error) => {
                assert!(
                    matches!(
                        error.code,
                        ErrorCode::InputInvalid | ErrorCode::Conflict | ErrorCode::RecordNotFound
                    ),
                    "{error:?}"
                );
                refused.set(refused.get() + 1);
                None
            }
        };
        // At least 1000 writes, and on until 50 changes got through (so the
        // race ran with real writes, not only refusals).
        let mut i = 0usize;
        while i < 1000 || (changed.get() < 50 && i < 50_000) {
            i += 1;
            let path = format!("lib/deep/n{i}.js");
            if let Some(change) = record(tree.write(APP, &path, "new", None, NO_VET)) {
                created.push((path, change.after.unwrap()));
            }
            created.retain(|(path, version)| {
                record(tree.delete(APP, path, version, NO_VET)).is_none()
            });
            if i.is_multiple_of(4) {
                match record(tree.write(
                    APP,
                    "lib/probe.js",
                    format!("write {i}"),
                    probe.as_deref(),
                    NO_VET,
                )) {
                    Some(change) => probe = change.after,
                    None => {
                        if let Ok(file) = tree.read(APP, "lib/probe.js") {
                            probe = Some(file.version);
                        }
                    }
                }
                let _ = tree.list(APP);
            }
        }
    });
    assert!(swaps.load(Ordering::Relaxed) >= 1000);
    let (changed, refused) = (changed.get(), refused.get());
    assert!(
        changed >= 50 && refused > 0,
        "{changed} changes, {refused} refused"
    );
    assert_eq!(fixture.outside_names(), Vec::<String>::new());
    let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
    let mut events = inotify::Reader::new(&watch, &mut buffer);
    match events.next() {
        Err(Errno::AGAIN) => {}
        Ok(event) => panic!(
            "the outside folder was touched: {:?} {:?}",
            event.events(),
            event.file_name()
        ),
        Err(error) => panic!("inotify: {error}"),
    }
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(std::fs::symlink_metadata(&lib).unwrap().is_dir());
}

#[test]
fn e7_swapping_a_folder_for_a_symlink_never_lets_a_write_out() {
    let fixture = Fixture::new();
    swap_race(&fixture, &fixture.tree());
}

#[test]
fn e7_swapping_a_folder_for_a_symlink_never_lets_a_write_out_without_openat2() {
    let fixture = Fixture::new();
    swap_race(&fixture, &fixture.tree_without_openat2());
}

// ---- concurrency --------------------------------------------------------

#[test]
fn two_writers_with_the_same_version_exactly_one_wins() {
    let fixture = Fixture::new();
    fixture.put("app.js", b"v0");
    let tree = fixture.tree();
    for round in 0..20 {
        let current = tree.read(APP, "app.js").unwrap().version;
        let barrier = Barrier::new(2);
        let results: Vec<(String, Result<Change, AppError>)> = thread::scope(|scope| {
            let writers: Vec<_> = (0..2)
                .map(|writer| {
                    let (tree, barrier, current) = (&tree, &barrier, &current);
                    scope.spawn(move || {
                        let content = format!("round {round} writer {writer}");
                        barrier.wait();
                        let result = tree.write(APP, "app.js", &content, Some(current), NO_VET);
                        (content, result)
                    })
                })
                .collect();
            writers
                .into_iter()
                .map(|writer| writer.join().unwrap())
                .collect()
        });
        let winners: Vec<&String> = results
            .iter()
            .filter(|(_, result)| result.is_ok())
            .map(|(content, _)| content)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let loser = results
            .iter()
            .find_map(|(_, result)| result.as_ref().err())
            .unwrap();
        assert_eq!(loser.code, ErrorCode::Conflict);
        assert_eq!(
            loser.message,
            "app.js changed since you read it; read it again"
        );
        assert_eq!(fixture.get("app.js").unwrap(), winners[0].as_bytes());
    }
}
