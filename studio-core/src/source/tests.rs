use std::cell::Cell;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::symlink;
use std::sync::Barrier;
use std::sync::atomic::AtomicUsize;
use std::thread;

use std::mem::MaybeUninit;

use rustix::fs::{RenameFlags, inotify};

use super::*;

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

// ---- path rules ---------------------------------------------------------

#[test]
fn limits_match_the_spec() {
    assert_eq!(MAX_FILE_BYTES, 1024 * 1024);
    assert_eq!(MAX_PACKAGE_BYTES, 1024 * 1024);
    assert_eq!(MAX_FILES, 64);
    assert_eq!(MAX_DEPTH, 4);
    assert_eq!(
        TEXT_EXTENSIONS,
        [
            "md", "html", "css", "js", "sql", "yaml", "yml", "json", "txt", "svg"
        ]
    );
    assert_eq!(
        BINARY_EXTENSIONS,
        ["png", "jpg", "jpeg", "webp", "gif", "woff2"]
    );
}

#[test]
fn path_rules_accept_ordinary_paths() {
    for path in [
        "APP.md",
        "app.js",
        "actions/log-hours.action.yaml",
        "migrations/001-create-entries.sql",
        "a/b/c/d.svg",
        "caf\u{e9}/menu.html",
        "\u{65e5}\u{672c}.md",
        "notes and more.txt",
        "$price.json",
        "a.b.c.css",
        "con-tact.html",
        "com10.js",
        "console.js",
    ] {
        assert_eq!(
            check_path(path).map(|segments| segments.join("/")),
            Ok(path.to_owned()),
            "path {path:?}"
        );
    }
}

#[test]
fn e1_traversal_is_refused() {
    check("../x.js", PathRule::DotSegment);
    check("a/../../x.js", PathRule::DotSegment);
    check("a/..", PathRule::DotSegment);
    check("a/./x.js", PathRule::DotSegment);
    check("....//x.js", PathRule::Hidden);
    check("..;/x.js", PathRule::Hidden);
}

#[test]
fn e2_absolute_paths_are_refused() {
    check("/etc/passwd", PathRule::Absolute);
    check("//srv/x.js", PathRule::Absolute);
    check("\\\\srv\\share.js", PathRule::Backslash);
    check("C:/x.js", PathRule::Colon);
    check("C:x.js", PathRule::Colon);
    check("file:///x.js", PathRule::Colon);
    check("~/x.js", PathRule::Tilde);
}

#[test]
fn e3_encodings_and_lookalikes_are_refused() {
    for path in [
        "..%2fx.js",
        "%2e%2e/x.js",
        "..%252f.js",
        "%c0%ae%c0%ae/x.js",
        "..%c0%af.js",
        "%uff0e%uff0e/x.js",
    ] {
        check(path, PathRule::Percent);
    }
    // Fullwidth dots and solidus (U+FF0E, U+FF0F), which NFKC folds into `../`.
    check("\u{ff0e}\u{ff0e}\u{ff0f}x.js", PathRule::LookalikeSeparator);
    check("\u{ff0e}\u{ff0e}/x.js", PathRule::Compatibility);
    check("a/\u{ff0e}\u{ff0e}.js", PathRule::Compatibility);
    // Two dot leader (U+2025) is `..` under NFKC.
    check("\u{2025}/x.js", PathRule::Compatibility);
    // Division slash (U+2215) has no decomposition: refused by its own rule.
    check("\u{2215}etc\u{2215}x.js", PathRule::LookalikeSeparator);
    check("a\u{2044}b.js", PathRule::LookalikeSeparator);
    check("a\u{29f5}b.js", PathRule::LookalikeSeparator);
}

#[test]
fn e4_control_and_invisible_characters_are_refused() {
    check("..\\x.js", PathRule::Backslash);
    for path in [
        "a\u{0}.html",
        "a\n.js",
        "a\r.js",
        "a\t.js",
        "a\u{7f}.js",
        "a\u{85}.js",
        "a\u{202e}lmth.js",
        "a\u{200b}.js",
        "a\u{200d}.js",
        "a\u{2066}.js",
        "a\u{2028}.js",
        "a\u{2029}.js",
        "a\u{feff}.js",
        "a\u{ad}.js",
        "a\u{e0041}.js",
        "a\u{fe0f}.js",
    ] {
        check(path, PathRule::ControlOrInvisible);
    }
}

