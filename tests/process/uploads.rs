//! `studio_uploads` end to end over a core store in a temporary folder (and,
//! for two replicas, on the test PostgreSQL), each file converted by the real
//! conversion child (`sasha convert-document`): every fixture is generated
//! here (DOCX with the `zip` crate or by hand, PDF with lopdf, deflate bombs
//! bit by bit), so no binary file is checked in.

use crate::common;
use crate::common::documents;

use documents::{docx_with_body as docx, paragraph, pdf_with, text_pdf, zip};
use std::path::Path;
use std::sync::Barrier;
use std::time::Duration;

use lopdf::content::{Content, Operation};
use lopdf::{Object, Stream, dictionary};
use sasha_proto::ErrorCode;
use studio_store::{Store, UserRole};
use studio_uploads::isolate::{Converter, WALL_LIMIT};
use studio_uploads::{Descriptor, IncomingFile, MAX_FILES, MAX_TOTAL_BYTES, UploadArea};

fn file(name: &str, data: impl Into<Vec<u8>>) -> IncomingFile {
    IncomingFile {
        name: name.to_owned(),
        content_type: "application/octet-stream".to_owned(),
        data: data.into(),
    }
}

fn converter() -> Converter {
    Converter::command(
        env!("CARGO_BIN_EXE_sasha"),
        ["convert-document"],
        WALL_LIMIT,
    )
}

/// Uploads over the run's core store (`common::core_database`) for a
/// temporary state folder, and the id of its one user.
fn area() -> (tempfile::TempDir, UploadArea, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = common::core_database::core_store(dir.path());
    let user = store
        .create_user("ada", UserRole::Member, "correct horse battery")
        .unwrap();
    (dir, UploadArea::new(store.handle(), converter()), user.id)
}

fn converted(descriptors: &[Descriptor]) -> Vec<&str> {
    descriptors.iter().map(|d| d.converted.as_str()).collect()
}

