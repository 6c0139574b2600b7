//! Listing, reading, writing, editing and deleting package files, text and
//! binary assets, with their versions, and the package's limits on files,
//! bytes and folder entries.

use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::symlink;

use super::*;

// ---- list ---------------------------------------------------------------

#[test]
fn list_sorts_skips_and_flags() {
    let fixture = Fixture::new();
    fixture.put("app.js", b"console.log(1)");
    fixture.put("b/c.css", b"p{}");
    fixture.put("b/a/z.md", b"z");
    fixture.put("d/1/2/x.js", b"four segments");
    fixture.put("d/1/2/3/x.js", b"five segments");
    fixture.put(".hidden.js", b"hidden");
    fixture.put(".git/config", b"[core]");
    fixture.put("b/.cache/x.js", b"hidden folder");
    fixture.put("image.png", b"\x89PNG");
    fixture.put("CON.html", b"reserved");
    fixture.put("big.txt", &vec![b'a'; MAX_FILE_BYTES as usize + 1]);
    fixture.put("exact.txt", &vec![b'b'; MAX_FILE_BYTES as usize]);
    std::fs::write(fixture.outside().join("linked.js"), b"outside").unwrap();
    std::fs::hard_link(
        fixture.outside().join("linked.js"),
        fixture.app().join("hard.js"),
    )
    .unwrap();
    symlink(fixture.app().join("app.js"), fixture.app().join("link.js")).unwrap();
    symlink(fixture.outside(), fixture.app().join("linked")).unwrap();
    std::fs::create_dir(fixture.app().join("empty")).unwrap();
    std::fs::write(
        fixture
            .app()
            .join(std::ffi::OsStr::from_bytes(b"bad\xff.js")),
        b"x",
    )
    .unwrap();

    let entry = |path: &str, bytes: &[u8], editable: bool| FileEntry {
        path: path.to_owned(),
        bytes: bytes.len() as u64,
        version: Some(version_of(bytes)),
        editable,
    };
    let expected = vec![
        entry("APP.md", MANIFEST_TEXT.as_bytes(), true),
        entry("CON.html", b"reserved", false),
        entry("app.js", b"console.log(1)", true),
        entry("b/a/z.md", b"z", true),
        entry("b/c.css", b"p{}", true),
        FileEntry {
            path: "big.txt".to_owned(),
            bytes: MAX_FILE_BYTES + 1,
            version: None,
            editable: false,
        },
        entry("d/1/2/x.js", b"four segments", true),
        entry("exact.txt", &vec![b'b'; MAX_FILE_BYTES as usize], true),
        entry("hard.js", b"outside", false),
        // Binary assets are listed like text files, readable and editable.
        entry("image.png", b"\x89PNG", true),
    ];
    for tree in fixture.trees() {
        assert_eq!(tree.list(APP).unwrap(), expected);
    }
    let json = serde_json::to_value(&expected[5]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"path": "big.txt", "bytes": MAX_FILE_BYTES + 1, "version": null, "editable": false})
    );
}

// ---- read ---------------------------------------------------------------

#[test]
fn read_returns_content_bytes_and_version() {
    let fixture = Fixture::new();
    fixture.put("lib/util.js", "export const \u{e9} = 1;\n".as_bytes());
    let file = fixture.tree().read(APP, "lib/util.js").unwrap();
    assert_eq!(
        file,
        FileContent {
            path: "lib/util.js".to_owned(),
            content: "export const \u{e9} = 1;\n".to_owned(),
            bytes: 21,
            version: sha("export const \u{e9} = 1;\n"),
            encoding: None,
        }
    );
    // Text reads carry no encoding field at all.
    let json = serde_json::to_value(&file).unwrap();
    assert!(json.get("encoding").is_none(), "{json}");
}

