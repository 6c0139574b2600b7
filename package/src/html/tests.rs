//! The HTML validator's unit tests: what a package's index.html may hold,
//! and every refusal with its file and line.

use super::*;
use crate::diagnostics::Diagnostic;

fn files() -> BTreeSet<String> {
    [
        "index.html",
        "APP.md",
        "styles.css",
        "theme.css",
        "app.js",
        "lib/util.js",
        "icons/logo.svg",
        "icons/logo.png",
        "icons/photo.jpg",
        "icons/photo.webp",
        "icons/spinner.gif",
        "fonts/brand.woff2",
        "notes.txt",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

fn analyze(text: &str) -> (Option<HtmlDocument>, Vec<Diagnostic>) {
    let mut diagnostics = Diagnostics::new();
    let document = analyze_html("index.html", text, &files(), &mut diagnostics);
    assert!(diagnostics.iter().all(|d| d.file == "index.html"));
    assert!(
        diagnostics.iter().all(|d| !d.reason.ends_with('.')),
        "{diagnostics:?}"
    );
    (document, diagnostics.iter().cloned().collect())
}

fn sorted_codes(diagnostics: &[Diagnostic]) -> Vec<String> {
    let mut codes: Vec<String> = diagnostics.iter().map(|d| d.code.clone()).collect();
    codes.sort();
    codes
}

/// A valid document with `body` inside its `<body>`.
fn page(body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width\">\n<title>Time</title>\n\
             <link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body>\n{body}\n\
             <script src=\"app.js\"></script>\n</body>\n</html>\n"
    )
}

/// Exactly these codes (in any order) for `body` inside a valid page.
#[track_caller]
fn check(body: &str, expected: &[&str]) {
    check_document(&page(body), expected);
}

#[track_caller]
fn check_document(text: &str, expected: &[&str]) {
    let (document, diagnostics) = analyze(text);
    assert!(document.is_some(), "no document for {text:?}");
    let mut expected: Vec<String> = expected.iter().map(|code| (*code).to_owned()).collect();
    expected.sort();
    assert_eq!(
        sorted_codes(&diagnostics),
        expected,
        "for {text:?}: {diagnostics:#?}"
    );
}

/// At least these codes for `body` inside a valid page (for payloads
/// whose full set of findings is incidental).
#[track_caller]
fn check_includes(body: &str, expected: &[&str]) {
    let (_, diagnostics) = analyze(&page(body));
    let codes = sorted_codes(&diagnostics);
    for code in expected {
        assert!(
            codes.iter().any(|found| found == code),
            "{code} missing for {body:?}: {codes:?}"
        );
    }
}

#[test]
fn a_normal_document_is_allowed() {
    let text = "<!DOCTYPE html>\n<html lang=\"de\">\n<head>\n  <meta charset=\"utf-8\">\n  \
            <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n  \
            <title>  Time \n sheet </title>\n  <link rel=\"stylesheet\" href=\"styles.css\">\n  \
            <link rel=\"Stylesheet\" href=\"./theme.css\">\n  <script src=\"lib/util.js\"></script>\n</head>\n\
            <body>\n  <!-- a comment -->\n  <main id=\"app\" class=\"x\" data-state=\"idle\" aria-live=\"polite\">\n    \
            <a href=\"#top\">top</a>\n    <img src=\"icons/logo.svg\" alt=\"logo\">\n    \
            <svg viewBox=\"0 0 10 10\"><defs><linearGradient id=\"g\"/></defs>\
            <use href=\"#g\"/><rect fill=\"url(#g)\" width=\"1\"/>\
            <image href=\"icons/logo.svg\"/><animate attributeName=\"opacity\" values=\"0;1\"/></svg>\n    \
            <math><mi>x</mi><mo>&lt;</mo><mn>2</mn></math>\n    \
            <form class=\"entry\"><label>Hours <input name=\"hours\" type=\"number\"></label>\
            <button type=\"submit\">Save</button></form>\n    \
            <template id=\"row\"><tr><td><img src=\"icons/logo.svg\" alt=\"\"></td></tr></template>\n    \
            <video poster=\"icons/logo.svg\"></video>\n    <pre>\n\n  code</pre>\n  </main>\n  \
            <script src=\"app.js\" type=\"text/javascript\"></script>\n</body>\n</html>\n";
    let (document, diagnostics) = analyze(text);
    assert_eq!(diagnostics, [], "{diagnostics:#?}");
    let document = document.unwrap();
    assert_eq!(document.lang(), Some("de"));
    assert_eq!(document.title().as_deref(), Some("Time sheet"));
    let references: Vec<(ReferenceKind, &str, u32)> = document
        .references()
        .iter()
        .map(|r| (r.kind, r.path.as_str(), r.line))
        .collect();
    assert_eq!(
        references,
        [
            (ReferenceKind::Stylesheet, "styles.css", 8),
            (ReferenceKind::Stylesheet, "theme.css", 9),
            (ReferenceKind::Script, "lib/util.js", 10),
            (ReferenceKind::Asset, "icons/logo.svg", 16),
            (ReferenceKind::Asset, "icons/logo.svg", 17),
            (ReferenceKind::Asset, "icons/logo.svg", 20),
            (ReferenceKind::Asset, "icons/logo.svg", 21),
            (ReferenceKind::Script, "app.js", 26),
        ]
    );
}

#[test]
fn title_and_lang_are_optional() {
    let (document, diagnostics) = analyze("<!DOCTYPE html><p>x</p>");
    assert_eq!(diagnostics, []);
    let document = document.unwrap();
    assert_eq!(document.lang(), None);
    assert_eq!(document.title(), None);
    assert!(document.references().is_empty());
    // An SVG title is not the document's title.
    let (document, _) = analyze("<!DOCTYPE html><svg><title>no</title></svg><title>yes</title>");
    assert_eq!(document.unwrap().title().as_deref(), Some("yes"));
}

#[test]
fn the_document_must_be_in_no_quirks_mode() {
    check_document("<html><body><p>x</p></body></html>", &["HTML_QUIRKS_MODE"]);
    check_document(
        "<!DOCTYPE html PUBLIC \"-//W3C//DTD HTML 4.01 Transitional//EN\"><p>x",
        &["HTML_QUIRKS_MODE"],
    );
    check_document("", &["HTML_QUIRKS_MODE"]);
    check_document("<!doctype HTML><p>x", &[]);
}

#[test]
fn scripts_must_be_package_files() {
    check("<script>alert(1)</script>", &["HTML_INLINE_SCRIPT"]);
    check("<SCRIPT>alert(1)</SCRIPT>", &["HTML_INLINE_SCRIPT"]);
    check("<script/x>alert(1)</script>", &["HTML_INLINE_SCRIPT"]);
    check("<script></script>", &["HTML_INLINE_SCRIPT"]);
    check(
        "<script src=\"app.js\">alert(1)</script>",
        &["HTML_INLINE_SCRIPT"],
    );
    check("<script src=\"app.js\">\n  </script>", &[]);
    check(
        "<script src=\"app.js\" type=\"module\"></script>",
        &["HTML_SCRIPT_TYPE"],
    );
    check(
        "<script src=\"app.js\" type=\"importmap\"></script>",
        &["HTML_SCRIPT_TYPE"],
    );
    check(
        "<script src=\"app.js\" type=\" TEXT/JavaScript \"></script>",
        &[],
    );
    check(
        "<script src=\"https://cdn.test/x.js\"></script>",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<script src=\"//cdn.test/x.js\"></script>",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<script src=\"missing.js\"></script>",
        &["HTML_MISSING_FILE"],
    );
    check(
        "<script src=\"styles.css\"></script>",
        &["HTML_WRONG_FILE_TYPE"],
    );
    check("<script src=\"./lib/../app.js\"></script>", &[]);
    check(
        "<script src=\"javascript:alert(1)\"></script>",
        &["HTML_SCRIPT_URL"],
    );
    check(
        "<script src=\"data:text/javascript,alert(1)\"></script>",
        &["HTML_DATA_URL"],
    );
    check(
        "<svg><script>alert(1)</script></svg>",
        &["HTML_FOREIGN_SCRIPT"],
    );
    check(
        "<svg><script href=\"app.js\"></script></svg>",
        &["HTML_FOREIGN_SCRIPT", "HTML_URL_NOT_ALLOWED"],
    );
    check(
        "<math><script>alert(1)</script></math>",
        &["HTML_FOREIGN_SCRIPT"],
    );
}

#[test]
fn package_paths_are_plain() {
    for bad in [
        "../app.js",
        "lib/../../app.js",
        "/app.js",
        "app.js?v=1",
        "app.js#x",
        "%61pp.js",
        "lib\\util.js",
        "lib//util.js",
        "lib/",
        ".",
    ] {
        check(
            &format!("<script src=\"{bad}\"></script>"),
            &["HTML_BAD_PATH"],
        );
    }
    let traversal = "../".repeat(10_000);
    check(
        &format!("<img src=\"{traversal}icons/logo.svg\">"),
        &["HTML_BAD_PATH"],
    );
    // Whitespace, tabs and newlines are ignored the way URL parsing does.
    check("<img src=\"  icons/lo\tgo.svg\n\">", &[]);
}

#[test]
fn a1_script_variants_are_refused() {
    check(
        "<img src=\"icons/logo.svg\" onerror=\"alert(1)\">",
        &["HTML_EVENT_HANDLER"],
    );
    check(
        "<img src=x onerror=alert(1)>",
        &["HTML_EVENT_HANDLER", "HTML_MISSING_FILE"],
    );
    check(
        "<svg><animate onbegin=alert(1) attributeName=x dur=1s></animate></svg>",
        &["HTML_EVENT_HANDLER"],
    );
    check("<details open ontoggle=alert(1)>", &["HTML_EVENT_HANDLER"]);
    check("<svg onload=alert(1)></svg>", &["HTML_EVENT_HANDLER"]);
    check(
        "<math><mi ONCLICK=alert(1)>x</mi></math>",
        &["HTML_EVENT_HANDLER"],
    );
    check(
        "<p OnMouseOver=\"x\" onfocus=\"y\">",
        &["HTML_EVENT_HANDLER", "HTML_EVENT_HANDLER"],
    );
    // A second <body> adds its attributes to the first.
    check("<body onload=alert(1)>", &["HTML_EVENT_HANDLER"]);
}

#[test]
fn a2_script_urls_are_refused() {
    check(
        "<a href=\"jav&#x09;ascript:alert(1)\">x</a>",
        &["HTML_SCRIPT_URL"],
    );
    check(
        "<a href=\" JaVaScRiPt:alert(1)\">x</a>",
        &["HTML_SCRIPT_URL"],
    );
    check(
        "<a href=\"java\nscript:alert(1)\">x</a>",
        &["HTML_SCRIPT_URL"],
    );
    check(
        "<a href=\"&#106;avascript:alert(1)\">x</a>",
        &["HTML_SCRIPT_URL"],
    );
    check(
        "<a href=\"\u{1}javascript:alert(1)\">x</a>",
        &["HTML_SCRIPT_URL"],
    );
    check(
        "<svg><a xlink:href=\"javascript:alert(1)\"><rect/></a></svg>",
        &["HTML_SCRIPT_URL"],
    );
    check(
        "<svg><set attributeName=href to=\"javascript:alert(1)\"></set></svg>",
        &["HTML_ANIMATE_HREF", "HTML_SCRIPT_URL"],
    );
    // An animation may not set an event handler either, in any namespace.
    check(
        "<svg><set attributeName=\"onload\" to=\"alert(1)\"></set></svg>",
        &["HTML_ANIMATE_EVENT_HANDLER"],
    );
    check(
        "<svg><animate attributeName=\" OnClick \" values=\"a;b\"/></svg>",
        &["HTML_ANIMATE_EVENT_HANDLER"],
    );
    check(
        "<svg><set attributeName=\"xlink:onbegin\" to=\"x\"></set></svg>",
        &["HTML_ANIMATE_EVENT_HANDLER"],
    );
    check(
        "<svg><animate attributeName=\"xlink:href\" values=\"#a;javascript:alert(1)\"/></svg>",
        &["HTML_ANIMATE_HREF", "HTML_SCRIPT_URL"],
    );
    check(
        "<math href=\"javascript:alert(1)\">x</math>",
        &["HTML_SCRIPT_URL"],
    );
    check(
        "<button formaction=\"javascript:alert(1)\">x</button>",
        &["HTML_FORM_DESTINATION"],
    );
}

#[test]
fn a3_parser_differentials_are_refused() {
    check_includes(
        "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\"></noscript>",
        &["HTML_NOSCRIPT", "HTML_EVENT_HANDLER"],
    );
    check_includes(
        "<svg><style><img src=x onerror=alert(1)></style></svg>",
        &["HTML_STYLE_ELEMENT", "HTML_EVENT_HANDLER"],
    );
    check_includes(
        "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table></mtext></math>",
        &["HTML_STYLE_ELEMENT"],
    );
    check_includes(
        "<svg><![CDATA[</svg><img src=x onerror=alert(1)>]]></svg>",
        &["HTML_CDATA"],
    );
    check_includes(
        "<template><img src=x onerror=alert(1)></template>",
        &["HTML_EVENT_HANDLER"],
    );
    check_includes(
        "<template><template><div><svg><script>alert(1)</script></svg></div></template></template>",
        &["HTML_FOREIGN_SCRIPT"],
    );
    check_includes(
        "<!-- --!><img src=x onerror=alert(1)> -->",
        &["HTML_MALFORMED_COMMENT", "HTML_EVENT_HANDLER"],
    );
    check_includes(
        "<!--><img src=x onerror=alert(1)>-->",
        &["HTML_MALFORMED_COMMENT", "HTML_EVENT_HANDLER"],
    );
    check_includes(
        "<!---><img src=x onerror=alert(1)>-->",
        &["HTML_MALFORMED_COMMENT", "HTML_EVENT_HANDLER"],
    );
    check_includes("<!-- <!-- nested --> <p>x", &["HTML_MALFORMED_COMMENT"]);
    check_includes(
        "<!-- never closed <img src=x onerror=alert(1)>",
        &["HTML_MALFORMED_COMMENT"],
    );
    check_includes(
        "<form><math><mtext></form><form><mglyph><style></math><img src=x onerror=alert(1)>",
        &["HTML_STYLE_ELEMENT", "HTML_UNSTABLE_MARKUP"],
    );
    check_includes(
        "<math><annotation-xml encoding=\"text/html\"><style><img src=x onerror=alert(1)></style></annotation-xml></math>",
        &["HTML_ANNOTATION_XML", "HTML_STYLE_ELEMENT"],
    );
    check_includes(
        "<xmp><img src=x onerror=alert(1)></xmp>",
        &["HTML_RAW_TEXT_ELEMENT"],
    );
    check_includes(
        "<plaintext><script>alert(1)</script>",
        &["HTML_RAW_TEXT_ELEMENT"],
    );
    check_includes(
        "<noembed><img src=x onerror=alert(1)></noembed>",
        &["HTML_RAW_TEXT_ELEMENT"],
    );
    check_includes(
        "<noframes><img src=x onerror=alert(1)></noframes>",
        &["HTML_RAW_TEXT_ELEMENT"],
    );
}

#[test]
fn markup_that_reparses_differently_is_refused() {
    // </form> inside a <div> leaves the first form open, so the second
    // form nests inside it; the serialization of nested forms parses
    // back into one form.
    check(
        "<form><div></form><form><input name=\"a\"></form>",
        &["HTML_UNSTABLE_MARKUP"],
    );
    // Ordinary sloppy markup reparses the same.
    check(
        "<p>a<p>b<ul><li>c<li>d</ul><table><tr><td>1<td>2</table><b><i>x</b>y</i>",
        &[],
    );
}

#[test]
fn a4_inlined_files_cannot_break_out() {
    // Inline content is refused outright; package files are checked by
    // their own modules (css::check_css refuses `</style`).
    check(
        "<script>`</script><meta http-equiv=refresh content=\"0;url=https://attacker.test\">`</script>",
        &["HTML_INLINE_SCRIPT", "HTML_META"],
    );
}

#[test]
fn a5_nested_browsing_contexts_are_refused() {
    check("<iframe src=\"#x\"></iframe>", &["HTML_NESTED_CONTEXT"]);
    check(
        "<iframe srcdoc=\"<script>alert(1)</script>\"></iframe>",
        &["HTML_NESTED_CONTEXT"],
    );
    check(
        "<object data=\"icons/logo.svg\"></object>",
        &["HTML_NESTED_CONTEXT", "HTML_URL_NOT_ALLOWED"],
    );
    check(
        "<embed src=\"//attacker.test/x\">",
        &["HTML_NESTED_CONTEXT", "HTML_EXTERNAL_URL"],
    );
    check("<applet code=\"x\"></applet>", &["HTML_NESTED_CONTEXT"]);
    check("<fencedframe></fencedframe>", &["HTML_NESTED_CONTEXT"]);
    check("<portal></portal>", &["HTML_NESTED_CONTEXT"]);
    check("<frame>", &["HTML_NESTED_CONTEXT"]);
    check(
        "<svg><foreignObject><iframe src=\"#x\"></iframe></foreignObject></svg>",
        &["HTML_NESTED_CONTEXT"],
    );
    let (_, diagnostics) = analyze("<!DOCTYPE html><frameset><frame src=\"x.html\"></frameset>");
    let codes = sorted_codes(&diagnostics);
    assert!(
        codes
            .iter()
            .filter(|code| *code == "HTML_NESTED_CONTEXT")
            .count()
            >= 2,
        "{codes:?}"
    );
}

#[test]
fn a6_navigation_is_refused() {
    check(
        "<meta http-equiv=\"refresh\" content=\"0;url=https://attacker.test\">",
        &["HTML_META"],
    );
    check(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src *\">",
        &["HTML_META"],
    );
    check("<meta name=\"description\" content=\"x\">", &["HTML_META"]);
    check(
        "<meta charset=\"utf-8\" http-equiv=\"refresh\" content=\"0\">",
        &["HTML_META"],
    );
    check(
        "<meta name=\"viewport\" content=\"width=device-width\">",
        &[],
    );
    check(
        "<base href=\"https://attacker.test/\">",
        &["HTML_BASE", "HTML_EXTERNAL_URL"],
    );
    check(
        "<base target=\"_top\">",
        &["HTML_BASE", "HTML_NAVIGATION_ATTRIBUTE"],
    );
    check(
        "<a href=\"#x\" target=\"_top\">x</a>",
        &["HTML_NAVIGATION_ATTRIBUTE"],
    );
    check(
        "<a href=\"#x\" target=\"_blank\">x</a>",
        &["HTML_NAVIGATION_ATTRIBUTE"],
    );
    check(
        "<a href=\"#x\" target=\"_parent\">x</a>",
        &["HTML_NAVIGATION_ATTRIBUTE"],
    );
    check(
        "<a href=\"#x\" download>x</a>",
        &["HTML_NAVIGATION_ATTRIBUTE"],
    );
    check(
        "<a href=\"#x\" ping=\"https://attacker.test\">x</a>",
        &["HTML_NAVIGATION_ATTRIBUTE"],
    );
    check(
        "<a href=\"https://attacker.test\">x</a>",
        &["HTML_EXTERNAL_URL"],
    );
    check("<a href=\"other.html\">x</a>", &["HTML_URL_NOT_ALLOWED"]);
    check("<a href=\"\">x</a>", &["HTML_EMPTY_URL"]);
    check("<a href=\"#\">x</a><a name=\"x\">y</a>", &[]);
    check(
        "<map name=\"m\"><area href=\"#x\"></map>",
        &["HTML_AREA_HREF"],
    );
    check("<img src=\"icons/logo.svg\" usemap=\"#m\">", &[]);
}

#[test]
fn a7_forms_have_no_destination() {
    // The spec wins over catalogue case A7: a form without a destination
    // is allowed so native submit events fire; CSP form-action 'none'
    // blocks the navigation it would otherwise start.
    check("<form><input name=\"q\"><button>Go</button></form>", &[]);
    check("<form method=\"dialog\"><button>Close</button></form>", &[]);
    check(
        "<form action=\"https://attacker.test\"></form>",
        &["HTML_FORM_DESTINATION"],
    );
    check("<form action=\"\"></form>", &["HTML_FORM_DESTINATION"]);
    check(
        "<form target=\"_blank\"></form>",
        &["HTML_FORM_DESTINATION"],
    );
    check(
        "<form><button formaction=\"//attacker.test\">x</button></form>",
        &["HTML_FORM_DESTINATION"],
    );
    check(
        "<form><button formtarget=\"_top\">x</button></form>",
        &["HTML_FORM_DESTINATION"],
    );
    check(
        "<form><button formmethod=\"post\">x</button></form>",
        &["HTML_FORM_DESTINATION"],
    );
    check(
        "<form><input type=\"image\" src=\"icons/logo.svg\"></form>",
        &["HTML_INPUT_IMAGE", "HTML_URL_NOT_ALLOWED"],
    );
    check(
        "<form><input type=\" IMAGE \"></form>",
        &["HTML_INPUT_IMAGE"],
    );
}

#[test]
fn a8_fetches_in_markup_are_refused() {
    check("<img src=//attacker.test>", &["HTML_EXTERNAL_URL"]);
    check("<img src=\"\\\\attacker.test\\x\">", &["HTML_EXTERNAL_URL"]);
    check("<img src=\"https:attacker.test\">", &["HTML_EXTERNAL_URL"]);
    check(
        "<img src=\"data:image/svg+xml,<svg/>\">",
        &["HTML_DATA_URL"],
    );
    check(
        "<img src=\"icons/logo.svg\" srcset=\"//attacker.test/x.png 2x\">",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<picture><source srcset=\"//attacker.test/a\"><img src=\"icons/logo.svg\"></picture>",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<img src=\"icons/logo.svg\" srcset=\"icons/logo.png 1x, https://attacker.test/b.png 2x\">",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<img srcset=\"data:image/png;base64,AA== 2x\">",
        &["HTML_DATA_URL"],
    );
    check(
        "<link rel=\"preload\" as=\"image\" imagesrcset=\"icons/logo.png 2x\">",
        &["HTML_LINK_REL", "HTML_SRCSET"],
    );
    check("<img src=\"notes.txt\">", &["HTML_WRONG_FILE_TYPE"]);
    check(
        "<video poster=\"//attacker.test/p.png\"></video>",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<video src=\"icons/logo.svg\"></video>",
        &["HTML_URL_NOT_ALLOWED"],
    );
    check(
        "<video><track src=\"captions.vtt\"></video>",
        &["HTML_URL_NOT_ALLOWED"],
    );
    check(
        "<audio src=\"https://attacker.test/a.mp3\"></audio>",
        &["HTML_EXTERNAL_URL"],
    );
    for rel in [
        "preload",
        "prefetch",
        "modulepreload",
        "dns-prefetch",
        "preconnect",
        "icon",
        "manifest",
        "alternate stylesheet",
    ] {
        check(
            &format!("<link rel=\"{rel}\" href=\"//attacker.test\">"),
            &["HTML_LINK_REL", "HTML_EXTERNAL_URL"],
        );
    }
    check(
        "<link rel=\"icon\" href=\"icons/logo.svg\">",
        &["HTML_LINK_REL", "HTML_URL_NOT_ALLOWED"],
    );
    check(
        "<link rel=\"stylesheet\" href=\"//attacker.test/a.css\">",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<link rel=\"stylesheet\" href=\"missing.css\">",
        &["HTML_MISSING_FILE"],
    );
    check(
        "<link rel=\"stylesheet\" href=\"app.js\">",
        &["HTML_WRONG_FILE_TYPE"],
    );
    check("<link rel=\"stylesheet\">", &["HTML_MISSING_HREF"]);
    check(
        "<link rel=\"stylesheet\" href=\"theme.css\" media=\"print\">",
        &["HTML_LINK_ATTRIBUTE"],
    );
    check(
        "<link rel=\"preload\" imagesrcset=\"a.png 2x\">",
        &["HTML_LINK_REL", "HTML_SRCSET"],
    );
    check(
        "<svg><image href=\"//attacker.test/x.png\"/></svg>",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<svg><image xlink:href=\"missing.svg\"/></svg>",
        &["HTML_MISSING_FILE"],
    );
    check(
        "<svg><use href=\"//attacker.test/s.svg#x\"/></svg>",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<svg><use href=\"icons/logo.svg#x\"/></svg>",
        &["HTML_URL_NOT_ALLOWED"],
    );
    check(
        "<svg><filter><feImage href=\"icons/logo.svg\"/></filter></svg>",
        &["HTML_URL_NOT_ALLOWED"],
    );
    check(
        "<svg><rect fill=\"url(https://attacker.test/p.svg#g)\"/></svg>",
        &["CSS_URL"],
    );
    check("<svg><rect filter=\"u\\72l(//x#f)\"/></svg>", &["CSS_URL"]);
    check(
        "<svg><animate attributeName=\"fill\" values=\"red;url(//attacker.test/#g)\"/></svg>",
        &["CSS_URL"],
    );
    check(
        "<svg><set attributeName=\"fill\" to=\"https://attacker.test/x\"/></svg>",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<body background=\"//attacker.test/b.png\">",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<blockquote cite=\"https://example.test\">x</blockquote>",
        &["HTML_EXTERNAL_URL"],
    );
    check(
        "<table background=\"x.png\"></table>",
        &["HTML_URL_NOT_ALLOWED"],
    );
    check_document(
        "<!DOCTYPE html><html manifest=\"x.appcache\"><p>x",
        &["HTML_URL_NOT_ALLOWED"],
    );
}

#[test]
fn a9_inline_styles_are_refused() {
    check("<p style=\"color: red\">x</p>", &["HTML_INLINE_STYLE"]);
    check(
        "<svg><rect style=\"fill: url(//attacker.test)\"/></svg>",
        &["HTML_INLINE_STYLE"],
    );
    check("<style>p { color: red }</style>", &["HTML_STYLE_ELEMENT"]);
    check_document(
        "<!DOCTYPE html><head><style>@import '//attacker.test';</style></head>",
        &["HTML_STYLE_ELEMENT"],
    );
}

#[test]
fn a13_clobbering_markup_is_refused() {
    check(
        "<img name=\"getElementById\" src=\"icons/logo.svg\">",
        &["HTML_DOM_CLOBBERING"],
    );
    // A form with an id and named controls is how every app finds its
    // form and reads its fields (the valid fixtures do it), so the
    // second A13 payload stays allowed: it can only clobber names in the
    // app's own document, and Studio never parses app markup.
    check(
        "<form id=\"config\"><input name=\"origin\" value=\"*\"></form>",
        &[],
    );
    check("<form name=\"cookie\"></form>", &["HTML_DOM_CLOBBERING"]);
    check(
        "<form class=\"config\"><input id=\"origin\" name=\"origin\"></form>",
        &[],
    );
}

#[test]
fn templates_and_head_keep_their_meaning() {
    check(
        "<template><script src=\"app.js\"></script></template>",
        &["HTML_INERT_RESOURCE"],
    );
    check(
        "<template><link rel=\"stylesheet\" href=\"theme.css\"></template>",
        &["HTML_INERT_RESOURCE"],
    );
    check_document(
        "<!DOCTYPE html><head><template><p>x</p></template></head><body></body>",
        &["HTML_HEAD_CONTENT"],
    );
    let (_, diagnostics) = analyze("<!DOCTYPE html><head><noscript><p>x</p></noscript></head>");
    assert!(sorted_codes(&diagnostics).contains(&"HTML_NOSCRIPT".to_owned()));
}

#[test]
fn lines_point_at_the_problem() {
    let text = "<!DOCTYPE html>\n<html>\n<body>\n<p>\n  <img\n    alt=\"x\"\n    onerror=\"alert(1)\"\n    src=\"icons/logo.svg\">\n</p>\n<a\nhref=\"javascript:x\">y</a>\n<iframe></iframe>\n<!-->\n</body></html>";
    let (_, diagnostics) = analyze(text);
    let mut lines: Vec<(&str, Option<u32>)> = diagnostics
        .iter()
        .map(|d| (d.code.as_str(), d.line))
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            ("HTML_EVENT_HANDLER", Some(7)),
            ("HTML_MALFORMED_COMMENT", Some(13)),
            ("HTML_NESTED_CONTEXT", Some(12)),
            ("HTML_SCRIPT_URL", Some(11)),
        ]
    );
}