/// The refusals of an `APP_UPLOAD_FAILED` error as `(name, reason)`.
fn refusals(error: &sasha_proto::AppError) -> Vec<(String, String)> {
    assert_eq!(error.code, ErrorCode::UploadFailed, "{error:?}");
    error.details.as_ref().unwrap()["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            (
                entry["name"].as_str().unwrap().to_owned(),
                entry["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

// --- DOCX fixtures -------------------------------------------------------

fn list_item(text: &str) -> String {
    format!(
        "<w:p><w:pPr><w:pStyle w:val=\"ListParagraph\"/><w:numPr><w:ilvl w:val=\"0\"/><w:numId w:val=\"3\"/></w:numPr></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"
    )
}

fn cell(text: &str) -> String {
    format!("<w:tc><w:tcPr/><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:tc>")
}

/// A raw deflate stream that inflates to `size` bytes of `byte`: one fixed
/// Huffman block of a literal and then "copy 258 from distance 1" repeated,
/// 13 bits per 258 bytes, so a 200 MiB bomb is built in a moment.
fn deflate_bomb(byte: u8, size: usize) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        bit: u32,
        acc: u32,
    }
    impl Bits {
        /// `count` bits of `value`, least significant first.
        fn put(&mut self, value: u32, count: u32) {
            for i in 0..count {
                self.acc |= ((value >> i) & 1) << self.bit;
                self.bit += 1;
                if self.bit == 8 {
                    self.out.push(self.acc as u8);
                    self.acc = 0;
                    self.bit = 0;
                }
            }
        }
        /// A Huffman code, most significant bit first.
        fn code(&mut self, code: u32, length: u32) {
            for i in (0..length).rev() {
                self.put((code >> i) & 1, 1);
            }
        }
    }
    let mut bits = Bits {
        out: Vec::new(),
        bit: 0,
        acc: 0,
    };
    bits.put(1, 1); // final block
    bits.put(1, 2); // fixed Huffman codes
    bits.code(0x30 + u32::from(byte), 8); // the literal (byte < 144)
    let mut left = size - 1;
    while left >= 258 {
        bits.code(0xC5, 8); // length symbol 285: 258 bytes
        bits.code(0, 5); // distance symbol 0: distance 1
        left -= 258;
    }
    for _ in 0..left {
        bits.code(0x30 + u32::from(byte), 8);
    }
    bits.code(0, 7); // end of block
    if bits.bit > 0 {
        bits.out.push(bits.acc as u8);
    }
    bits.out
}

/// A ZIP with one deflated entry whose header declares `declared` bytes (and
/// a CRC nobody checks before the size): written by hand, because the zip
/// crate would compress the real bytes.
fn zip_one_entry(name: &str, deflated: &[u8], declared: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let header = |out: &mut Vec<u8>, central: bool| {
        out.extend_from_slice(if central {
            b"PK\x01\x02"
        } else {
            b"PK\x03\x04"
        });
        if central {
            out.extend_from_slice(&20u16.to_le_bytes()); // made by
        }
        out.extend_from_slice(&20u16.to_le_bytes()); // needed
        out.extend_from_slice(&0u16.to_le_bytes()); // flags
        out.extend_from_slice(&8u16.to_le_bytes()); // deflate
        out.extend_from_slice(&0u16.to_le_bytes()); // time
        out.extend_from_slice(&0x21u16.to_le_bytes()); // date
        out.extend_from_slice(&0u32.to_le_bytes()); // crc
        out.extend_from_slice(&(deflated.len() as u32).to_le_bytes());
        out.extend_from_slice(&declared.to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes()); // extra
        if central {
            out.extend_from_slice(&0u16.to_le_bytes()); // comment
            out.extend_from_slice(&0u16.to_le_bytes()); // disk
            out.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
            out.extend_from_slice(&0u32.to_le_bytes()); // external attributes
            out.extend_from_slice(&0u32.to_le_bytes()); // local header offset
        }
        out.extend_from_slice(name.as_bytes());
    };
    header(&mut out, false);
    out.extend_from_slice(deflated);
    let central_start = out.len();
    header(&mut out, true);
    let central_size = out.len() - central_start;
    out.extend_from_slice(b"PK\x05\x06");
    out.extend_from_slice(&[0, 0, 0, 0]); // disks
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&(central_size as u32).to_le_bytes());
    out.extend_from_slice(&(central_start as u32).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

// --- PDF fixtures --------------------------------------------------------

// --- Tests ---------------------------------------------------------------

#[test]
fn every_supported_type_converts() {
    let (_dir, area, user) = area();
    let document = docx(&format!(
        "{}{}{}{}{}<w:tbl><w:tblPr/><w:tr>{}{}</w:tr><w:tr>{}{}</w:tr></w:tbl>{}",
        paragraph(Some("Heading1"), "Project brief"),
        paragraph(None, "Goals &amp; scope"),
        list_item("Ship the upload"),
        list_item("Write the docs"),
        "<w:p><w:r><w:t>line one</w:t><w:br/><w:t>line two</w:t></w:r></w:p>",
        cell("Owner"),
        cell("Due"),
        cell("Ada"),
        cell("Friday"),
        paragraph(Some("Heading3"), "Notes"),
    ));
    let html = "<html><head><title>T</title><style>p{color:red}</style></head><body>\
                <h2>Minutes</h2><script>alert('x')</script><p>Agreed to <b>ship</b>.</p>\
                <ul><li>one</li><li>two</li></ul></body></html>";
    let stored = area
        .store(
            &user,
            vec![
                file("notes.txt", "plain\r\nnotes\n"),
                file("readme.md", "# Title\n\nSome *markdown*.\n"),
                file(
                    "people.csv",
                    "name,comment\nAda,\"likes | pipes\"\nBob,ok\n",
                ),
                file("minutes.html", html),
                file(
                    "report.pdf",
                    text_pdf(&["Quarterly revenue grew", "Second line here"]),
                ),
                file("brief.docx", document),
            ],
        )
        .unwrap();
    assert_eq!(
        converted(&stored),
        [
            "notes.md",
            "readme.md",
            "people.md",
            "minutes.md",
            "report.md",
            "brief.md"
        ]
    );
    assert_eq!(stored[5].original, "brief.docx");
    let read = |name: &str| area.read(&user, name).unwrap().unwrap();

    assert_eq!(read("notes.md"), "plain\nnotes\n");
    assert_eq!(read("readme.md"), "# Title\n\nSome *markdown*.\n");
    assert_eq!(
        read("people.md"),
        "| name | comment |\n| --- | --- |\n| Ada | likes \\| pipes |\n| Bob | ok |\n"
    );

    let minutes = read("minutes.md");
    assert!(minutes.contains("## Minutes"), "{minutes}");
    assert!(minutes.contains("Agreed to **ship**."), "{minutes}");
    assert!(
        minutes.contains("one") && minutes.contains("two"),
        "{minutes}"
    );
    assert!(!minutes.contains("alert"), "{minutes}");
    assert!(!minutes.contains("color"), "{minutes}");

    let report = read("report.md");
    assert!(report.contains("Quarterly revenue grew"), "{report}");
    assert!(report.contains("Second line here"), "{report}");

    assert_eq!(
        read("brief.md"),
        "# Project brief\n\nGoals & scope\n\n- Ship the upload\n- Write the docs\n\n\
         line one  \nline two\n\n| Owner | Due |\n| --- | --- |\n| Ada | Friday |\n\n### Notes\n"
    );
    assert_eq!(
        area.list(&user).unwrap(),
        [
            "brief.md",
            "minutes.md",
            "notes.md",
            "people.md",
            "readme.md",
            "report.md"
        ]
    );
}

#[test]
fn the_file_count_is_limited() {
    let (_dir, area, user) = area();
    let files = (0..=MAX_FILES)
        .map(|i| file(&format!("f{i}.txt"), "x"))
        .collect();
    let error = area.store(&user, files).unwrap_err();
    assert_eq!(error.code, ErrorCode::ResourceLimit);
    assert_eq!(error.message, "upload at most 10 files at a time");
    assert!(area.list(&user).unwrap().is_empty());

    let error = area.store(&user, Vec::new()).unwrap_err();
    assert_eq!(error.code, ErrorCode::InputInvalid);
}

#[test]
fn the_total_size_is_limited() {
    let (_dir, area, user) = area();
    let half = vec![b'a'; 13 * 1024 * 1024];
    let error = area
        .store(
            &user,
            vec![file("a.txt", half.clone()), file("b.txt", half)],
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::ResourceLimit);
    assert_eq!(error.message, "upload at most 25 MiB in total");
    // Exactly the limit is allowed.
    let exact = vec![b'b'; MAX_TOTAL_BYTES];
    let stored = area.store(&user, vec![file("big.txt", exact)]).unwrap();
    assert_eq!(converted(&stored), ["big.md"]);
    let big = area.read(&user, "big.md").unwrap().unwrap();
    assert!(big.len() <= studio_uploads::MAX_MARKDOWN_BYTES);
    assert!(
        big.ends_with("the rest was left out.]_\n"),
        "{}",
        &big[big.len() - 120..]
    );
}

#[test]
fn renamed_binaries_are_refused_and_nothing_is_stored() {
    let (_dir, area, user) = area();
    area.store(&user, vec![file("before.txt", "kept")]).unwrap();
    let mut elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
    elf.extend_from_slice(&[0u8; 64]);
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let error = area
        .store(
            &user,
            vec![
                file("fine.txt", "fine"),
                file("notes.txt", elf),
                file("../../pic.md", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec()),
                file("x.pdf", random.clone()),
                file("y.docx", random),
                file("tool.exe", "MZ"),
                file("README", "no extension"),
                file("empty.csv", ""),
            ],
        )
        .unwrap_err();
    assert_eq!(error.message, "7 of 8 files could not be converted");
    let refused = refusals(&error);
    let expect = |name: &str, reason: &str| {
        let found = refused
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name}: {refused:?}"));
        assert!(found.1.contains(reason), "{name}: {}", found.1);
    };
    expect("notes.txt", "the content is an ELF executable, not text");
    expect("pic.md", "the content is a PNG image, not text");
    expect("x.pdf", "not a PDF (it does not start with %PDF-)");
    expect("y.docx", "not a DOCX (it is not a ZIP archive)");
    expect(
        "tool.exe",
        ".exe is not a supported document type; supported: .txt .md .csv .html .pdf .docx",
    );
    expect(
        "README",
        "a file without an extension is not a supported document type",
    );
    expect("empty.csv", "the file is empty");
    assert!(!refused.iter().any(|(name, _)| name == "fine.txt"));
    assert_eq!(area.list(&user).unwrap(), ["before.md"]);
}

#[test]
fn an_encrypted_pdf_is_refused() {
    let (_dir, area, user) = area();
    let encrypted = documents::encrypted_pdf();
    let error = area
        .store(&user, vec![file("locked.pdf", encrypted)])
        .unwrap_err();
    assert_eq!(error.message, "1 of 1 file could not be converted");
    assert_eq!(
        refusals(&error),
        [("locked.pdf".to_owned(), "the PDF is encrypted".to_owned())]
    );
    assert!(area.list(&user).unwrap().is_empty());
}

/// A one-page PDF whose page resources hold `depth` nested arrays, written
/// byte by byte (a lopdf object that deep would overflow this test's own
/// stack when dropped).
fn deeply_nested_pdf(depth: usize) -> Vec<u8> {
    let content = b"BT /F1 12 Tf 20 20 Td (Deep) Tj ET";
    let mut nested = vec![b'['; depth];
    nested.extend(std::iter::repeat_n(b']', depth));
    let mut stream = format!("<< /Length {} >>\nstream\n", content.len()).into_bytes();
    stream.extend_from_slice(content);
    stream.extend_from_slice(b"\nendstream");
    let objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 50] /Contents 5 0 R /Resources << /Font << /F1 6 0 R >> /Deep 4 0 R >> >>".to_vec(),
        nested,
        stream,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend(format!("{} 0 obj\n", index + 1).into_bytes());
        pdf.extend_from_slice(object);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).into_bytes());
    for offset in offsets {
        pdf.extend(format!("{offset:010} 00000 n \n").into_bytes());
    }
    pdf.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .into_bytes(),
    );
    pdf
}