#[test]
fn read_refuses_missing_binary_and_oversized_files() {
    let fixture = Fixture::new();
    fixture.put("bin.txt", b"ok\xff\xfe");
    fixture.put("big.md", &vec![b'a'; MAX_FILE_BYTES as usize + 1]);
    fixture.put("folder.js/inner.js", b"x");
    let tree = fixture.tree();
    let missing = error(tree.read(APP, "lib/missing.js"));
    assert_eq!(missing.code, ErrorCode::RecordNotFound);
    assert_eq!(missing.message, "lib/missing.js does not exist");
    assert_eq!(
        code(tree.read(APP, "missing.js")),
        ErrorCode::RecordNotFound
    );
    let binary = error(tree.read(APP, "bin.txt"));
    assert_eq!(binary.code, ErrorCode::InputInvalid);
    assert_eq!(binary.message, "bin.txt is not UTF-8 text");
    assert_eq!(code(tree.read(APP, "big.md")), ErrorCode::ResourceLimit);
    let folder = error(tree.read(APP, "folder.js"));
    assert_eq!(folder.code, ErrorCode::InputInvalid);
    assert_eq!(folder.message, "folder.js is not a regular file");
    let not_folder = error(tree.read(APP, "APP.md/x.js"));
    assert_eq!(not_folder.code, ErrorCode::InputInvalid);
    assert_eq!(not_folder.message, "APP.md is not a folder");
}

// ---- binary assets ------------------------------------------------------

/// Real assets of the valid fixture package, as a client would send them.
const LOGO_PNG: &[u8] =
    include_bytes!("../../../../tests/packages/valid/brand-card/assets/logo.png");
const PHOTO_JPG: &[u8] =
    include_bytes!("../../../../tests/packages/valid/brand-card/assets/photo.jpg");
const FONT_WOFF2: &[u8] =
    include_bytes!("../../../../tests/packages/valid/brand-card/fonts/blocks.woff2");

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn cause(error: &AppError) -> &str {
    error
        .details
        .as_ref()
        .and_then(|details| details["cause"].as_str())
        .unwrap_or_default()
}

#[test]
fn read_answers_binary_assets_as_base64() {
    let fixture = Fixture::new();
    fixture.put("assets/logo.png", LOGO_PNG);
    // Bytes that are no image still read, so they can be seen and replaced.
    fixture.put("assets/broken.webp", b"x\xff");
    let tree = fixture.tree();
    let file = tree.read(APP, "assets/logo.png").unwrap();
    assert_eq!(
        file,
        FileContent {
            path: "assets/logo.png".to_owned(),
            content: base64_of(LOGO_PNG),
            bytes: LOGO_PNG.len() as u64,
            version: version_of(LOGO_PNG),
            encoding: Some("base64"),
        }
    );
    let json = serde_json::to_value(&file).unwrap();
    assert_eq!(json["encoding"], "base64");
    let broken = tree.read(APP, "assets/broken.webp").unwrap();
    assert_eq!((broken.content.as_str(), broken.bytes), ("eP8=", 2));
    let entries = tree.list(APP).unwrap();
    assert!(entries.iter().all(|entry| entry.editable), "{entries:?}");
}

#[test]
fn content_is_text_as_it_is_or_base64_for_binary_assets() {
    assert_eq!(content_bytes("app.js", "let x;", None).unwrap(), b"let x;");
    assert_eq!(
        content_bytes("assets/logo.png", &base64_of(LOGO_PNG), Some("base64")).unwrap(),
        LOGO_PNG
    );
    assert_eq!(
        content_bytes("fonts/blocks.woff2", &base64_of(FONT_WOFF2), Some("base64")).unwrap(),
        FONT_WOFF2
    );
    // Line-wrapped base64 without padding is the same bytes.
    let encoded = base64_of(PHOTO_JPG);
    let wrapped: String = encoded
        .trim_end_matches('=')
        .as_bytes()
        .chunks(76)
        .map(|line| format!("{}\r\n", std::str::from_utf8(line).unwrap()))
        .collect();
    assert_eq!(
        content_bytes("photo.jpeg", &wrapped, Some("base64")).unwrap(),
        PHOTO_JPG
    );
}