#[test]
fn every_problem_is_reported() {
    let (document, diagnostics) = analyze(&page(
        "<p style=\"x\" onclick=\"y\"><iframe></iframe><img src=\"//x\"></p><base>",
    ));
    assert!(document.is_some());
    assert_eq!(
        sorted_codes(&diagnostics),
        [
            "HTML_BASE",
            "HTML_EVENT_HANDLER",
            "HTML_EXTERNAL_URL",
            "HTML_INLINE_STYLE",
            "HTML_NESTED_CONTEXT"
        ]
    );
}

#[test]
fn g2_deep_nesting_is_refused_without_overflow() {
    let deep = format!("<!DOCTYPE html>{}", "<div>".repeat(100_000));
    let (document, diagnostics) = analyze(&deep);
    assert!(document.is_none());
    assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_DEEP"]);

    // Just over the limit: parsed, and refused from the tree.
    let over = page(&format!("{}{}", "<div>".repeat(260), "</div>".repeat(260)));
    let (document, diagnostics) = analyze(&over);
    assert!(document.is_some());
    assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_DEEP"]);

    let fine = page(&format!("{}x{}", "<div>".repeat(200), "</div>".repeat(200)));
    check_document(&fine, &[]);

    // Closed siblings and implied end tags do not add up.
    check(&"<p>x".repeat(5_000), &[]);
    check(&"<li>x".repeat(5_000), &[]);
    check(&"<div>x</div>".repeat(5_000), &[]);
    check(
        &format!("<table>{}</table>", "<tr><td>x".repeat(2_000)),
        &[],
    );
    check(
        &format!("<svg>{}</svg>", "<path d=\"M0 0\"/>".repeat(5_000)),
        &[],
    );
    check(&"<b>x</b><i>y</i>".repeat(5_000), &[]);
}