/// A million nested arrays in a page's resources: converted or refused by
/// the child, and this process (the parent) goes on to the next upload.
#[test]
fn deeply_nested_objects_cost_at_most_the_conversion_child() {
    let (_dir, area, user) = area();
    match area.store(&user, vec![file("deep.pdf", deeply_nested_pdf(1_000_000))]) {
        Ok(stored) => assert_eq!(converted(&stored), ["deep.md"]),
        Err(error) => assert_eq!(error.code, ErrorCode::UploadFailed, "{error:?}"),
    }
    let next = area
        .store(&user, vec![file("next.txt", "still here")])
        .unwrap();
    assert_eq!(converted(&next), ["next.md"]);
}

#[test]
fn damaged_and_hostile_pdfs_are_refused() {
    let (_dir, area, user) = area();
    let good = text_pdf(&["hello"]);
    let truncated = good[..good.len() / 3].to_vec();
    // A content stream that inflates to 300 MiB.
    let bomb = pdf_with(&["bomb"], |document, resources, operations| {
        let mut zlib = vec![0x78, 0x01];
        zlib.extend_from_slice(&deflate_bomb(b' ', 300 * 1024 * 1024));
        zlib.extend_from_slice(&[0, 0, 0, 0]);
        let stream =
            Stream::new(dictionary! { "Filter" => "FlateDecode" }, zlib).with_compression(false);
        let form = document.add_object(stream);
        resources.set("XObject", dictionary! { "Big" => form });
        operations.push(Operation::new("Do", vec!["Big".into()]));
    });
    // A form that draws itself.
    let recursive = pdf_with(&["loop"], |document, resources, operations| {
        let form_id = document.new_object_id();
        let content = Content {
            operations: vec![Operation::new("Do", vec!["Me".into()])],
        }
        .encode()
        .unwrap();
        let form = Stream::new(
            dictionary! {
                "Type" => "XObject",
                "Subtype" => "Form",
                "BBox" => vec![0.into(), 0.into(), 10.into(), 10.into()],
                "Resources" => dictionary! { "XObject" => dictionary! { "Me" => form_id } },
            },
            content,
        );
        document.objects.insert(form_id, Object::Stream(form));
        resources.set("XObject", dictionary! { "Me" => form_id });
        operations.push(Operation::new("Do", vec!["Me".into()]));
    });
    let no_text = pdf_with(&[], |_, _, _| {});
    let error = area
        .store(
            &user,
            vec![
                file("truncated.pdf", truncated),
                file("bomb.pdf", bomb),
                file("recursive.pdf", recursive),
                file("blank.pdf", no_text),
                file("text.pdf", b"%PDF-1.7\nnot really a pdf".to_vec()),
            ],
        )
        .unwrap_err();
    let refused = refusals(&error);
    assert_eq!(refused.len(), 5, "{refused:?}");
    let reason = |name: &str| refused.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert_eq!(
        reason("truncated.pdf"),
        "the PDF is damaged or not a valid PDF"
    );
    assert!(
        reason("bomb.pdf").contains("expands to more than 256 MiB"),
        "{}",
        reason("bomb.pdf")
    );
    assert!(
        reason("recursive.pdf").contains("self-referencing forms"),
        "{}",
        reason("recursive.pdf")
    );
    assert!(
        reason("blank.pdf").contains("no text to extract"),
        "{}",
        reason("blank.pdf")
    );
    assert_eq!(reason("text.pdf"), "the PDF is damaged or not a valid PDF");
    assert!(area.list(&user).unwrap().is_empty());
}

