//! The package fixture corpus, through `sasha app check` (the real CLI).
//!
//! `tests/packages/valid/<id>/` are valid packages: their check output and
//! their assembled document are golden (`tests/packages/golden/<id>.json`,
//! `<id>.html`). `tests/packages/invalid/*.pkg` each describe one invalid
//! package as a valid base plus changed files:
//!
//! ```text
//! # base: hello            the valid package to start from
//! # folder: other-name     optional: the folder name (the expected app id)
//! -- index.html --         replaces (or adds) a file; its content follows
//! ...
//! -- styles.css (delete) --
//! ```
//!
//! and their check output is golden in `<name>.json` beside them
//! (`common::golden`; `UPDATE_EXPECT=1` rewrites them).

use crate::common;

use common::copy_dir;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages")
}

/// Runs `sasha app check DIR`: (exit code, stdout).
fn check(dir: &Path) -> (i32, String) {
    let output = Command::new(common::sasha_bin())
        .args(["app", "check"])
        .arg(dir)
        .output()
        .expect("run sasha app check");
    assert!(
        output.stderr.is_empty(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).expect("UTF-8 output"),
    )
}

struct Fixture {
    base: String,
    folder: Option<String>,
    files: BTreeMap<String, Option<String>>,
}

fn parse_fixture(text: &str) -> Fixture {
    let mut fixture = Fixture {
        base: String::new(),
        folder: None,
        files: BTreeMap::new(),
    };
    let mut current: Option<(String, bool)> = None;
    let mut content = String::new();
    let finish = |current: &mut Option<(String, bool)>,
                  content: &mut String,
                  files: &mut BTreeMap<String, Option<String>>| {
        if let Some((path, delete)) = current.take() {
            files.insert(path, (!delete).then(|| std::mem::take(content)));
        }
        content.clear();
    };
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_end_matches('\n');
        if let Some(header) = trimmed
            .strip_prefix("-- ")
            .and_then(|rest| rest.strip_suffix(" --"))
        {
            finish(&mut current, &mut content, &mut fixture.files);
            current = Some(match header.strip_suffix(" (delete)") {
                Some(path) => (path.to_owned(), true),
                None => (header.to_owned(), false),
            });
        } else if current.is_some() {
            content.push_str(line);
        } else if let Some(base) = trimmed.strip_prefix("# base: ") {
            fixture.base = base.trim().to_owned();
        } else if let Some(folder) = trimmed.strip_prefix("# folder: ") {
            fixture.folder = Some(folder.trim().to_owned());
        }
    }
    finish(&mut current, &mut content, &mut fixture.files);
    fixture
}