#[test]
fn g2_reopened_formatting_elements_are_counted() {
    // Each paragraph reopens every <b> of the ones before it: the tree
    // gets deep although no tag in the source nests.
    let reopened: String = (0..3_000)
        .map(|i| format!("<p><b class=\"c{i}\">x</p>"))
        .collect();
    let (document, diagnostics) = analyze(&page(&reopened));
    assert!(document.is_none());
    assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_DEEP"]);
    // Other unclosed wrappers nest too.
    for wrapper in [
        "<span>",
        "<b>",
        "<table><tr><td>",
        "<svg><g>",
        "<math><mrow>",
        "<select><option>",
        "<template>",
    ] {
        let (document, diagnostics) = analyze(&page(&wrapper.repeat(20_000)));
        assert!(
            document.is_none() || sorted_codes(&diagnostics).contains(&"HTML_TOO_DEEP".to_owned()),
            "{wrapper}"
        );
    }
}

#[test]
fn g3_large_flat_documents_are_linear() {
    // Each of these once cost time per element proportional to the size
    // of the whole document (line numbers, comment endings).
    check(&"<p class=\"a\">x <i>y</i></p>\n".repeat(40_000), &[]);
    check(&"<!-- c -->\n".repeat(50_000), &[]);
    let (_, diagnostics) = analyze(&page(&"<p style=\"a\">\n".repeat(20_000)));
    assert_eq!(diagnostics.len(), 20_000);
    assert_eq!(diagnostics.last().map(|d| d.line), Some(Some(20_009)));
}