/// ASCII85 of `data` (the PDF filter's encoding, with its `~>` end).
fn ascii85(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * 5 / 4 + 8);
    for chunk in data.chunks(4) {
        let mut group = [0u8; 4];
        group[..chunk.len()].copy_from_slice(chunk);
        let mut value = u32::from_be_bytes(group);
        if chunk.len() == 4 && value == 0 {
            out.push(b'z');
            continue;
        }
        let mut digits = [0u8; 5];
        for digit in digits.iter_mut().rev() {
            *digit = (value % 85) as u8 + b'!';
            value /= 85;
        }
        out.extend_from_slice(&digits[..chunk.len() + 1]);
    }
    out.extend_from_slice(b"~>");
    out
}

#[test]
fn a_bomb_behind_another_filter_is_caught_while_loading() {
    // The raw scan cannot see through ASCII85; the load filter decodes the
    // chain as lopdf would and stops at the budget.
    let (_dir, area, user) = area();
    let hidden = pdf_with(&["hidden"], |document, resources, operations| {
        let mut zlib = vec![0x78, 0x01];
        zlib.extend_from_slice(&deflate_bomb(b'q', 300 * 1024 * 1024));
        zlib.extend_from_slice(&[0, 0, 0, 0]);
        let stream = Stream::new(
            dictionary! {
                "Type" => "XObject",
                "Subtype" => "Form",
                "Filter" => vec![Object::Name(b"ASCII85Decode".to_vec()), Object::Name(b"FlateDecode".to_vec())],
            },
            ascii85(&zlib),
        )
        .with_compression(false);
        let form = document.add_object(stream);
        resources.set("XObject", dictionary! { "Big" => form });
        operations.push(Operation::new("Do", vec!["Big".into()]));
    });
    let error = area
        .store(&user, vec![file("hidden.pdf", hidden)])
        .unwrap_err();
    assert_eq!(
        refusals(&error)[0].1,
        "the PDF expands to more than 256 MiB when decompressed"
    );
}