#[test]
fn e5_windows_names_are_refused() {
    for path in [
        "CON",
        "con.html",
        "NUL.txt",
        "COM1.js",
        "com0.js",
        "LPT9",
        "lpt9.md",
        "COM\u{b9}",
        "COM\u{b2}.js",
        "lpt\u{b3}.txt",
        "CONIN$",
        "conout$.txt",
        "aux/x.js",
        "Prn.tar.json",
        "CON .txt",
    ] {
        check(path, PathRule::WindowsReserved);
    }
    for path in ["a./x.js", "a /x.js", "x.js.", "x.js "] {
        check(path, PathRule::TrailingDotOrSpace);
    }
    check("a.html::$DATA", PathRule::Colon);
    check("a:b.js", PathRule::Colon);
    for path in ["*.js", "a?.js", "<a.js", "a>.js", "a|b.js", "\"a\".js"] {
        check(path, PathRule::WildcardOrQuote);
    }
}

#[test]
fn e8_path_shapes_and_lengths_are_refused() {
    check("", PathRule::Empty);
    check(".", PathRule::DotSegment);
    check("a//b.js", PathRule::EmptySegment);
    check("a/", PathRule::TrailingSlash);
    check(&format!("{}.js", "a".repeat(300)), PathRule::SegmentTooLong);
    assert!(
        check_path(&format!("{}.js", "a".repeat(252))).is_ok(),
        "255 bytes is fine"
    );
    check(&format!("{}.js", "a".repeat(253)), PathRule::SegmentTooLong);
    check(&format!("{}.js", "a/".repeat(2500)), PathRule::TooLong);
    check(&format!("{}x.js", "a/".repeat(199)), PathRule::TooDeep);
    check("a/b/c/d/e.js", PathRule::TooDeep);
}

#[test]
fn e9_protected_and_hidden_names_are_refused() {
    check(".git/config", PathRule::Hidden);
    check("a/.git/config.json", PathRule::Hidden);
    check("../Y/index.html", PathRule::DotSegment);
    check(".sasha-tmp-0123.js", PathRule::Hidden);
    check(".htaccess", PathRule::Hidden);
    for path in [
        "x.bmp",
        "x.PNG",
        "x.woff",
        "x",
        "Makefile",
        "x.JS",
        "README.MD",
        "x.exe",
        "a/b",
    ] {
        check(path, PathRule::Extension);
    }
}

#[test]
fn non_nfc_and_compatibility_forms_are_refused() {
    check("e\u{301}.js", PathRule::NotNfc);
    // The Kelvin sign is a singleton: its NFC form is `K`.
    check("\u{212a}.js", PathRule::NotNfc);
    check("\u{fb01}le.js", PathRule::Compatibility);
    check("a\u{a0}b.js", PathRule::Compatibility);
    check("\u{ff41}.js", PathRule::Compatibility);
}

/// The catalogue's strings, verbatim, then each as a would-be text file.
fn catalogue_paths() -> Vec<String> {
    let verbatim = [
        // E1
        "../x",
        "a/../../x",
        "a/..",
        "....//x",
        "..;/x",
        // E2
        "/etc/passwd",
        "//srv/x",
        "\\\\srv\\share",
        "C:/x",
        "C:x",
        "file:///x",
        "~/x",
        // E3
        "..%2fx",
        "%2e%2e/x",
        "..%252f",
        "%c0%ae%c0%ae/",
        "..%c0%af",
        "%uff0e%uff0e/",
        "\u{ff0e}\u{ff0e}\u{ff0f}x",
        "\u{ff0e}\u{ff0e}/x",
        "\u{2215}x",
        // E4
        "..\\x",
        "a\u{0}.html",
        "\n",
        "a\u{202e}.js",
        "a\u{200b}.js",
        "a\u{7f}.js",
        // E5
        "CON",
        "con.html",
        "NUL.txt",
        "COM1.js",
        "LPT9",
        "COM\u{b9}",
        "CONIN$",
        "aux/x",
        "a.",
        "a ",
        "a.html::$DATA",
        "a:b",
        "*?<>|\"",
        // E8
        "",
        ".",
        "a//b",
        "a/",
        // E9
        ".git/config",
        "../Y/index.html",
    ];
    let mut paths: Vec<String> = verbatim.iter().map(|path| (*path).to_owned()).collect();
    // As text files (`a.` and `a ` become the fine names `a..js` and `a .js`,
    // so their rule is tried in a folder segment and at the very end instead).
    paths.extend(
        verbatim
            .iter()
            .filter(|path| !matches!(**path, "a." | "a "))
            .map(|path| format!("{path}.js")),
    );
    paths.extend(["a./x.js", "a /x.js", "x.js.", "x.js "].map(str::to_owned));
    paths.push(format!("{}.js", "a".repeat(300)));
    paths.push("a".repeat(5000));
    paths.push(format!("{}x.js", "a/".repeat(199)));
    paths
}