#[test]
fn content_that_is_not_what_the_path_needs_is_refused() {
    let refused = |path: &str, content: &str, encoding: Option<&str>| {
        let error = error(content_bytes(path, content, encoding));
        assert_eq!(error.code, ErrorCode::InputInvalid, "{error:?}");
        (cause(&error).to_owned(), error)
    };
    assert_eq!(
        refused("app.js", "bGV0IHg7", Some("base64")).0,
        "ENCODING_NOT_FOR_TEXT"
    );
    assert_eq!(
        refused("logo.png", &base64_of(LOGO_PNG), None).0,
        "ENCODING_REQUIRED"
    );
    assert_eq!(
        refused("logo.png", "x", Some("utf-8")).0,
        "ENCODING_UNKNOWN"
    );
    assert_eq!(
        refused("logo.png", "x", Some("BASE64")).0,
        "ENCODING_UNKNOWN"
    );
    for bad in ["not base64!", "iVBORw0KGgo*", "=AAA", "A"] {
        assert_eq!(
            refused("logo.png", bad, Some("base64")).0,
            "BASE64_INVALID",
            "{bad}"
        );
    }
    // Valid base64 of bytes that are not an asset of the extension.
    let (asset_cause, error) = refused("logo.png", &base64_of(b"plain text"), Some("base64"));
    assert_eq!(asset_cause, "ASSET_IMAGE_INVALID");
    let details = error.details.unwrap();
    assert_eq!(details["diagnostics"][0]["file"], "logo.png");
    assert_eq!(details["diagnostics"][0]["code"], "ASSET_IMAGE_INVALID");
    assert_eq!(
        refused("photo.jpg", &base64_of(LOGO_PNG), Some("base64")).0,
        "ASSET_IMAGE_INVALID"
    );
    assert_eq!(
        refused(
            "photo.jpg",
            &base64_of(&PHOTO_JPG[..PHOTO_JPG.len() / 2]),
            Some("base64")
        )
        .0,
        "ASSET_IMAGE_INVALID"
    );
    assert_eq!(
        refused(
            "fonts/a.woff2",
            &base64_of(&FONT_WOFF2[..FONT_WOFF2.len() - 1]),
            Some("base64")
        )
        .0,
        "ASSET_FONT_INVALID"
    );
    assert_eq!(
        refused("fonts/a.woff2", &base64_of(LOGO_PNG), Some("base64")).0,
        "ASSET_FONT_INVALID"
    );
    // More base64 than a file may hold is refused before it is decoded.
    let huge = "A".repeat(2 * MAX_FILE_BYTES as usize);
    assert_eq!(
        code(content_bytes("logo.png", &huge, Some("base64"))),
        ErrorCode::ResourceLimit
    );
}

#[test]
fn binary_assets_are_written_as_bytes_and_round_trip() {
    let fixture = Fixture::new();
    let tree = fixture.tree();
    let seen = Mutex::new(Vec::new());
    let vet = |path: &str, bytes: Option<&[u8]>| {
        seen.lock()
            .unwrap()
            .push((path.to_owned(), bytes.map(<[u8]>::to_vec)));
        Ok(())
    };
    let bytes = content_bytes("assets/logo.png", &base64_of(LOGO_PNG), Some("base64")).unwrap();
    let created = tree
        .write(APP, "assets/logo.png", &bytes, None, &vet)
        .unwrap();
    assert_eq!(created.after, Some(version_of(LOGO_PNG)));
    assert_eq!(fixture.get("assets/logo.png").unwrap(), LOGO_PNG);
    assert_eq!(
        *seen.lock().unwrap(),
        [("assets/logo.png".to_owned(), Some(LOGO_PNG.to_vec()))]
    );
    // What read answers is what write takes back.
    let read = tree.read(APP, "assets/logo.png").unwrap();
    let again = content_bytes(&read.path, &read.content, read.encoding).unwrap();
    let replaced = tree
        .write(APP, "assets/logo.png", &again, Some(&read.version), NO_VET)
        .unwrap();
    assert_eq!(replaced.before, replaced.after);
    // Bytes that are not UTF-8 are never written to a text path.
    assert_eq!(
        code(tree.write(APP, "notes.txt", b"\xff", None, NO_VET)),
        ErrorCode::InputInvalid
    );
    assert!(fixture.get("notes.txt").is_none());
}