#[test]
fn pdf_images_are_skipped_not_read() {
    let (_dir, area, user) = area();
    let with_image = pdf_with(&["caption text"], |document, resources, operations| {
        let image = document.add_object(Stream::new(
            dictionary! {
                "Type" => "XObject",
                "Subtype" => "Image",
                "Width" => 2,
                "Height" => 2,
                "ColorSpace" => "DeviceGray",
                "BitsPerComponent" => 8,
            },
            vec![0, 255, 255, 0],
        ));
        resources.set("XObject", dictionary! { "Im1" => image });
        operations.push(Operation::new("Do", vec!["Im1".into()]));
    });
    let stored = area
        .store(&user, vec![file("figure.pdf", with_image)])
        .unwrap();
    let text = area.read(&user, &stored[0].converted).unwrap().unwrap();
    assert!(text.contains("caption text"), "{text}");
}

#[test]
fn malformed_docx_files_are_refused() {
    let (_dir, area, user) = area();
    let not_word = zip(&[("xl/workbook.xml", b"<workbook/>")]);
    let mut broken = b"PK\x03\x04".to_vec();
    broken.extend_from_slice(&[0x55; 300]);
    let bad_xml = zip(&[(
        "word/document.xml",
        b"<w:document><w:body></w:p></w:document>",
    )]);
    let legacy = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1rest of an OLE file".to_vec();
    let error = area
        .store(
            &user,
            vec![
                file("sheet.docx", not_word),
                file("broken.docx", broken),
                file("bad.docx", bad_xml),
                file("old.docx", legacy),
            ],
        )
        .unwrap_err();
    let refused = refusals(&error);
    assert_eq!(
        refused,
        [
            ("sheet.docx".to_owned(), "the archive has no word/document.xml, so it is not a Word document".to_owned()),
            ("broken.docx".to_owned(), "the DOCX is damaged or not a valid ZIP archive".to_owned()),
            ("bad.docx".to_owned(), "the DOCX is damaged or not a valid ZIP archive".to_owned()),
            (
                "old.docx".to_owned(),
                "the DOCX is password-protected or in the old binary Word format; save it as an unprotected .docx".to_owned()
            ),
        ]
    );
}