#[test]
fn g3_crowded_tags_are_refused_before_parsing() {
    let attributes: String = (0..100_000).map(|i| format!(" a{i}")).collect();
    let (document, diagnostics) = analyze(&page(&format!("<p{attributes}>x</p>")));
    assert!(document.is_none());
    assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_MANY_ATTRIBUTES"]);
    let (document, diagnostics) = analyze(&page(&format!("<p>x</p{attributes}>")));
    assert!(document.is_none());
    assert_eq!(sorted_codes(&diagnostics), ["HTML_TOO_MANY_ATTRIBUTES"]);
    let some: String = (0..100).map(|i| format!(" data-a{i}=\"{i}\"")).collect();
    check(&format!("<p{some}>x</p>"), &[]);
}

#[test]
fn g3_pathological_inputs_complete() {
    let (document, _) = analyze(&page(&"&#x".repeat(100_000)));
    assert!(document.is_some());
    check(
        &format!("<svg><rect fill=\"url({}\"/></svg>", " ".repeat(100_000)),
        &["CSS_URL"],
    );
    check(
        &format!("<a href=\"#{}\">x</a>", "\u{FDFA}".repeat(1_000)),
        &[],
    );
    let (document, _) = analyze(&"<".repeat(100_000));
    assert!(document.is_some());
    let (document, _) = analyze(&"<a ".repeat(100_000));
    assert!(document.is_some());
    let (document, _) = analyze(&"<!--".repeat(100_000));
    assert!(document.is_some());
    let (document, _) = analyze(&"</".repeat(100_000));
    assert!(document.is_some());
}