#[test]
fn binary_assets_are_not_edited_as_text() {
    let fixture = Fixture::new();
    // Bytes that happen to be UTF-8 are still an asset, not text.
    fixture.put("assets/logo.png", b"plain");
    let tree = fixture.tree();
    let refused = error(tree.edit(
        APP,
        "assets/logo.png",
        "plain",
        "x",
        &version_of(b"plain"),
        NO_VET,
    ));
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert_eq!(cause(&refused), "BINARY_NOT_EDITABLE");
    assert_eq!(fixture.get("assets/logo.png").unwrap(), b"plain");
    // They are deleted like any file.
    tree.delete(APP, "assets/logo.png", &version_of(b"plain"), NO_VET)
        .unwrap();
    assert!(fixture.get("assets/logo.png").is_none());
}

// ---- write --------------------------------------------------------------

#[test]
fn write_creates_then_replaces_with_versions() {
    let fixture = Fixture::new();
    let tree = fixture.tree();
    let created = tree
        .write(APP, "lib/ui/view.js", "one", None, NO_VET)
        .unwrap();
    assert_eq!(
        created,
        Change {
            path: "lib/ui/view.js".to_owned(),
            before: None,
            after: Some(sha("one")),
        }
    );
    assert_eq!(fixture.get("lib/ui/view.js").unwrap(), b"one");
    let read = tree.read(APP, "lib/ui/view.js").unwrap();
    assert_eq!(read.version, sha("one"));
    let replaced = tree
        .write(APP, "lib/ui/view.js", "two", Some(&read.version), NO_VET)
        .unwrap();
    assert_eq!(replaced.before, Some(sha("one")));
    assert_eq!(replaced.after, Some(sha("two")));
    assert_eq!(fixture.get("lib/ui/view.js").unwrap(), b"two");
    // APP.md is an ordinary file to write (the validator judges it).
    tree.write(
        APP,
        "APP.md",
        "---\nid: demo\n---\n",
        Some(&sha(MANIFEST_TEXT)),
        NO_VET,
    )
    .unwrap();
    // An empty file is a file.
    tree.write(APP, "empty.txt", "", None, NO_VET).unwrap();
    assert_eq!(tree.read(APP, "empty.txt").unwrap().version, sha(""));
    // No temporary file is left behind anywhere.
    assert!(
        fixture
            .snapshot()
            .keys()
            .all(|path| !path.to_string_lossy().contains(TEMP_PREFIX))
    );
}

#[test]
fn write_needs_the_current_version_of_an_existing_file() {
    let fixture = Fixture::new();
    fixture.put("app.js", b"v1");
    let tree = fixture.tree();
    let missing = error(tree.write(APP, "app.js", "v2", None, NO_VET));
    assert_eq!(missing.code, ErrorCode::Conflict);
    assert!(
        missing.message.contains("expectedVersion"),
        "{}",
        missing.message
    );
    let stale = error(tree.write(APP, "app.js", "v2", Some(&sha("v0")), NO_VET));
    assert_eq!(stale.code, ErrorCode::Conflict);
    assert_eq!(
        stale.message,
        "app.js changed since you read it; read it again"
    );
    assert_eq!(fixture.get("app.js").unwrap(), b"v1");
    // Upper-case hex is the same version.
    tree.write(APP, "app.js", "v2", Some(&sha("v1").to_uppercase()), NO_VET)
        .unwrap();
    assert_eq!(fixture.get("app.js").unwrap(), b"v2");
}

#[test]
fn write_with_a_version_for_a_missing_file_conflicts() {
    let fixture = Fixture::new();
    let tree = fixture.tree();
    assert_eq!(
        code(tree.write(APP, "new.js", "x", Some(&sha("x")), NO_VET)),
        ErrorCode::Conflict
    );
    assert_eq!(
        code(tree.write(APP, "new/folder/x.js", "x", Some(&sha("x")), NO_VET)),
        ErrorCode::Conflict
    );
    assert!(fixture.get("new.js").is_none());
    assert!(!fixture.app().join("new").exists());
}