#[test]
fn docx_zip_bombs_are_refused_quickly() {
    let (_dir, area, user) = area();
    let size = 200 * 1024 * 1024;
    let bomb = deflate_bomb(b' ', size);
    assert!(bomb.len() < 2 * 1024 * 1024);
    // Declared honestly: refused from the header, nothing inflated. (How
    // fast is the benchmarks' business, not a test's.)
    let declared = zip_one_entry("word/document.xml", &bomb, size as u32);
    let error = area
        .store(&user, vec![file("bomb.docx", declared)])
        .unwrap_err();
    assert_eq!(
        refusals(&error)[0].1,
        "the DOCX's text expands to more than 50 MiB when decompressed"
    );
    // Declared small: the limited reader stops it.
    let lying = zip_one_entry("word/document.xml", &bomb, 1000);
    let error = area
        .store(&user, vec![file("liar.docx", lying)])
        .unwrap_err();
    let reason = &refusals(&error)[0].1;
    assert!(
        reason.contains("expands to more than 50 MiB") || reason.contains("damaged"),
        "{reason}"
    );
    assert!(area.list(&user).unwrap().is_empty());
}

#[test]
fn names_are_safe_and_unique() {
    let (_dir, area, user) = area();
    let long = format!("{}.txt", "n".repeat(300));
    let stored = area
        .store(
            &user,
            vec![
                file("../../etc/passwd.txt", "a"),
                file(".hidden.md", "b"),
                file("a/b\\c.csv", "x,y\n1,2\n"),
                file(&long, "c"),
                file("Überblick März.md", "d"),
                file("報告.txt", "e"),
                file("brief.txt", "first"),
                file("brief.md", "second"),
            ],
        )
        .unwrap();
    let long_md = format!("{}.md", "n".repeat(100));
    assert_eq!(
        converted(&stored),
        [
            "passwd.md",
            "hidden.md",
            "c.md",
            long_md.as_str(),
            "Überblick-März.md",
            "報告.md",
            "brief.md",
            "brief-2.md"
        ]
    );
    assert_eq!(stored[0].original, "passwd.txt");
    assert_eq!(stored[2].original, "c.csv");
    assert_eq!(stored[3].original.chars().count(), 255);
    assert!(
        stored[3].original.ends_with("n\u{2026}.txt"),
        "{}",
        stored[3].original
    );
    // Later batches never overwrite.
    let again = area
        .store(
            &user,
            vec![file("brief.docx.txt", "x"), file("brief.txt", "third")],
        )
        .unwrap();
    assert_eq!(converted(&again), ["brief.docx.md", "brief-3.md"]);
    assert_eq!(area.read(&user, "brief.md").unwrap().unwrap(), "first");
    assert_eq!(area.read(&user, "brief-2.md").unwrap().unwrap(), "second");
    assert_eq!(area.read(&user, "brief-3.md").unwrap().unwrap(), "third");
    // Another user's area is separate.
    assert!(area.list("someone-else").unwrap().is_empty());
    assert_eq!(area.read("someone-else", "brief.md").unwrap(), None);
}

#[test]
fn an_upload_for_a_user_who_is_gone_stores_nothing() {
    let (_dir, area, user) = area();
    let gone = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    let error = area.store(gone, vec![file("a.txt", "a")]).unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);
    assert!(area.list(gone).unwrap().is_empty());
    assert!(area.list(&user).unwrap().is_empty());
}

#[test]
fn read_refuses_names_the_rule_would_not_produce() {
    let (_dir, area, user) = area();
    area.store(&user, vec![file("brief.txt", "hello")]).unwrap();
    for bad in [
        "../brief.md",
        "../../etc/passwd",
        "/etc/passwd.md",
        ".hidden.md",
        "a/b.md",
        "brief.txt",
        "",
    ] {
        let error = area.read(&user, bad).unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid, "{bad}");
    }
    assert_eq!(area.read(&user, "missing.md").unwrap(), None);
    assert_eq!(area.read(&user, "brief.md").unwrap().unwrap(), "hello");
    // Invalid user ids are an internal error.
    assert_eq!(area.list("../x").unwrap_err().code, ErrorCode::Internal);
    assert_eq!(
        area.read("a/b", "brief.md").unwrap_err().code,
        ErrorCode::Internal
    );
}