#[test]
fn package_images_of_every_format_are_references() {
    check(
        "<img src=\"icons/logo.png\" alt=\"\"><img src=\"icons/photo.jpg\" alt=\"\">\
         <img src=\"icons/photo.webp\" alt=\"\"><img src=\"icons/spinner.gif\" alt=\"\">\
         <video poster=\"icons/photo.jpg\"></video><svg><image href=\"icons/logo.png\"/></svg>\
         <img src=\"icons/logo.svg\" srcset=\"icons/logo.png, icons/photo.webp 2x,icons/photo.jpg 3x\" alt=\"\">\
         <picture><source srcset=\"icons/photo.webp 480w, icons/photo.jpg 960w 540h\" type=\"image/webp\"><img src=\"icons/photo.jpg\" alt=\"\"></picture>",
        &[],
    );
    let (document, _) = analyze(&page(
        "<img src=\"icons/logo.svg\" srcset=\"icons/logo.png 2x\" alt=\"\">",
    ));
    let paths: Vec<_> = document
        .unwrap()
        .references()
        .iter()
        .filter(|reference| reference.kind == ReferenceKind::Asset)
        .map(|reference| reference.path.clone())
        .collect();
    assert_eq!(paths, ["icons/logo.svg", "icons/logo.png"]);
}

