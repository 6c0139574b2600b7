//! How long the one validator takes on the largest package the rules allow:
//! 64 files and (just under) 1 MiB, with a real mix of markup, styles, scripts,
//! SVG assets, a schema with migrations and actions. Run with
//! `cargo bench -p sasha-package --bench validate`.

use std::path::Path;
use std::time::{Duration, Instant};

use sasha_package::validate::validate_dir;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The expense-log fixture grown to 64 files and about 1 MiB.
fn build_package(root: &Path) -> std::path::PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/packages/valid/expense-log");
    let dir = root.join("expense-log");
    copy_dir(&fixture, &dir);
    let base_files = 11;
    let mut index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let mut scripts = String::new();
    let mut sections = String::new();
    // 17 scripts of ~24 KiB, 17 stylesheets of ~12 KiB, 19 SVG assets of ~8 KiB.
    for i in 0..17 {
        let mut js = String::new();
        for f in 0..200 {
            js.push_str(&format!(
                "function helper{i}_{f}(rows) {{\n  const out = [];\n  for (const row of rows) {{ if (row.amount > {f}) out.push({{ id: row.id, label: `#${{row.id}}` }}); }}\n  return out;\n}}\n"
            ));
        }
        std::fs::write(dir.join(format!("lib{i:02}.js")), js).unwrap();
        scripts.push_str(&format!("<script src=\"lib{i:02}.js\"></script>\n"));
        let mut css = String::new();
        for r in 0..120 {
            css.push_str(&format!(".c{i}-{r} {{ margin: {r}px; padding: 0 {i}px; color: var(--sasha-color-text, #111); }}\n@media (min-width: {r}0px) {{ .c{i}-{r} {{ display: grid; }} }}\n"));
        }
        std::fs::write(dir.join(format!("s{i:02}.css")), css).unwrap();
        index = index.replace("<link rel=\"stylesheet\" href=\"styles.css\">", &format!("<link rel=\"stylesheet\" href=\"styles.css\">\n  <link rel=\"stylesheet\" href=\"s{i:02}.css\">"));
    }
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    for i in 0..(64 - base_files - 34) {
        let mut svg =
            String::from("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 100 100\">");
        for p in 0..80 {
            svg.push_str(&format!(
                "<circle cx=\"{p}\" cy=\"{i}\" r=\"3\" fill=\"#1a4a8a\"/>"
            ));
        }
        svg.push_str("</svg>\n");
        std::fs::write(dir.join(format!("assets/icon{i:02}.svg")), svg).unwrap();
        sections.push_str(&format!("<section><h2>Part {i}</h2><img src=\"assets/icon{i:02}.svg\" alt=\"\"><p>{}</p></section>\n", "Lorem ipsum dolor sit amet. ".repeat(60)));
    }
    index = index.replace(
        "<script src=\"app.js\"></script>",
        &format!("{sections}{scripts}<script src=\"app.js\"></script>"),
    );
    std::fs::write(dir.join("index.html"), index).unwrap();
    let mut diagnostics = sasha_package::Diagnostics::new();
    let source = sasha_package::source::read_package(&dir, &mut diagnostics);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let bytes: usize = source.files.values().map(String::len).sum();
    println!("package: {} files, {} bytes", source.files.len(), bytes);
    dir
}

fn main() {
    let temp = tempfile::tempdir().unwrap();
    let dir = build_package(temp.path());
    let first = validate_dir(&dir);
    assert!(first.package.is_some(), "{:#?}", first.diagnostics);
    let mut times: Vec<Duration> = (0..20)
        .map(|_| {
            let start = Instant::now();
            let validation = validate_dir(&dir);
            let elapsed = start.elapsed();
            assert!(validation.package.is_some());
            elapsed
        })
        .collect();
    times.sort();
    println!(
        "validate_dir (read, validate, assemble): min {:?}, median {:?}, max {:?} over {} runs",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1],
        times.len()
    );
}
