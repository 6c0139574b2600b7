//! Test documents generated in code (no binary fixtures): DOCX with the `zip`
//! crate, PDF with lopdf. Shared by the process and browser tests and,
//! through a `#[path]` module, by studio-core's upload tests.
#![allow(dead_code, unreachable_pub)]

use std::io::{Cursor, Write as _};

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};

/// A zip archive of `entries`, deflated.
pub fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        writer.start_file(*name, options).unwrap();
        writer.write_all(data).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// A DOCX whose `word/document.xml` body is `body` (WordprocessingML).
pub fn docx_with_body(body: &str) -> Vec<u8> {
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
         <w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>{body}<w:sectPr/></w:body></w:document>"
    );
    zip(&[
        ("[Content_Types].xml", b"<?xml version=\"1.0\"?><Types/>"),
        ("word/document.xml", xml.as_bytes()),
    ])
}

/// One paragraph, with a paragraph style (`Heading1`, …) or none.
pub fn paragraph(style: Option<&str>, text: &str) -> String {
    let properties = style
        .map(|style| format!("<w:pPr><w:pStyle w:val=\"{style}\"/></w:pPr>"))
        .unwrap_or_default();
    format!("<w:p>{properties}<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>")
}

/// A DOCX whose first paragraph is a Heading 1 and the rest plain text.
pub fn docx(paragraphs: &[&str]) -> Vec<u8> {
    let body: String = paragraphs
        .iter()
        .enumerate()
        .map(|(index, text)| paragraph((index == 0).then_some("Heading1"), text))
        .collect();
    docx_with_body(&body)
}

/// A one-page PDF showing `lines` in Helvetica; `extra` may add objects and
/// change the page before it is saved.
pub fn pdf_with(
    lines: &[&str],
    extra: impl FnOnce(&mut Document, &mut lopdf::Dictionary, &mut Vec<Operation>),
) -> Vec<u8> {
    let mut document = Document::with_version("1.5");
    let pages_id = document.new_object_id();
    let font_id = document.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let mut resources = dictionary! { "Font" => dictionary! { "F1" => font_id } };
    let mut operations = vec![
        Operation::new("BT", vec![]),
        Operation::new("Tf", vec!["F1".into(), 14.into()]),
        Operation::new("TL", vec![20.into()]),
        Operation::new("Td", vec![72.into(), 720.into()]),
    ];
    for line in lines {
        operations.push(Operation::new("Tj", vec![Object::string_literal(*line)]));
        operations.push(Operation::new("T*", vec![]));
    }
    operations.push(Operation::new("ET", vec![]));
    extra(&mut document, &mut resources, &mut operations);
    let content = Content { operations }.encode().unwrap();
    let content_id = document.add_object(Stream::new(dictionary! {}, content));
    let resources_id = document.add_object(resources);
    let page_id = document.add_object(dictionary! {
        "Type" => "Page",
        "Parent" => pages_id,
        "Contents" => content_id,
        "Resources" => resources_id,
    });
    document.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => vec![page_id.into()],
            "Count" => 1,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog_id = document.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    document.trailer.set("Root", catalog_id);
    document.compress();
    let mut bytes = Vec::new();
    document.save_to(&mut bytes).unwrap();
    bytes
}

/// A PDF showing `lines`.
pub fn text_pdf(lines: &[&str]) -> Vec<u8> {
    pdf_with(lines, |_, _, _| {})
}

/// A PDF with a standard security handler in its trailer.
pub fn encrypted_pdf() -> Vec<u8> {
    pdf_with(&["secret"], |document, _, _| {
        let encrypt = document.add_object(dictionary! {
            "Filter" => "Standard",
            "V" => 1,
            "R" => 2,
            "O" => Object::string_literal(vec![7u8; 32]),
            "U" => Object::string_literal(vec![9u8; 32]),
            "P" => -4,
        });
        document.trailer.set("Encrypt", encrypt);
    })
}
