//! PDF text to Markdown: lopdf reads the file, pdf-extract lays out the text.
//!
//! pdf-extract is the maintained text extractor of the Rust ecosystem, but it
//! trusts its input: it unwraps, recurses into form XObjects without a cycle
//! check and decodes every stream it meets without a size limit. So the
//! document is checked *before* it gets there, and the extraction itself runs
//! under `catch_unwind`:
//!
//! 1. `%PDF-` at the start; any `/Encrypt` name in the file (a trailer entry
//!    is always plain text) refuses it as encrypted, before lopdf would try to
//!    decrypt it with the empty password. After loading, lopdf's own verdict
//!    (`was_encrypted`, `is_encrypted`) is checked again.
//! 2. A raw scan for the cross-reference streams lopdf decodes while it reads
//!    the trailer, before any object is seen: every `stream` keyword's data is
//!    inflated (zlib, raw deflate, LZW) within [`MAX_DECODED_BYTES`], and
//!    predictor geometry (`/Columns`, `/Colors`, `/BitsPerComponent`) that
//!    would make lopdf allocate huge rows is refused.
//! 3. While loading, a filter sees every stream object before object streams
//!    are expanded and decodes its filter chain exactly as lopdf would
//!    (Flate with lopdf's raw-deflate fallback, LZW, ASCII85), all streams
//!    together within [`MAX_DECODED_BYTES`].
//! 4. At most [`MAX_PAGES`] pages; every page's parent chain is short and
//!    acyclic; image XObjects are emptied (never read for text); the form
//!    XObjects each page draws are walked: no cycle, at most
//!    [`MAX_FORM_DEPTH`] deep, and the content bytes the extractor will
//!    interpret, repeats included, at most [`MAX_WORK_BYTES`].
//!
//! Known gap: a cross-reference stream whose filter chain starts with
//! ASCII85 before a bomb is not caught by step 2 (such files are not produced
//! by real writers; the upload size limit still bounds the input).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;
use std::panic::{AssertUnwindSafe, catch_unwind};

use lopdf::content::Content;
use lopdf::{Dictionary, Document, LoadOptions, Object, ObjectId, Stream};

use crate::refusal::{Refusal, looks_like};

/// Most pages of a PDF.
pub const MAX_PAGES: usize = 2_000;
/// Most bytes all streams of a PDF may decode to, counted once each (and
/// separately for the raw scan of step 2).
pub const MAX_DECODED_BYTES: u64 = 256 * 1024 * 1024;
/// Most content bytes the extractor may interpret, a form drawn twice counted
/// twice.
pub const MAX_WORK_BYTES: u64 = 512 * 1024 * 1024;
/// Deepest nesting of form XObjects.
pub const MAX_FORM_DEPTH: usize = 16;
/// What one page or form invocation costs in the work count beyond its bytes,
/// so that empty forms drawn millions of times still add up.
const WORK_PER_INVOCATION: u64 = 4096;
/// Longest parent chain of a page (the page tree's depth).
const MAX_PARENT_CHAIN: usize = 64;
/// Largest predictor geometry values lopdf would allocate rows from.
const MAX_COLUMNS: i64 = 100_000;
const MAX_COLORS: i64 = 64;
const MAX_BITS_PER_COMPONENT: i64 = 32;
/// Most input bytes the raw scan may feed its decoders, as a multiple of the
/// file size: streams do not overlap, so a real file stays near 1.
const MAX_SCAN_INPUT_FACTOR: usize = 4;

pub(super) fn convert(data: &[u8]) -> Result<String, Refusal> {
    if !data.starts_with(b"%PDF-") {
        return Err(Refusal::NotPdf {
            looks_like: looks_like(data),
        });
    }
    if has_name(data, b"/Encrypt") {
        return Err(Refusal::PdfEncrypted);
    }
    scan_raw(data)?;
    let (mut document, sizes) = load(data)?;
    if document.was_encrypted() || document.is_encrypted() || document.trailer.has(b"Encrypt") {
        return Err(Refusal::PdfEncrypted);
    }
    let pages = document.get_pages();
    if pages.is_empty() {
        return Err(Refusal::PdfNoPages);
    }
    if pages.len() > MAX_PAGES {
        return Err(Refusal::PdfTooManyPages { limit: MAX_PAGES });
    }
    empty_images(&mut document);
    Work::new(&document, &sizes).check_pages(&pages)?;
    let text = extract(&document)?;
    let markdown = tidy(&text);
    if markdown.trim().is_empty() {
        return Err(Refusal::PdfNoText);
    }
    Ok(markdown)
}

