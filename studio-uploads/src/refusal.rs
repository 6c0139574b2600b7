//! Why an uploaded file was not converted, in words a user may read: the
//! [`Refusal`] every converter answers with, the accepted types it lists and
//! what a binary file looks like from its first bytes.
//!
//! What it must never do: put a path, a library's error text or file content
//! into a reason.

use std::fmt;

/// The extensions accepted, as the refusal lists them.
pub const SUPPORTED: &str = ".txt .md .csv .html .pdf .docx";
/// Why one file was not converted. [`Refusal::reason`] is the sentence shown
/// to the user: fixed text, never a path, a library's error or file content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The extension is not one of [`SUPPORTED`] (`None`: no extension).
    Unsupported {
        extension: Option<String>,
    },
    Empty,
    /// A text type whose content is not text; `looks_like` names what it is
    /// when the magic bytes tell.
    NotText {
        looks_like: Option<&'static str>,
    },
    /// A text type in UTF-16.
    Utf16,
    /// A `.pdf` that does not start with `%PDF-`.
    NotPdf {
        looks_like: Option<&'static str>,
    },
    PdfEncrypted,
    PdfMalformed,
    PdfNoPages,
    PdfTooManyPages {
        limit: usize,
    },
    PdfTooLarge {
        limit_mib: usize,
    },
    PdfTooComplex,
    PdfNoText,
    /// A `.docx` that does not start with `PK\x03\x04`.
    NotDocx {
        looks_like: Option<&'static str>,
    },
    /// A `.docx` in the OLE container of Word 97–2003 and of password-protected
    /// Office files.
    DocxProtectedOrLegacy,
    DocxMalformed,
    DocxNotWord,
    DocxEncrypted,
    DocxTooLarge {
        limit_mib: usize,
    },
    DocxTooManyParts {
        limit: usize,
    },
    HtmlTooDeep {
        limit: usize,
    },
    CsvMalformed,
    /// A reader failed in a way it should not have (a panic was caught).
    Failed,
    /// The conversion child was stopped by its limits: it ran out of memory,
    /// stack or time (`isolate`).
    Exhausted,
    /// A refusal the conversion child reported, bounded (`isolate`).
    Reported(String),
}

impl Refusal {
    /// The reason shown in `details.files[].reason`.
    pub fn reason(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unsupported { extension: None } => write!(
                f,
                "a file without an extension is not a supported document type; supported: {SUPPORTED}"
            ),
            Refusal::Unsupported {
                extension: Some(extension),
            } => write!(
                f,
                ".{extension} is not a supported document type; supported: {SUPPORTED}"
            ),
            Refusal::Empty => f.write_str("the file is empty"),
            Refusal::NotText {
                looks_like: Some(kind),
            } => write!(
                f,
                "the content is {kind}, not text; the extension does not match the content"
            ),
            Refusal::NotText { looks_like: None } => f.write_str(
                "the content is not UTF-8 text (it contains binary data); the extension does not match the content",
            ),
            Refusal::Utf16 => f.write_str("the text is UTF-16; save it as UTF-8 and upload it again"),
            Refusal::NotPdf {
                looks_like: Some(kind),
            } => write!(f, "the content is {kind}, not a PDF"),
            Refusal::NotPdf { looks_like: None } => {
                f.write_str("the content is not a PDF (it does not start with %PDF-)")
            }
            Refusal::PdfEncrypted => f.write_str("the PDF is encrypted"),
            Refusal::PdfMalformed => f.write_str("the PDF is damaged or not a valid PDF"),
            Refusal::PdfNoPages => f.write_str("the PDF has no pages"),
            Refusal::PdfTooManyPages { limit } => {
                write!(f, "the PDF has more than {limit} pages")
            }
            Refusal::PdfTooLarge { limit_mib } => write!(
                f,
                "the PDF expands to more than {limit_mib} MiB when decompressed"
            ),
            Refusal::PdfTooComplex => f.write_str(
                "the PDF's pages are drawn in a way too complex to read (nested or self-referencing forms)",
            ),
            Refusal::PdfNoText => f.write_str(
                "the PDF has no text to extract (scanned pages and images are not read)",
            ),
            Refusal::NotDocx {
                looks_like: Some(kind),
            } => write!(f, "the content is {kind}, not a DOCX"),
            Refusal::NotDocx { looks_like: None } => {
                f.write_str("the content is not a DOCX (it is not a ZIP archive)")
            }
            Refusal::DocxProtectedOrLegacy => f.write_str(
                "the DOCX is password-protected or in the old binary Word format; save it as an unprotected .docx",
            ),
            Refusal::DocxMalformed => f.write_str("the DOCX is damaged or not a valid ZIP archive"),
            Refusal::DocxNotWord => {
                f.write_str("the archive has no word/document.xml, so it is not a Word document")
            }
            Refusal::DocxEncrypted => f.write_str("the DOCX is encrypted"),
            Refusal::DocxTooLarge { limit_mib } => write!(
                f,
                "the DOCX's text expands to more than {limit_mib} MiB when decompressed"
            ),
            Refusal::DocxTooManyParts { limit } => {
                write!(f, "the DOCX has more than {limit} parts")
            }
            Refusal::HtmlTooDeep { limit } => {
                write!(f, "the HTML is nested more than {limit} elements deep")
            }
            Refusal::CsvMalformed => f.write_str("the CSV could not be read"),
            Refusal::Failed => f.write_str("the document could not be converted"),
            Refusal::Exhausted => f.write_str(
                "converting the document needed more memory or time than a conversion may use",
            ),
            Refusal::Reported(reason) => f.write_str(reason),
        }
    }
}

/// Magic bytes of common binary formats and what to call them in a reason.
pub(crate) const SIGNATURES: &[(&[u8], &str)] = &[
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xFF\xD8\xFF", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x1F\x8B", "a gzip archive"),
    (b"Rar!\x1A\x07", "a RAR archive"),
    (b"7z\xBC\xAF\x27\x1C", "a 7-Zip archive"),
    (
        b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1",
        "an old-format Office file",
    ),
    (b"\0asm", "a WebAssembly module"),
    (b"\xCA\xFE\xBA\xBE", "a Mach-O or Java class file"),
    (b"\xCF\xFA\xED\xFE", "a Mach-O executable"),
];

/// What a binary file is, from its first bytes, for a refusal's reason.
pub fn looks_like(data: &[u8]) -> Option<&'static str> {
    SIGNATURES
        .iter()
        .find(|(magic, _)| data.starts_with(magic))
        .map(|(_, kind)| *kind)
}
