//! Binary assets at assembly: every image and font a document or stylesheet
//! names becomes a `data:` URL inside the hashed resource, the style hashes of
//! the CSP cover the stylesheets as rewritten, and nothing of the package is
//! left to load.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use sasha_package::validate::validate_dir;
use sha2::{Digest as _, Sha256};

fn fixture(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/packages/valid")
        .join(id)
}

#[test]
fn every_referenced_asset_is_inlined_as_a_data_url() {
    let dir = fixture("brand-card");
    let resource = validate_dir(&dir).package.expect("valid").resource;
    for (file, mime, times) in [
        // src and srcset 1x
        ("assets/logo.png", "image/png", 2),
        ("assets/logo-2x.png", "image/png", 1),
        ("assets/photo.jpg", "image/jpeg", 1),
        ("assets/photo.webp", "image/webp", 1),
        // css/banner.css names it as ../assets/stripes.gif
        ("assets/stripes.gif", "image/gif", 1),
        ("fonts/blocks.woff2", "font/woff2", 1),
    ] {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let url = format!(
            "data:{mime};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        );
        assert_eq!(resource.html.matches(&url).count(), times, "{file}");
    }
    assert!(resource.csp.contains("img-src data:; font-src data:;"));
    assert!(!resource.html.contains("url(fonts/") && !resource.html.contains("../assets/"));
}

#[test]
fn the_csp_hashes_the_rewritten_stylesheets() {
    let resource = validate_dir(&fixture("brand-card"))
        .package
        .expect("valid")
        .resource;
    let mut rest = resource.html.as_str();
    let mut styles = 0;
    while let Some(start) = rest.find("<style>") {
        let body = &rest[start + "<style>".len()..];
        let end = body.find("</style>").unwrap();
        let hash = base64::engine::general_purpose::STANDARD
            .encode(Sha256::digest(&body.as_bytes()[..end]));
        assert!(
            resource.csp.contains(&format!("'sha256-{hash}'")),
            "style {styles}"
        );
        if body[..end].contains("url(\"data:") {
            styles += 1;
        }
        rest = &body[end..];
    }
    assert_eq!(styles, 2, "both app stylesheets carry inlined assets");
}