#[test]
fn write_refuses_a_folder_or_file_in_the_way() {
    let fixture = Fixture::new();
    fixture.put("folder.js/inner.js", b"x");
    let tree = fixture.tree();
    let refused = error(tree.write(APP, "APP.md/x.js", "x", None, NO_VET));
    assert_eq!(refused.message, "APP.md is not a folder");
    let refused = error(tree.write(APP, "folder.js", "x", None, NO_VET));
    assert_eq!(refused.message, "folder.js is not a regular file");
    assert_eq!(fixture.get("APP.md").unwrap(), MANIFEST_TEXT.as_bytes());
}

#[test]
fn a_failed_write_leaves_no_new_folders() {
    let fixture = Fixture::new();
    fixture.put("lib/app.js", b"x");
    let tree = fixture.tree();
    // Refused by the collision check after the walk found `Lib` missing.
    assert_eq!(
        code(tree.write(APP, "Lib/new/x.js", "x", None, NO_VET)),
        ErrorCode::Conflict
    );
    // Refused by the package limit.
    let big = "a".repeat(MAX_FILE_BYTES as usize);
    assert_eq!(
        code(tree.write(APP, "new/x.js", &big, None, NO_VET)),
        ErrorCode::ResourceLimit
    );
    assert!(!fixture.app().join("Lib").exists());
    assert!(!fixture.app().join("new").exists());
}

// ---- edit ---------------------------------------------------------------

#[test]
fn edit_replaces_the_one_match() {
    let fixture = Fixture::new();
    fixture.put("app.js", b"let a = 1;\nlet b = 2;\n");
    let tree = fixture.tree();
    let change = tree
        .edit(
            APP,
            "app.js",
            "b = 2",
            "b = 3",
            &sha("let a = 1;\nlet b = 2;\n"),
            NO_VET,
        )
        .unwrap();
    assert_eq!(
        change,
        Change {
            path: "app.js".to_owned(),
            before: Some(sha("let a = 1;\nlet b = 2;\n")),
            after: Some(sha("let a = 1;\nlet b = 3;\n")),
        }
    );
    assert_eq!(fixture.get("app.js").unwrap(), b"let a = 1;\nlet b = 3;\n");
    // Replacing with nothing deletes the text.
    tree.edit(
        APP,
        "app.js",
        "let a = 1;\n",
        "",
        &sha("let a = 1;\nlet b = 3;\n"),
        NO_VET,
    )
    .unwrap();
    assert_eq!(fixture.get("app.js").unwrap(), b"let b = 3;\n");
}

#[test]
fn edit_refuses_zero_or_several_matches() {
    let fixture = Fixture::new();
    let text = "x = 1;\nx = 1;\naaa\n";
    fixture.put("app.js", text.as_bytes());
    let tree = fixture.tree();
    let none = error(tree.edit(APP, "app.js", "y = 1", "y = 2", &sha(text), NO_VET));
    assert_eq!(none.code, ErrorCode::InputInvalid);
    assert!(none.message.contains("matched 0 times"), "{}", none.message);
    let two = error(tree.edit(APP, "app.js", "x = 1", "x = 2", &sha(text), NO_VET));
    assert_eq!(two.code, ErrorCode::InputInvalid);
    assert!(two.message.contains("matched 2 times"), "{}", two.message);
    let overlapping = error(tree.edit(APP, "app.js", "aa", "b", &sha(text), NO_VET));
    assert!(
        overlapping.message.contains("matched 2 times"),
        "{}",
        overlapping.message
    );
    let empty = error(tree.edit(APP, "app.js", "", "b", &sha(text), NO_VET));
    assert_eq!(empty.code, ErrorCode::InputInvalid);
    assert_eq!(fixture.get("app.js").unwrap(), text.as_bytes());
}