#[test]
fn a_missing_image_or_a_file_that_is_no_image_is_refused() {
    check("<img src=\"icons/missing.png\">", &["HTML_MISSING_FILE"]);
    check("<img src=\"fonts/brand.woff2\">", &["HTML_WRONG_FILE_TYPE"]);
    check("<img src=\"app.js\">", &["HTML_WRONG_FILE_TYPE"]);
    check(
        "<img srcset=\"icons/missing.png 2x\">",
        &["HTML_MISSING_FILE"],
    );
    check(
        "<img srcset=\"icons/logo.png 1x, fonts/brand.woff2 2x\">",
        &["HTML_WRONG_FILE_TYPE"],
    );
    check(
        "<svg><image href=\"fonts/brand.woff2\"/></svg>",
        &["HTML_WRONG_FILE_TYPE"],
    );
    check(
        "<video poster=\"notes.txt\"></video>",
        &["HTML_WRONG_FILE_TYPE"],
    );
}

#[test]
fn srcset_is_read_like_a_browser() {
    let urls = |value: &str| {
        parse_srcset(value).map(|candidates| {
            candidates
                .into_iter()
                .map(|candidate| (candidate.url, candidate.descriptors.join(" ")))
                .collect::<Vec<_>>()
        })
    };
    let pair = |url: &str, descriptors: &str| (url.to_owned(), descriptors.to_owned());
    assert_eq!(urls("a.png"), Ok(vec![pair("a.png", "")]));
    assert_eq!(
        urls(" a.png 1x ,b.png 2x,, c.png,"),
        Ok(vec![
            pair("a.png", "1x"),
            pair("b.png", "2x"),
            pair("c.png", "")
        ])
    );
    // A URL is a run without whitespace: the comma inside stays in it.
    assert_eq!(urls("a.png,b.png 2x"), Ok(vec![pair("a.png,b.png", "2x")]));
    assert_eq!(
        urls("a.png,, b.png"),
        Ok(vec![pair("a.png", ""), pair("b.png", "")])
    );
    assert_eq!(urls("a.png 100w 50h"), Ok(vec![pair("a.png", "100w 50h")]));
    assert_eq!(urls("a.png 1.5x"), Ok(vec![pair("a.png", "1.5x")]));
    assert_eq!(urls(""), Ok(vec![]));
    for bad in [
        "a.png 2",
        "a.png 1x 2x",
        "a.png 100w 2x",
        "a.png 50h",
        "a.png 0w",
        "a.png -1x",
        "a.png 1.x",
        "a.png (x) 2x",
        "a.png 2y",
    ] {
        assert!(urls(bad).is_err(), "{bad} should be refused");
    }
    check(
        "<img src=\"icons/logo.svg\" srcset=\"icons/logo.png 2\">",
        &["HTML_SRCSET"],
    );
    check(
        "<img src=\"icons/logo.svg\" srcset=\" , \">",
        &["HTML_SRCSET"],
    );
    check(
        "<video srcset=\"icons/logo.png 2x\"></video>",
        &["HTML_SRCSET"],
    );
}