fn too_large() -> Refusal {
    Refusal::PdfTooLarge {
        limit_mib: (MAX_DECODED_BYTES / (1024 * 1024)) as usize,
    }
}

/// Whether the PDF name `name` (e.g. `/Encrypt`) occurs as a whole name.
fn has_name(data: &[u8], name: &[u8]) -> bool {
    positions(data, name).any(|at| {
        data.get(at + name.len())
            .is_none_or(|next| !is_regular(*next))
    })
}

/// A byte that continues a PDF name or keyword (not white space or a delimiter).
fn is_regular(byte: u8) -> bool {
    !byte.is_ascii_whitespace()
        && byte != 0
        && !matches!(
            byte,
            b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%'
        )
}

/// Every position where `needle` starts in `data`.
fn positions<'a>(data: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    let mut from = 0;
    std::iter::from_fn(move || {
        let found = data
            .get(from..)?
            .windows(needle.len())
            .position(|window| window == needle)?;
        let at = from + found;
        from = at + 1;
        Some(at)
    })
}

/// Step 2: predictor geometry, and every stream's data decoded the ways lopdf
/// could decode it, within one budget.
fn scan_raw(data: &[u8]) -> Result<(), Refusal> {
    for (key, limit) in [
        (&b"/Columns"[..], MAX_COLUMNS),
        (b"/Colors", MAX_COLORS),
        (b"/BitsPerComponent", MAX_BITS_PER_COMPONENT),
    ] {
        for at in positions(data, key) {
            if let Some(value) = integer_after(&data[at + key.len()..])
                && value > limit
            {
                return Err(too_large());
            }
        }
    }
    let mut budget = MAX_DECODED_BYTES;
    let mut input_left = data.len().saturating_mul(MAX_SCAN_INPUT_FACTOR) + (1 << 20);
    for at in positions(data, b"stream") {
        if at > 0 && is_regular(data[at - 1]) {
            continue; // `endstream`
        }
        let rest = &data[at + b"stream".len()..];
        let start = if rest.starts_with(b"\r\n") {
            2
        } else if rest.starts_with(b"\n") || rest.starts_with(b"\r") {
            1
        } else {
            continue;
        };
        let body = &rest[start..];
        let inflated = inflate(body, &mut budget, &mut input_left)?;
        if inflated.len() > 2 {
            // A second Flate layer (Flate of Flate) would be decoded next.
            inflate(&inflated, &mut budget, &mut input_left)?;
        }
        lzw(body, true, &mut budget, &mut input_left)?;
    }
    Ok(())
}

/// The integer after a name, skipping white space, if there is one.
fn integer_after(rest: &[u8]) -> Option<i64> {
    let start = rest.iter().position(|byte| !byte.is_ascii_whitespace())?;
    let digits: Vec<u8> = rest[start..]
        .iter()
        .take(20)
        .take_while(|byte| byte.is_ascii_digit())
        .copied()
        .collect();
    if digits.is_empty() {
        return None;
    }
    Some(
        std::str::from_utf8(&digits)
            .ok()?
            .parse::<i64>()
            .unwrap_or(i64::MAX),
    )
}

/// Inflates `input` as lopdf does (zlib; raw deflate after the two header
/// bytes when zlib yields nothing), within `budget` output bytes.
fn inflate(input: &[u8], budget: &mut u64, input_left: &mut usize) -> Result<Vec<u8>, Refusal> {
    let mut out = Vec::new();
    let mut zlib = flate2::bufread::ZlibDecoder::new(input);
    let failed = (&mut zlib).take(*budget + 1).read_to_end(&mut out).is_err();
    spend_input(input_left, zlib.total_in())?;
    if failed && out.is_empty() && input.len() > 2 {
        let mut raw = flate2::bufread::DeflateDecoder::new(&input[2..]);
        let _ = (&mut raw).take(*budget + 1).read_to_end(&mut out);
        spend_input(input_left, raw.total_in())?;
    }
    spend(budget, out.len())?;
    Ok(out)
}

/// Decodes `input` as LZW (lopdf's settings) within `budget` output bytes.
fn lzw(
    input: &[u8],
    early_change: bool,
    budget: &mut u64,
    input_left: &mut usize,
) -> Result<Vec<u8>, Refusal> {
    use weezl::{BitOrder, LzwStatus, decode::Decoder};
    let mut decoder = if early_change {
        Decoder::with_tiff_size_switch(BitOrder::Msb, 8)
    } else {
        Decoder::new(BitOrder::Msb, 8)
    };
    let mut out = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut rest = input;
    loop {
        let result = decoder.decode_bytes(rest, &mut buffer);
        rest = &rest[result.consumed_in..];
        spend_input(input_left, result.consumed_in as u64)?;
        out.extend_from_slice(&buffer[..result.consumed_out]);
        if out.len() as u64 > *budget {
            return Err(too_large());
        }
        match result.status {
            Ok(LzwStatus::Ok) if result.consumed_in + result.consumed_out > 0 => {}
            _ => break,
        }
    }
    spend(budget, out.len())?;
    Ok(out)
}