#[test]
fn edit_checks_existence_version_and_text() {
    let fixture = Fixture::new();
    fixture.put("app.js", b"one");
    fixture.put("bin.txt", b"\xff one");
    let tree = fixture.tree();
    let missing = error(tree.edit(APP, "lib/none.js", "a", "b", &sha("a"), NO_VET));
    assert_eq!(missing.code, ErrorCode::RecordNotFound);
    assert_eq!(missing.message, "lib/none.js does not exist");
    let stale = error(tree.edit(APP, "app.js", "one", "two", &sha("zero"), NO_VET));
    assert_eq!(stale.code, ErrorCode::Conflict);
    assert_eq!(
        stale.message,
        "app.js changed since you read it; read it again"
    );
    let binary = error(tree.edit(
        APP,
        "bin.txt",
        "one",
        "two",
        &version_of(b"\xff one"),
        NO_VET,
    ));
    assert_eq!(binary.message, "bin.txt is not UTF-8 text");
    assert_eq!(fixture.get("app.js").unwrap(), b"one");
    // Growing past the file limit is refused.
    let half = format!("b{}", "a".repeat(MAX_FILE_BYTES as usize / 2));
    fixture.put("half.txt", half.as_bytes());
    let grown = error(tree.edit(APP, "half.txt", "b", &half, &sha(&half), NO_VET));
    assert_eq!(grown.code, ErrorCode::ResourceLimit);
    assert!(
        grown.message.starts_with("a file may hold at most"),
        "{}",
        grown.message
    );
}

// ---- delete -------------------------------------------------------------

#[test]
fn delete_removes_the_file_and_the_folders_it_empties() {
    let fixture = Fixture::new();
    fixture.put("a/b/c/x.js", b"x");
    fixture.put("a/keep.js", b"keep");
    let tree = fixture.tree();
    let change = tree.delete(APP, "a/b/c/x.js", &sha("x"), NO_VET).unwrap();
    assert_eq!(
        change,
        Change {
            path: "a/b/c/x.js".to_owned(),
            before: Some(sha("x")),
            after: None,
        }
    );
    assert!(!fixture.app().join("a/b").exists());
    assert!(fixture.app().join("a/keep.js").exists());
    tree.delete(APP, "a/keep.js", &sha("keep"), NO_VET).unwrap();
    assert!(!fixture.app().join("a").exists());
    assert!(fixture.app().exists(), "the package folder stays");
    let gone = error(tree.delete(APP, "a/keep.js", &sha("keep"), NO_VET));
    assert_eq!(gone.code, ErrorCode::RecordNotFound);
    assert_eq!(gone.message, "a/keep.js does not exist");
    // A folder holding only hidden files is not empty: it stays.
    fixture.put("h/x.js", b"x");
    fixture.put("h/.keep", b"");
    tree.delete(APP, "h/x.js", &sha("x"), NO_VET).unwrap();
    assert!(fixture.app().join("h/.keep").exists());
}

#[test]
fn delete_checks_the_version_and_spares_app_md() {
    let fixture = Fixture::new();
    fixture.put("app.js", b"x");
    let tree = fixture.tree();
    let stale = error(tree.delete(APP, "app.js", &sha("y"), NO_VET));
    assert_eq!(stale.code, ErrorCode::Conflict);
    assert!(fixture.get("app.js").is_some());
    let manifest = error(tree.delete(APP, "APP.md", &sha(MANIFEST_TEXT), NO_VET));
    assert_eq!(manifest.code, ErrorCode::InputInvalid);
    assert!(manifest.message.contains("APP.md cannot be deleted"));
    assert!(fixture.get("APP.md").is_some());
}

// ---- limits -------------------------------------------------------------

#[test]
fn the_65th_file_is_refused() {
    let fixture = Fixture::new();
    fixture.put(".hidden.js", b"not counted");
    fixture.put("a/b/c/d/e.js", b"too deep to count");
    let tree = fixture.tree();
    for i in 1..MAX_FILES {
        tree.write(APP, &format!("f{i}.txt"), "x", None, NO_VET)
            .unwrap();
    }
    assert_eq!(tree.list(APP).unwrap().len(), MAX_FILES);
    let refused = error(tree.write(APP, "one-more.txt", "x", None, NO_VET));
    assert_eq!(refused.code, ErrorCode::ResourceLimit);
    assert_eq!(
        refused.message,
        "a package may hold at most 64 files; it has 64"
    );
    assert!(fixture.get("one-more.txt").is_none());
    // Replacing keeps the count; deleting makes room again.
    tree.write(APP, "f1.txt", "y", Some(&sha("x")), NO_VET)
        .unwrap();
    tree.delete(APP, "f2.txt", &sha("x"), NO_VET).unwrap();
    tree.write(APP, "one-more.txt", "x", None, NO_VET).unwrap();
}