/// Two studio-core replicas on one PostgreSQL database, each with its own
/// store and uploads, as `CoreService.Upload` and chat use them: what one
/// stores the other reads, and two uploads of one name at the same instant,
/// one through each, take two names.
#[test]
fn an_upload_through_one_replica_is_read_through_another() {
    let url = sasha_testkit::postgres_database();
    let open = || {
        Store::connect(
            &url,
            2,
            None,
            std::sync::Arc::new(studio_store::system_clock),
        )
        .unwrap()
    };
    let (one, two) = (open(), open());
    let user = one
        .create_user("ada", UserRole::Member, "correct horse battery")
        .unwrap()
        .id;
    let replicas = [
        UploadArea::new(one, converter()),
        UploadArea::new(two, converter()),
    ];
    let stored = replicas[0]
        .store(&user, vec![file("notes.csv", "a,b\n1,2\n")])
        .unwrap();
    assert_eq!(converted(&stored), ["notes.md"]);
    assert_eq!(
        replicas[1].read(&user, "notes.md").unwrap().unwrap(),
        "| a | b |\n| --- | --- |\n| 1 | 2 |\n"
    );

    let barrier = Barrier::new(2);
    let names: Vec<String> = std::thread::scope(|scope| {
        let racers: Vec<_> = replicas
            .iter()
            .enumerate()
            .map(|(n, replica)| {
                let (barrier, user) = (&barrier, &user);
                scope.spawn(move || {
                    barrier.wait();
                    let text = format!("from replica {n}");
                    let stored = replica.store(user, vec![file("brief.txt", text)]).unwrap();
                    stored[0].converted.clone()
                })
            })
            .collect();
        racers
            .into_iter()
            .map(|racer| racer.join().unwrap())
            .collect()
    });
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, ["brief-2.md", "brief.md"]);
    for (n, name) in names.iter().enumerate() {
        for replica in &replicas {
            assert_eq!(
                replica.read(&user, name).unwrap().unwrap(),
                format!("from replica {n}")
            );
        }
    }
    assert_eq!(
        replicas[1].list(&user).unwrap(),
        ["brief-2.md", "brief.md", "notes.md"]
    );
}

/// The real conversion child confines itself before it reads a byte of the
/// file: its limits and its syscall filter, read from `/proc` while it waits
/// for its input (an empty input is a file with no name and no bytes).
#[tokio::test]
async fn the_conversion_child_is_confined_before_it_reads_the_file() {
    use studio_uploads::isolate::{CPU_SECONDS, MEMORY_BYTES, OPEN_FILES};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sasha"))
        .arg("convert-document")
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let proc = Path::new("/proc").join(child.id().to_string());
    let read_status = || std::fs::read_to_string(proc.join("status")).unwrap();
    // The child is another process: its confinement is polled for.
    crate::common::eventually(
        Duration::from_secs(10),
        "the child's seccomp filter",
        || async { read_status().lines().any(|line| line == "Seccomp:\t2") },
    )
    .await;
    let status = read_status();
    assert!(
        status.lines().any(|line| line == "NoNewPrivs:\t1"),
        "{status}"
    );
    let limits = std::fs::read_to_string(proc.join("limits")).unwrap();
    let limit = |name: &str| -> Vec<String> {
        let line = limits
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {limits}"));
        line[name.len()..]
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        limit("Max address space"),
        [
            MEMORY_BYTES.to_string(),
            MEMORY_BYTES.to_string(),
            "bytes".to_owned()
        ]
    );
    assert_eq!(
        limit("Max cpu time"),
        [
            CPU_SECONDS.to_string(),
            (CPU_SECONDS + 1).to_string(),
            "seconds".to_owned()
        ]
    );
    assert_eq!(limit("Max file size"), ["0", "0", "bytes"]);
    assert_eq!(limit("Max core file size"), ["0", "0", "bytes"]);
    assert_eq!(
        limit("Max open files"),
        [
            OPEN_FILES.to_string(),
            OPEN_FILES.to_string(),
            "files".to_owned()
        ]
    );
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("a file without an extension"),
        "{output:?}"
    );
}