#[test]
fn every_catalogue_path_is_refused_by_write_and_nothing_changes() {
    let fixture = Fixture::new();
    fixture.put("a/keep.js", b"keep");
    std::fs::create_dir(fixture.app().join("Y")).unwrap();
    let before = fixture.snapshot();
    for tree in fixture.trees() {
        for path in catalogue_paths() {
            let refused = error(tree.write(APP, &path, "x", None, NO_VET));
            assert_eq!(refused.code, ErrorCode::InputInvalid, "path {path:?}");
            let rule = check_path(&path).expect_err("the rules refuse it");
            assert_eq!(refused.message, rule.to_string(), "path {path:?}");
            assert_eq!(
                code(tree.write(APP, &path, "x", Some(&sha("keep")), NO_VET)),
                ErrorCode::InputInvalid
            );
        }
    }
    assert_eq!(fixture.snapshot(), before);
}

#[test]
fn refused_paths_are_refused_by_read_edit_and_delete_too() {
    let fixture = Fixture::new();
    fixture.put("x.js", b"x");
    std::fs::write(fixture.outside().join("x.js"), b"outside").unwrap();
    let before = fixture.snapshot();
    let tree = fixture.tree();
    for path in [
        "../outside/x.js",
        "../../outside/x.js",
        "/etc/passwd",
        "..%2fx.js",
        "\u{ff0e}\u{ff0e}/outside/x.js",
        "a\u{0}.js",
        "CON.js",
        "a//x.js",
        "",
        ".git/config",
        "x.bmp",
        "e\u{301}.js",
    ] {
        assert_eq!(
            code(tree.read(APP, path)),
            ErrorCode::InputInvalid,
            "{path:?}"
        );
        assert_eq!(
            code(tree.edit(APP, path, "x", "y", &sha("x"), NO_VET)),
            ErrorCode::InputInvalid,
            "{path:?}"
        );
        assert_eq!(
            code(tree.delete(APP, path, &sha("x"), NO_VET)),
            ErrorCode::InputInvalid,
            "{path:?}"
        );
    }
    assert_eq!(fixture.snapshot(), before);
}

// ---- app ids ------------------------------------------------------------

#[test]
fn unknown_apps_are_answered_like_apps_not_managed() {
    let fixture = Fixture::new();
    std::fs::write(fixture.apps().join("plain-file"), b"not a folder").unwrap();
    let tree = fixture.tree();
    for app in ["nope", "plain-file"] {
        let refusals = [
            error(tree.list(app)),
            error(tree.read(app, "APP.md")),
            error(tree.write(app, "x.js", "x", None, NO_VET)),
            error(tree.edit(app, "APP.md", "A", "B", &sha(MANIFEST_TEXT), NO_VET)),
            error(tree.delete(app, "x.js", &sha("x"), NO_VET)),
        ];
        for refused in refusals {
            assert_eq!(refused.code, ErrorCode::AccessDenied);
            assert_eq!(refused.message, "you do not manage this app");
        }
    }
    assert!(!fixture.apps().join("nope").exists());
    // No apps folder at all is the same answer.
    let tree = SourceTree::new(&fixture.root.path().join("missing"));
    assert_eq!(code(tree.list(APP)), ErrorCode::AccessDenied);
}

#[test]
fn app_ids_must_be_kebab_case() {
    let fixture = Fixture::new();
    std::fs::create_dir(fixture.apps().join("Demo")).unwrap();
    let tree = fixture.tree();
    let long = "a".repeat(61);
    for app in [
        "Demo", "../demo", "demo/", "a_b", "-demo", "demo-", "de--mo", "", &long,
    ] {
        assert_eq!(code(tree.list(app)), ErrorCode::InputInvalid, "{app:?}");
        assert_eq!(
            code(tree.write(app, "x.js", "x", None, NO_VET)),
            ErrorCode::InputInvalid,
            "{app:?}"
        );
    }
    assert!(tree.list(&"a".repeat(60)).is_err());
}

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
const LOGO_PNG: &[u8] = include_bytes!("../../../tests/packages/valid/brand-card/assets/logo.png");
const PHOTO_JPG: &[u8] =
    include_bytes!("../../../tests/packages/valid/brand-card/assets/photo.jpg");
const FONT_WOFF2: &[u8] =
    include_bytes!("../../../tests/packages/valid/brand-card/fonts/blocks.woff2");

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
