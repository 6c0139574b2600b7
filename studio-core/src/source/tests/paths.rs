//! The path rules and app ids: every spelling of a path the spec refuses
//! (traversal, absolute, encoded, lookalike, invisible, Windows, protected
//! and hidden names), refused by every call with nothing changed.

use super::*;

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