fn spend(budget: &mut u64, bytes: usize) -> Result<(), Refusal> {
    *budget = budget.checked_sub(bytes as u64).ok_or_else(too_large)?;
    Ok(())
}

fn spend_input(input_left: &mut usize, bytes: u64) -> Result<(), Refusal> {
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    *input_left = input_left
        .checked_sub(bytes)
        .ok_or(Refusal::PdfTooComplex)?;
    Ok(())
}

/// What the load filter of step 3 learns. The filter is a plain `fn` (lopdf's
/// `FilterFunc`), so it reports through this thread-local; lopdf runs it on
/// the calling thread (its `rayon` feature is off).
#[derive(Debug)]
struct LoadCheck {
    budget: u64,
    input_left: usize,
    refusal: Option<Refusal>,
    /// Every stream object checked: its raw length then, and its decoded
    /// size (for the work count of step 4).
    sizes: HashMap<ObjectId, (usize, u64)>,
}

thread_local! {
    static LOAD_CHECK: RefCell<Option<LoadCheck>> = const { RefCell::new(None) };
}

/// Loads the document with the step-3 filter; the decoded size of every
/// stream comes back beside it.
fn load(data: &[u8]) -> Result<(Document, HashMap<ObjectId, u64>), Refusal> {
    LOAD_CHECK.with(|check| {
        *check.borrow_mut() = Some(LoadCheck {
            budget: MAX_DECODED_BYTES,
            input_left: data.len().saturating_mul(MAX_SCAN_INPUT_FACTOR) + (1 << 20),
            refusal: None,
            sizes: HashMap::new(),
        })
    });
    let options = LoadOptions {
        filter: Some(check_object),
        ..LoadOptions::default()
    };
    let loaded = catch_unwind(|| Document::load_mem_with_options(data, options));
    let check = LOAD_CHECK.with(|check| check.borrow_mut().take());
    let mut check = check.ok_or(Refusal::Failed)?;
    if let Some(refusal) = check.refusal {
        return Err(refusal);
    }
    let Ok(Ok(document)) = loaded else {
        return Err(Refusal::PdfMalformed);
    };
    // Streams whose length lopdf resolved only after the filter saw them (an
    // indirect `/Length`), or that reached the document another way, are
    // checked now, within what is left of the same budget.
    let mut sizes = HashMap::with_capacity(check.sizes.len());
    for (id, object) in &document.objects {
        let Object::Stream(stream) = object else {
            continue;
        };
        let size = match check.sizes.get(id) {
            Some((raw, size)) if *raw == stream.content.len() => *size,
            _ => decoded_size(stream, &mut check.budget, &mut check.input_left)?,
        };
        sizes.insert(*id, size);
    }
    Ok((document, sizes))
}

/// lopdf's load filter: checks a stream's decoded size and drops the object
/// after a refusal. Its return value is used only for objects inside object
/// streams (never streams); for top-level objects lopdf keeps its own copy
/// and only looks at `None`.
fn check_object(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    let Object::Stream(stream) = object else {
        return Some((id, object.clone()));
    };
    let keep = LOAD_CHECK.with(|check| {
        let mut check = check.borrow_mut();
        let Some(check) = check.as_mut() else {
            return true;
        };
        if check.refusal.is_some() {
            return false;
        }
        match decoded_size(stream, &mut check.budget, &mut check.input_left) {
            Ok(size) => {
                check.sizes.insert(id, (stream.content.len(), size));
                true
            }
            Err(refusal) => {
                check.refusal = Some(refusal);
                false
            }
        }
    });
    keep.then_some((id, Object::Null))
}