#[test]
fn render_body_inlines_srcset_urls() {
    let body = render(&page(
        "<picture><source srcset=\"icons/photo.webp 480w,icons/photo.jpg 960w\" sizes=\"50vw\">\
         <img src=\"icons/logo.png\" srcset=\"./icons/logo.png, icons/spinner.gif 2x\" alt=\"\"></picture>",
    ));
    assert!(
        body.contains("srcset=\"data:test;icons/photo.webp 480w, data:test;icons/photo.jpg 960w\""),
        "{body}"
    );
    assert!(
        body.contains("src=\"data:test;icons/logo.png\" srcset=\"data:test;icons/logo.png, data:test;icons/spinner.gif 2x\""),
        "{body}"
    );
}

fn render(text: &str) -> String {
    let (document, diagnostics) = analyze(text);
    assert_eq!(diagnostics, [], "{diagnostics:#?}");
    let document = document.unwrap();
    let inline = |path: &str| format!("data:test;{path}");
    let first = document.render_body(&inline);
    assert_eq!(
        first,
        document.render_body(&inline),
        "render_body must be deterministic"
    );
    first
}

#[test]
fn render_body_inlines_assets_and_drops_loaded_files() {
    let body = render(&page(
        "<main class=\"app\" id=\"m\"><link rel=\"stylesheet\" href=\"theme.css\">\
             <img alt=\"a &amp; b\" src=\"icons/logo.svg\"><p>x &lt; y</p>\
             <svg><image href=\"./icons/logo.svg\"/><image xlink:href=\"icons/logo.svg\"/></svg>\
             <template><img src=\"icons/logo.svg\"></template>\
             <video poster=\"icons/logo.svg\"></video><script src=\"lib/util.js\"></script>\
             <a href=\"#top\">top</a><pre>\n\nkeep</pre><textarea>\n\nkeep</textarea></main>",
    ));
    assert!(!body.contains("<script"), "{body}");
    assert!(!body.contains("<link"), "{body}");
    assert!(!body.contains("<head"), "{body}");
    assert!(!body.contains("=\"icons/logo.svg\""), "{body}");
    assert!(!body.contains("=\"./icons/logo.svg\""), "{body}");
    assert_eq!(
        body.matches("data:test;icons/logo.svg").count(),
        5,
        "{body}"
    );
    assert!(
        body.contains("<img alt=\"a &amp; b\" src=\"data:test;icons/logo.svg\">"),
        "{body}"
    );
    assert!(
        body.contains("<image href=\"data:test;icons/logo.svg\"></image>"),
        "{body}"
    );
    assert!(
        body.contains("<image xlink:href=\"data:test;icons/logo.svg\"></image>"),
        "{body}"
    );
    assert!(
        body.contains("<template><img src=\"data:test;icons/logo.svg\"></template>"),
        "{body}"
    );
    assert!(body.contains("<p>x &lt; y</p>"), "{body}");
    assert!(body.contains("<a href=\"#top\">top</a>"), "{body}");
    assert!(body.contains("<pre>\n\nkeep</pre>"), "{body}");
    assert!(body.contains("<textarea>\n\nkeep</textarea>"), "{body}");
    assert!(
        body.starts_with("\n<main class=\"app\" id=\"m\">"),
        "{body}"
    );
}