#[test]
fn valid_packages_check_ok_with_golden_bytes() {
    let mut failures = Vec::new();
    let valid = corpus().join("valid");
    let mut count = 0;
    for entry in std::fs::read_dir(&valid).unwrap().flatten() {
        let id = entry.file_name().to_string_lossy().into_owned();
        count += 1;
        let (code, stdout) = check(&entry.path());
        if code != 0 {
            failures.push(format!("{id} should be valid:\n{stdout}"));
            continue;
        }
        common::golden(&corpus().join(format!("golden/{id}.json")), &stdout);
        let validation = sasha_package::validate::validate_dir(&entry.path());
        let resource = validation.package.expect("valid").resource;
        common::golden(&corpus().join(format!("golden/{id}.html")), &resource.html);
        assert_eq!(
            resource.uri,
            format!("ui://sasha/apps/{id}/revisions/{}", resource.revision)
        );
        assert_eq!(resource.mime_type, "text/html;profile=mcp-app");
        assert!(stdout.contains(&resource.revision));
    }
    assert!(count >= 2, "the corpus has valid packages");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn invalid_packages_report_golden_diagnostics() {
    let mut failures = Vec::new();
    let mut count = 0;
    let invalid = corpus().join("invalid");
    let mut entries: Vec<_> = std::fs::read_dir(&invalid).unwrap().flatten().collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("pkg") {
            continue;
        }
        count += 1;
        let fixture = parse_fixture(&std::fs::read_to_string(&path).unwrap());
        let temp = tempfile::tempdir().unwrap();
        let folder = fixture
            .folder
            .clone()
            .unwrap_or_else(|| fixture.base.clone());
        let dir = temp.path().join(&folder);
        copy_dir(&corpus().join("valid").join(&fixture.base), &dir);
        for (file, content) in &fixture.files {
            let target = dir.join(file);
            match content {
                Some(content) => {
                    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                    std::fs::write(&target, content).unwrap();
                }
                None => std::fs::remove_file(&target).unwrap(),
            }
        }
        let (code, stdout) = check(&dir);
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if code != 1 {
            failures.push(format!(
                "{name} should be refused (exit 1), got {code}:\n{stdout}"
            ));
            continue;
        }
        let status: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(status["ok"], false, "{name}");
        assert!(status["revision"].is_null(), "{name}");
        assert!(
            !status["diagnostics"].as_array().unwrap().is_empty(),
            "{name}"
        );
        for diagnostic in status["diagnostics"].as_array().unwrap() {
            let file = diagnostic["file"].as_str().unwrap();
            assert!(
                !file.starts_with('/') && !file.contains(temp.path().to_str().unwrap()),
                "{name}: {file}"
            );
        }
        common::golden(&path.with_extension("json"), &stdout);
    }
    assert!(
        count >= 80,
        "the invalid corpus has {count} fixtures; it needs at least 80"
    );
    assert!(
        failures.is_empty(),
        "{} of {count} fixtures failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Runs `sasha app check` on a package built by `build` in a fresh folder named
/// `hello` (a copy of the valid `hello` package), and returns the diagnostics'
/// `(file, code)` pairs.
fn check_generated(build: impl FnOnce(&Path)) -> Vec<(String, String)> {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("hello");
    copy_dir(&corpus().join("valid/hello"), &dir);
    build(&dir);
    let (code, stdout) = check(&dir);
    assert_eq!(code, 1, "{stdout}");
    let status: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    status["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["file"].as_str().unwrap().to_owned(),
                d["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn has(found: &[(String, String)], file: &str, code: &str) -> bool {
    found.iter().any(|(f, c)| f == file && c == code)
}

#[test]
fn symlinks_are_refused_and_never_followed() {
    let found = check_generated(|dir| {
        std::os::unix::fs::symlink("/etc/passwd", dir.join("assets/passwd.txt")).unwrap();
        std::fs::remove_file(dir.join("styles.css")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.join("styles.css")).unwrap();
    });
    assert!(
        has(&found, "assets/passwd.txt", "PATH_SYMLINK"),
        "{found:?}"
    );
    assert!(has(&found, "styles.css", "PATH_SYMLINK"), "{found:?}");
    assert!(
        has(&found, "styles.css", "PACKAGE_MISSING_FILE"),
        "{found:?}"
    );
}

#[test]
fn bytes_that_are_not_text_are_refused() {
    let found = check_generated(|dir| {
        std::fs::write(dir.join("assets/latin1.txt"), [b'c', b'a', b'f', 0xE9]).unwrap();
        std::fs::write(dir.join("assets/nul.txt"), "a\0b").unwrap();
        std::fs::write(dir.join("assets/surrogate.txt"), [0xED, 0xA0, 0x80]).unwrap();
        // Binaries other than the image and font assets stay refused ...
        std::fs::write(dir.join("assets/tool.exe"), [0x4D, 0x5A, 0x90, 0x00]).unwrap();
        std::fs::write(dir.join("assets/photo.bmp"), b"BM\0\0").unwrap();
        std::fs::write(dir.join("assets/clip.mp4"), [0, 0, 0, 0x18, b'f', b't']).unwrap();
        // ... and so are files whose extension says asset but whose bytes
        // do not decode as one.
        std::fs::write(dir.join("assets/logo.png"), [0xE9, 0x00, 0xFF, 0x10]).unwrap();
        std::fs::write(dir.join("assets/photo.jpg"), b"\xFF\xD8\xFF\xE0 cut").unwrap();
        std::fs::write(dir.join("assets/photo.webp"), b"RIFF\0\0\0\0WEBP").unwrap();
        std::fs::write(dir.join("assets/spinner.gif"), b"GIF89a").unwrap();
        std::fs::write(dir.join("assets/font.woff2"), b"wOF2\0\x01\0\0").unwrap();
    });
    assert!(
        has(&found, "assets/latin1.txt", "SOURCE_NOT_UTF8"),
        "{found:?}"
    );
    assert!(has(&found, "assets/nul.txt", "SOURCE_NUL"), "{found:?}");
    assert!(
        has(&found, "assets/surrogate.txt", "SOURCE_NOT_UTF8"),
        "{found:?}"
    );
    for file in ["assets/tool.exe", "assets/photo.bmp", "assets/clip.mp4"] {
        assert!(has(&found, file, "PATH_EXTENSION"), "{file}: {found:?}");
    }
    for file in [
        "assets/logo.png",
        "assets/photo.jpg",
        "assets/photo.webp",
        "assets/spinner.gif",
    ] {
        assert!(
            has(&found, file, "ASSET_IMAGE_INVALID"),
            "{file}: {found:?}"
        );
    }
    assert!(
        has(&found, "assets/font.woff2", "ASSET_FONT_INVALID"),
        "{found:?}"
    );
}

/// Binary assets are inlined into the hashed resource as `data:` URLs, so the
/// CSP keeps `img-src data:; font-src data:` and one changed asset byte is a
/// new revision.
#[test]
fn binary_assets_are_inlined_and_hashed() {
    use base64::Engine as _;
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("brand-card");
    copy_dir(&corpus().join("valid/brand-card"), &dir);
    let resource = sasha_package::validate::validate_dir(&dir)
        .package
        .expect("valid")
        .resource;
    for (file, mime) in [
        ("assets/logo.png", "image/png"),
        ("assets/logo-2x.png", "image/png"),
        ("assets/photo.jpg", "image/jpeg"),
        ("assets/photo.webp", "image/webp"),
        ("assets/stripes.gif", "image/gif"),
        ("fonts/blocks.woff2", "font/woff2"),
    ] {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let url = format!(
            "data:{mime};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        );
        assert!(resource.html.contains(&url), "{file} is not inlined");
    }
    assert!(resource.html.contains("url(\"data:font/woff2;base64,"));
    assert!(resource.html.contains("url(\"data:image/gif;base64,"));
    assert!(
        !resource.html.contains("assets/"),
        "no package path is left"
    );
    assert!(!resource.html.contains("fonts/"), "no package path is left");
    assert!(resource.csp.contains("img-src data:; font-src data:;"));

    let before = resource.revision;
    // One byte each, in places the formats do not check, so the package stays
    // valid: the WOFF2's last byte (compressed data) and the first value of
    // the JPEG's first quantization table (after FF DB, length, Pq/Tq).
    let jpeg = std::fs::read(dir.join("assets/photo.jpg")).unwrap();
    let dqt = jpeg.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap() + 5;
    let font = std::fs::read(dir.join("fonts/blocks.woff2")).unwrap();
    for (file, at) in [
        ("fonts/blocks.woff2", font.len() - 1),
        ("assets/photo.jpg", dqt),
    ] {
        let path = dir.join(file);
        let original = std::fs::read(&path).unwrap();
        let mut changed = original.clone();
        changed[at] = if changed[at] == 1 { 2 } else { 1 };
        std::fs::write(&path, &changed).unwrap();
        let validation = sasha_package::validate::validate_dir(&dir);
        let after = validation
            .package
            .unwrap_or_else(|| panic!("{file}: {:?}", validation.diagnostics))
            .resource;
        assert_ne!(after.revision, before, "{file}");
        std::fs::write(&path, &original).unwrap();
    }
    assert_eq!(
        sasha_package::validate::validate_dir(&dir)
            .package
            .expect("valid again")
            .resource
            .revision,
        before
    );
}

/// Security catalogue G1: 10× the size limit, many files, one 50 MB file.
#[test]
fn oversized_packages_stop_early() {
    let found = check_generated(|dir| {
        let big = std::fs::File::create(dir.join("assets/huge.txt")).unwrap();
        big.set_len(50 * 1024 * 1024).unwrap();
    });
    assert!(
        has(&found, "assets/huge.txt", "FILE_TOO_LARGE"),
        "{found:?}"
    );

    let found = check_generated(|dir| {
        for i in 0..10 {
            std::fs::write(
                dir.join(format!("assets/part{i}.txt")),
                "x".repeat(1024 * 1024 - 1),
            )
            .unwrap();
        }
    });
    assert!(
        found.iter().any(|(_, c)| c == "PACKAGE_TOO_LARGE"),
        "{found:?}"
    );

    let found = check_generated(|dir| {
        let many = dir.join("assets/many");
        std::fs::create_dir_all(&many).unwrap();
        for i in 0..20_000 {
            std::fs::write(many.join(format!("{i:05}.txt")), "").unwrap();
        }
    });
    assert!(
        found.iter().any(|(_, c)| c == "PACKAGE_TOO_MANY_FILES"),
        "{found:?}"
    );
}

/// Security catalogue G2 and G3: deep nesting and pathological inputs are refused
/// (or accepted) without a stack overflow.
#[test]
fn pathological_inputs_are_refused_without_crashing() {
    let found = check_generated(|dir| {
        let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
        let deep = format!("{}{}", "<div>".repeat(60_000), "</div>".repeat(60_000));
        std::fs::write(
            dir.join("index.html"),
            html.replace("<main>", &format!("<main>{deep}")),
        )
        .unwrap();
    });
    assert!(has(&found, "index.html", "HTML_TOO_DEEP"), "{found:?}");

    let found = check_generated(|dir| {
        let nested = format!("{}{}", "@media screen {".repeat(10_000), "}".repeat(10_000));
        std::fs::write(dir.join("styles.css"), nested).unwrap();
    });
    assert!(has(&found, "styles.css", "CSS_TOO_DEEP"), "{found:?}");

    let found = check_generated(|dir| {
        std::fs::write(
            dir.join("styles.css"),
            format!(
                "a {{ background: url({}//attacker.test) }}",
                " ".repeat(100_000)
            ),
        )
        .unwrap();
    });
    assert!(has(&found, "styles.css", "CSS_URL"), "{found:?}");

    let found = check_generated(|dir| {
        let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
        let text = format!(
            "<p>{}</p><p>{}</p>",
            "&#x".repeat(100_000),
            "\u{FDFA}".repeat(1000)
        );
        let html = html.replace("<main>", &format!("<main>{text}"));
        std::fs::write(dir.join("index.html"), html).unwrap();
        std::fs::write(dir.join("app.js"), format!("{}\n", "[".repeat(100_000))).unwrap();
    });
    assert!(has(&found, "app.js", "JS_TOO_DEEP"), "{found:?}");
}

/// Sources within their 1 MiB limit can still assemble past the 1 MiB resource
/// limit (assets grow by a third as base64): that is refused, not truncated.
#[test]
fn an_assembled_document_over_one_mebibyte_is_refused() {
    let found = check_generated(|dir| {
        let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
        let mut images = String::new();
        for i in 0..3 {
            let svg = format!(
                "<svg xmlns=\"http://www.w3.org/2000/svg\"><desc>{}</desc></svg>\n",
                "x".repeat(300 * 1024)
            );
            std::fs::write(dir.join(format!("assets/big{i}.svg")), svg).unwrap();
            images.push_str(&format!("<img src=\"assets/big{i}.svg\" alt=\"\">"));
        }
        std::fs::write(
            dir.join("index.html"),
            html.replace("<main>", &format!("<main>{images}")),
        )
        .unwrap();
    });
    assert_eq!(
        found,
        [("index.html".to_owned(), "RESOURCE_TOO_LARGE".to_owned())]
    );
}

/// The assembled document may be exactly 1 MiB; one byte more is refused at
/// assembly with a diagnostic on `index.html`, never truncated.
#[test]
fn the_assembled_size_limit_is_exact() {
    use sasha_package::assemble::MAX_ASSEMBLED_BYTES;
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("hello");
    copy_dir(&corpus().join("valid/hello"), &dir);
    let original = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let pad = |n: usize| {
        let html = original.replace("<main>", &format!("<main><p hidden>{}</p>", "x".repeat(n)));
        std::fs::write(dir.join("index.html"), html).unwrap();
        sasha_package::validate::validate_dir(&dir)
    };
    let probe = 1000;
    let measured = pad(probe)
        .package
        .expect("the probe validates")
        .resource
        .html
        .len();
    let exact = probe + (MAX_ASSEMBLED_BYTES - measured);
    let at_limit = pad(exact);
    assert_eq!(
        at_limit
            .package
            .expect("exactly 1 MiB is accepted")
            .resource
            .html
            .len(),
        MAX_ASSEMBLED_BYTES
    );
    let over = pad(exact + 1);
    assert!(
        over.package.is_none(),
        "one byte over the limit must be refused"
    );
    assert!(
        over.diagnostics
            .iter()
            .any(|d| d.file == "index.html" && d.code == "RESOURCE_TOO_LARGE"),
        "{:?}",
        over.diagnostics
    );
}