/// The size of `stream` decoded through its filter chain as lopdf decodes it
/// (it stops at the first filter it does not implement).
fn decoded_size(stream: &Stream, budget: &mut u64, input_left: &mut usize) -> Result<u64, Refusal> {
    let Ok(filters) = stream.filters() else {
        return Ok(stream.content.len() as u64);
    };
    let params = stream
        .dict
        .get(b"DecodeParms")
        .and_then(Object::as_dict)
        .ok();
    let number =
        |key: &[u8]| params.and_then(|params| params.get(key).and_then(Object::as_i64).ok());
    if number(b"Columns").unwrap_or(1) > MAX_COLUMNS
        || number(b"Colors").unwrap_or(1) > MAX_COLORS
        || number(b"BitsPerComponent").unwrap_or(8) > MAX_BITS_PER_COMPONENT
    {
        return Err(too_large());
    }
    let predictor = number(b"Predictor").unwrap_or(1);
    let early_change = number(b"EarlyChange").is_none_or(|value| value != 0);
    let mut data: Cow<'_, [u8]> = Cow::Borrowed(&stream.content);
    for (index, filter) in filters.iter().enumerate() {
        let last = index + 1 == filters.len();
        let output = match *filter {
            b"FlateDecode" => inflate(&data, budget, input_left)?,
            b"LZWDecode" => lzw(&data, early_change, budget, input_left)?,
            b"ASCII85Decode" => {
                // At most four bytes out per byte in (`z`).
                spend(budget, data.len().saturating_mul(4))?;
                let mut dict = Dictionary::new();
                dict.set("Filter", Object::Name(b"ASCII85Decode".to_vec()));
                Stream::new(dict, data.to_vec())
                    .decompressed_content()
                    .unwrap_or_default()
            }
            _ => break,
        };
        // lopdf applies the same predictor after every Flate or LZW stage;
        // the next stage would then see bytes this count did not.
        if predictor >= 2 && !last && matches!(*filter, b"FlateDecode" | b"LZWDecode") {
            return Err(Refusal::PdfTooComplex);
        }
        data = Cow::Owned(output);
    }
    Ok(data.len() as u64)
}

/// Image XObjects carry no text; pdf-extract would try to read them as
/// drawing instructions. Emptied, they cost nothing and say nothing.
fn empty_images(document: &mut Document) {
    for object in document.objects.values_mut() {
        if let Object::Stream(stream) = object
            && stream
                .dict
                .get(b"Subtype")
                .and_then(Object::as_name)
                .is_ok_and(|subtype| subtype == b"Image")
        {
            stream.set_plain_content(Vec::new());
        }
    }
}

/// Step 4: what pdf-extract will do, counted before it does it.
struct Work<'a> {
    document: &'a Document,
    sizes: &'a HashMap<ObjectId, u64>,
    total: u64,
    /// The form XObjects being drawn, innermost last.
    drawing: Vec<ObjectId>,
    /// The XObject names each form's content invokes with `Do`.
    invoked: HashMap<ObjectId, Vec<Vec<u8>>>,
}