#[test]
fn more_than_1_mib_in_the_package_is_refused() {
    let fixture = Fixture::new();
    let tree = fixture.tree();
    let part = "a".repeat(600_000);
    tree.write(APP, "a.txt", &part, None, NO_VET).unwrap();
    let refused = error(tree.write(APP, "b.txt", &part, None, NO_VET));
    assert_eq!(refused.code, ErrorCode::ResourceLimit);
    assert!(
        refused.message.contains("at most 1048576 bytes in all"),
        "{}",
        refused.message
    );
    assert!(fixture.get("b.txt").is_none());
    // Growing an existing file past the package limit is refused too.
    let grow = error(tree.edit(
        APP,
        "a.txt",
        &part,
        &"b".repeat(MAX_FILE_BYTES as usize),
        &sha(&part),
        NO_VET,
    ));
    assert_eq!(grow.code, ErrorCode::ResourceLimit);
    assert!(grow.message.contains("bytes in all"), "{}", grow.message);
    // Exactly at the limit is fine.
    let room = MAX_PACKAGE_BYTES as usize - MANIFEST_TEXT.len() - part.len();
    tree.write(APP, "b.txt", "b".repeat(room), None, NO_VET)
        .unwrap();
}

#[test]
fn a_file_over_1_mib_is_refused() {
    let fixture = Fixture::new();
    let tree = fixture.tree();
    let refused = error(tree.write(
        APP,
        "big.txt",
        "a".repeat(MAX_FILE_BYTES as usize + 1),
        None,
        NO_VET,
    ));
    assert_eq!(refused.code, ErrorCode::ResourceLimit);
    assert!(
        refused
            .message
            .starts_with("a file may hold at most 1048576 bytes"),
        "{}",
        refused.message
    );
    assert!(fixture.get("big.txt").is_none());
    // One already on disk has no version: it cannot be replaced or deleted.
    fixture.put("huge.txt", &vec![b'a'; MAX_FILE_BYTES as usize + 1]);
    assert_eq!(
        code(tree.write(APP, "huge.txt", "small", Some(&sha("x")), NO_VET)),
        ErrorCode::ResourceLimit
    );
    assert_eq!(
        code(tree.delete(APP, "huge.txt", &sha("x"), NO_VET)),
        ErrorCode::ResourceLimit
    );
}

#[test]
fn a_package_over_a_limit_on_disk_can_shrink_but_not_grow() {
    let fixture = Fixture::new();
    for i in 0..70 {
        fixture.put(&format!("f{i}.txt"), b"xx");
    }
    let tree = fixture.tree();
    tree.write(APP, "f0.txt", "x", Some(&sha("xx")), NO_VET)
        .unwrap();
    assert_eq!(
        code(tree.write(APP, "new.txt", "x", None, NO_VET)),
        ErrorCode::ResourceLimit
    );
    tree.delete(APP, "f1.txt", &sha("xx"), NO_VET).unwrap();
    // Over the byte limit: shrinking is allowed, growing is not.
    let fixture = Fixture::new();
    fixture.put("big.txt", &vec![b'a'; MAX_FILE_BYTES as usize]);
    let tree = fixture.tree();
    let big = "a".repeat(MAX_FILE_BYTES as usize);
    assert_eq!(
        code(tree.edit(
            APP,
            "APP.md",
            "A demo.",
            "A bigger demo.",
            &sha(MANIFEST_TEXT),
            NO_VET
        )),
        ErrorCode::ResourceLimit
    );
    tree.write(APP, "big.txt", "small", Some(&sha(&big)), NO_VET)
        .unwrap();
}

#[test]
fn a_folder_with_too_many_entries_is_a_resource_limit() {
    let fixture = Fixture::new();
    for i in 0..=MAX_FOLDER_ENTRIES {
        fixture.put(&format!("junk/.n{i}"), b"");
    }
    let tree = fixture.tree();
    let refused = error(tree.list(APP));
    assert_eq!(refused.code, ErrorCode::ResourceLimit);
    assert!(
        refused.message.starts_with("folder junk holds more than"),
        "{}",
        refused.message
    );
}