#[test]
fn render_body_escapes_inlined_values() {
    let (document, _) = analyze(&page("<img src=\"icons/logo.svg\">"));
    let body = document
        .unwrap()
        .render_body(&|_: &str| "\"><script>alert(1)</script>".to_owned());
    assert!(
        body.contains("src=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\""),
        "{body}"
    );
}

#[test]
fn render_body_output_is_stable_when_parsed_again() {
    let body = render(&page(
        "<p>a<p>b<table><tr><td>1</table><ul><li>x<li>y</ul><b><i>z</b>w</i>",
    ));
    let again = Html::parse_document(&format!("<!DOCTYPE html><body>{body}"));
    let reparsed = again
        .root_element()
        .children()
        .filter_map(ElementRef::wrap)
        .find(|child| child.value().name() == "body")
        .unwrap()
        .inner_html();
    assert_eq!(reparsed, body);
}

#[test]
fn serialization_matches_html5ever() {
    // The serializer follows the same algorithm as html5ever's, so on a
    // document without a leading newline in <pre> both agree byte for
    // byte (noscript aside, which apps may not use).
    let text = page(
        "<main id=\"m\" data-x='a\"b&amp;c&nbsp;<>'>a &amp; b &lt; c &gt; d\u{A0}e \u{A9}\
             <!-- note --><br><img src=\"icons/logo.svg\" alt=\"\"><input disabled>\
             <svg viewBox=\"0 0 1 1\" xmlns:xlink=\"http://www.w3.org/1999/xlink\"><a xlink:href=\"#x\" xml:lang=\"en\">\
             <foreignObject><p>x</p></foreignObject></a><path d=\"M0 0\"/></svg>\
             <math><mi>x</mi></math><template><p>t</p><td>c</td></template>\
             <table><tr><td>1</td></tr></table><pre>x\ny</pre><textarea>a&lt;b</textarea></main>",
    );
    let html = Html::parse_document(&text);
    assert_eq!(
        serialize(html.root_element(), true),
        html.root_element().html()
    );
    assert_eq!(
        serialize(html.root_element(), false),
        html.root_element().inner_html()
    );
}

#[test]
fn urls_are_classified_like_a_browser() {
    assert_eq!(classify_url(""), UrlKind::Empty);
    assert_eq!(classify_url(" \t\n"), UrlKind::Empty);
    assert_eq!(classify_url("#x"), UrlKind::Fragment);
    assert_eq!(classify_url("  #x "), UrlKind::Fragment);
    assert_eq!(classify_url("JAVASCRIPT:x"), UrlKind::Script);
    assert_eq!(classify_url("java\tscript:x"), UrlKind::Script);
    assert_eq!(classify_url("data:,x"), UrlKind::Data);
    assert_eq!(classify_url("mailto:a@b.test"), UrlKind::External);
    assert_eq!(classify_url("//host"), UrlKind::External);
    assert_eq!(classify_url("\\\\host\\x"), UrlKind::External);
    assert_eq!(classify_url("/\\host"), UrlKind::External);
    assert_eq!(classify_url("http://[::1"), UrlKind::External);
    assert_eq!(classify_url("a.svg"), UrlKind::Relative);
    assert_eq!(classify_url("../a.svg"), UrlKind::Relative);
    assert_eq!(
        package_path("", "./a/./b/../c.svg"),
        Ok("a/c.svg".to_owned())
    );
    assert_eq!(package_path("sub/", "../c.svg"), Ok("c.svg".to_owned()));
    assert!(package_path("", "../c.svg").is_err());
}