impl<'a> Work<'a> {
    fn new(document: &'a Document, sizes: &'a HashMap<ObjectId, u64>) -> Work<'a> {
        Work {
            document,
            sizes,
            total: 0,
            drawing: Vec::new(),
            invoked: HashMap::new(),
        }
    }

    fn check_pages(&mut self, pages: &BTreeMap<u32, ObjectId>) -> Result<(), Refusal> {
        for page_id in pages.values() {
            let page = self
                .document
                .get_dictionary(*page_id)
                .map_err(|_| Refusal::PdfMalformed)?;
            let chain = self.parent_chain(page)?;
            let resources = chain
                .iter()
                .find_map(|node| self.dictionary(node, b"Resources"));
            let contents = self.document.get_page_contents(*page_id);
            let bytes: u64 = contents.iter().map(|id| self.size(*id)).sum();
            self.add(bytes)?;
            let content = self
                .document
                .get_page_content(*page_id)
                .map_err(|_| Refusal::PdfMalformed)?;
            let names = invoked_names(&content)?;
            self.draw(&names, resources, 1)?;
        }
        Ok(())
    }

    /// The page and its ancestors, which pdf-extract walks recursively to
    /// inherit `Resources` and `MediaBox`: short and without a cycle.
    fn parent_chain(&self, page: &'a Dictionary) -> Result<Vec<&'a Dictionary>, Refusal> {
        let mut chain = vec![page];
        let mut seen = Vec::new();
        let mut node = page;
        while let Ok(parent) = node.get(b"Parent").and_then(Object::as_reference) {
            if seen.contains(&parent) || chain.len() > MAX_PARENT_CHAIN {
                return Err(Refusal::PdfMalformed);
            }
            seen.push(parent);
            let Ok(next) = self.document.get_dictionary(parent) else {
                break;
            };
            chain.push(next);
            node = next;
        }
        Ok(chain)
    }

    /// `key` of `dict` as a dictionary, following references.
    fn dictionary(&self, dict: &'a Dictionary, key: &[u8]) -> Option<&'a Dictionary> {
        let object = dict.get(key).ok()?;
        self.document
            .dereference(object)
            .ok()
            .and_then(|(_, object)| object.as_dict().ok())
    }

    fn size(&self, id: ObjectId) -> u64 {
        self.sizes.get(&id).copied().unwrap_or_else(|| {
            self.document
                .get_object(id)
                .and_then(Object::as_stream)
                .map(|stream| stream.content.len() as u64)
                .unwrap_or(0)
        })
    }

    fn add(&mut self, bytes: u64) -> Result<(), Refusal> {
        self.total = self
            .total
            .saturating_add(bytes)
            .saturating_add(WORK_PER_INVOCATION);
        if self.total > MAX_WORK_BYTES {
            return Err(Refusal::PdfTooComplex);
        }
        Ok(())
    }

    /// Draws the XObjects `names` with `resources`, as pdf-extract's `Do` does.
    fn draw(
        &mut self,
        names: &[Vec<u8>],
        resources: Option<&'a Dictionary>,
        depth: usize,
    ) -> Result<(), Refusal> {
        let Some(xobjects) = resources.and_then(|resources| self.dictionary(resources, b"XObject"))
        else {
            return Ok(());
        };
        for name in names {
            let Ok(entry) = xobjects.get(name) else {
                continue;
            };
            let Ok((Some(id), object)) = self.document.dereference(entry) else {
                continue;
            };
            let Ok(form) = object.as_stream() else {
                continue;
            };
            let is_image = form
                .dict
                .get(b"Subtype")
                .and_then(Object::as_name)
                .is_ok_and(|subtype| subtype == b"Image");
            if is_image {
                continue;
            }
            if depth > MAX_FORM_DEPTH || self.drawing.contains(&id) {
                return Err(Refusal::PdfTooComplex);
            }
            self.add(self.size(id))?;
            let inner = match self.invoked.get(&id) {
                Some(names) => names.clone(),
                None => {
                    let content = form
                        .decompressed_content()
                        .unwrap_or_else(|_| form.content.clone());
                    let names = invoked_names(&content)?;
                    self.invoked.insert(id, names.clone());
                    names
                }
            };
            let form_resources = self.dictionary(&form.dict, b"Resources").or(resources);
            self.drawing.push(id);
            self.draw(&inner, form_resources, depth + 1)?;
            self.drawing.pop();
        }
        Ok(())
    }
}

/// The operands of every `Do` in a content stream. Content pdf-extract could
/// not parse would make it panic, so it is refused here already.
fn invoked_names(content: &[u8]) -> Result<Vec<Vec<u8>>, Refusal> {
    let content = Content::decode(content).map_err(|_| Refusal::PdfMalformed)?;
    Ok(content
        .operations
        .iter()
        .filter(|operation| operation.operator == "Do")
        .filter_map(|operation| {
            operation
                .operands
                .first()?
                .as_name()
                .ok()
                .map(<[u8]>::to_vec)
        })
        .collect())
}

/// The text of every page, in order.
fn extract(document: &Document) -> Result<String, Refusal> {
    let mut text = String::new();
    let extracted = catch_unwind(AssertUnwindSafe(|| {
        let mut output = pdf_extract::PlainTextOutput::new(&mut text);
        pdf_extract::output_doc(document, &mut output)
    }));
    match extracted {
        Ok(Ok(())) => Ok(text),
        _ => Err(Refusal::PdfMalformed),
    }
}

/// Extracted text as Markdown paragraphs: lines without trailing space, at
/// most one blank line in a row.
fn tidy(text: &str) -> String {
    let mut markdown = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !markdown.is_empty() {
            markdown.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        markdown.push_str(line);
    }
    if !markdown.is_empty() {
        markdown.push('\n');
    }
    markdown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encrypt_is_found_as_a_whole_name() {
        assert!(has_name(b"trailer << /Encrypt 5 0 R >>", b"/Encrypt"));
        assert!(has_name(b"<</Encrypt<<", b"/Encrypt"));
        assert!(!has_name(b"<< /EncryptMetadata false >>", b"/Encrypt"));
    }

    #[test]
    fn huge_predictor_rows_are_refused() {
        let pdf = b"%PDF-1.5\n<< /DecodeParms << /Columns 99999999999 /Predictor 12 >> >>";
        assert_eq!(scan_raw(pdf), Err(too_large()));
        assert_eq!(scan_raw(b"%PDF-1.5\n<< /Columns 5 >>"), Ok(()));
    }

    #[test]
    fn text_is_tidied() {
        assert_eq!(tidy("\n\n a  \nb\n\n\n\nc   \n\n"), " a\nb\n\nc\n");
    }
}
