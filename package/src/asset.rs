//! The rules for a package's binary assets: PNG, JPEG, WebP and GIF images and
//! WOFF2 fonts. They reach a browser only as `data:` URLs inlined into the
//! hashed resource (CSP `img-src data:; font-src data:`), so they cannot run
//! anything or load anything; what must not happen is that a file whose
//! extension promises an image is something else, or that a small file makes
//! the validator (or a browser) allocate without bound.
//!
//! - **Images** are decoded with the `image` crate (only its PNG, JPEG, WebP
//!   and GIF decoders are compiled in; JPEG pixels through its JPEG decoder,
//!   zune-jpeg, in strict mode), in the format the extension names,
//!   never a guessed one: a PNG named `logo.jpg` is refused. The header's
//!   dimensions are checked against [`MAX_IMAGE_SIDE`] and
//!   [`MAX_IMAGE_PIXELS`], and the decoder's allocation against
//!   [`MAX_DECODE_BYTES`], before the pixels are decoded, so a decompression
//!   bomb (a tiny file declaring a huge canvas) is refused before anything
//!   large is allocated. The first frame of an animation is decoded; later
//!   frames are not.
//! - **WOFF2 fonts** are checked by their header and table directory
//!   ([`check_woff2`]), a structural check written here rather than taken
//!   from a crate: the maintained Rust readers of WOFF2 (allsorts, for one)
//!   decode the whole font, with a Brotli decoder and a `glyf`/`loca`
//!   rebuilder, which is far more code fed hostile bytes than this check
//!   needs. It proves the file is one WOFF2 font of the length it declares,
//!   with a sane, bounded table directory; the font data itself stays
//!   compressed here, and browsers sanitise fonts (OTS) before use.
//!
//! This module must not write, guess a format, or decode anything without its
//! limits set first.

use std::io::Cursor;

use image::{DynamicImage, ImageDecoder as _, ImageError, ImageFormat, ImageReader, Limits};
use zune_core::bytestream::ZCursor;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use crate::diagnostics::Diagnostics;

/// Longest side of an image, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 4096;
/// Most pixels of an image (2048 × 2048): far more than an app's view shows.
pub const MAX_IMAGE_PIXELS: u64 = 2048 * 2048;
/// Most bytes the decoder may allocate for one image, the decoded pixels
/// included (16-bit RGBA at [`MAX_IMAGE_PIXELS`]).
pub const MAX_DECODE_BYTES: u64 = 32 * 1024 * 1024;
/// Most tables a WOFF2 font may declare; real fonts have a few dozen.
pub const MAX_FONT_TABLES: u16 = 128;
/// Most bytes the font a WOFF2 file holds may have once decompressed.
pub const MAX_FONT_SFNT_BYTES: u32 = 16 * 1024 * 1024;

/// What a binary asset is, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssetKind {
    Png,
    Jpeg,
    Webp,
    Gif,
    Woff2,
}

impl AssetKind {
    /// The kind a package path names by its extension, if it is a binary asset.
    pub fn of_path(path: &str) -> Option<AssetKind> {
        Some(match crate::source::extension_of(path)? {
            "png" => AssetKind::Png,
            "jpg" | "jpeg" => AssetKind::Jpeg,
            "webp" => AssetKind::Webp,
            "gif" => AssetKind::Gif,
            "woff2" => AssetKind::Woff2,
            _ => return None,
        })
    }

    /// The MIME type of its `data:` URL.
    pub fn mime_type(self) -> &'static str {
        match self {
            AssetKind::Png => "image/png",
            AssetKind::Jpeg => "image/jpeg",
            AssetKind::Webp => "image/webp",
            AssetKind::Gif => "image/gif",
            AssetKind::Woff2 => "font/woff2",
        }
    }

    /// Whether it is an image (everything but the font).
    pub fn is_image(self) -> bool {
        self != AssetKind::Woff2
    }

    fn image_format(self) -> Option<ImageFormat> {
        match self {
            AssetKind::Png => Some(ImageFormat::Png),
            AssetKind::Jpeg => Some(ImageFormat::Jpeg),
            AssetKind::Webp => Some(ImageFormat::WebP),
            AssetKind::Gif => Some(ImageFormat::Gif),
            AssetKind::Woff2 => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            AssetKind::Png => "PNG",
            AssetKind::Jpeg => "JPEG",
            AssetKind::Webp => "WebP",
            AssetKind::Gif => "GIF",
            AssetKind::Woff2 => "WOFF2",
        }
    }
}

/// Whether a package path names an image: an `.svg` file or a raster asset.
pub fn is_image_path(path: &str) -> bool {
    crate::source::extension_of(path) == Some("svg")
        || AssetKind::of_path(path).is_some_and(AssetKind::is_image)
}

/// Whether a package path names a font (a `.woff2` file).
pub fn is_font_path(path: &str) -> bool {
    AssetKind::of_path(path) == Some(AssetKind::Woff2)
}

/// The image extensions, for messages.
pub const IMAGE_EXTENSIONS: &str = ".svg .png .jpg .jpeg .webp .gif";

/// One refusal of an asset: a code and a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub reason: String,
}

fn refusal(code: &'static str, reason: impl Into<String>) -> Refusal {
    Refusal {
        code,
        reason: reason.into(),
    }
}

/// Checks one binary asset of the package and records its problem, if any.
pub fn check_asset(file: &str, bytes: &[u8], diagnostics: &mut Diagnostics) {
    if let Err(refused) = judge(file, bytes) {
        diagnostics.push(file, None, refused.code, refused.reason);
    }
}

/// Whether `bytes` are a valid asset of the kind `path`'s extension names.
pub fn judge(path: &str, bytes: &[u8]) -> Result<(), Refusal> {
    let Some(kind) = AssetKind::of_path(path) else {
        return Err(refusal(
            "PATH_EXTENSION",
            "this extension is not a binary asset (.png .jpg .jpeg .webp .gif .woff2)",
        ));
    };
    match kind.image_format() {
        Some(format) => check_image(kind, format, bytes),
        None => check_woff2(bytes),
    }
}

/// Decodes the image with every limit set before any pixel is decoded.
fn check_image(kind: AssetKind, format: ImageFormat, bytes: &[u8]) -> Result<(), Refusal> {
    let name = kind.name();
    let invalid = |detail: &str| {
        refusal(
            "ASSET_IMAGE_INVALID",
            format!(
                "the file does not decode as a {name} image ({detail}); export it again as {name} or give it the extension of its real format"
            ),
        )
    };
    let too_large = || {
        refusal(
            "ASSET_IMAGE_TOO_LARGE",
            format!(
                "the image is too large to decode: at most {MAX_IMAGE_SIDE} pixels a side, {MAX_IMAGE_PIXELS} pixels and {MAX_DECODE_BYTES} decoded bytes; scale it down"
            ),
        )
    };
    if bytes.is_empty() {
        return Err(invalid("it is empty"));
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_IMAGE_SIDE);
    limits.max_image_height = Some(MAX_IMAGE_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    // A decoder is third-party code fed hostile bytes: a panic in it refuses
    // the file instead of ending the validation.
    let decoded = std::panic::catch_unwind(move || -> Result<(), Refusal> {
        let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
        reader.limits(limits);
        let decoder = reader.into_decoder().map_err(|error| match error {
            ImageError::Limits(_) => too_large(),
            _ => invalid("its header is not valid"),
        })?;
        let (width, height) = decoder.dimensions();
        if width == 0 || height == 0 {
            return Err(invalid("it has no pixels"));
        }
        if u64::from(width) * u64::from(height) > MAX_IMAGE_PIXELS
            || decoder.total_bytes() > MAX_DECODE_BYTES
        {
            return Err(too_large());
        }
        if kind == AssetKind::Jpeg {
            // image decodes JPEG leniently (missing data becomes grey);
            // the same decoder in strict mode refuses a truncated file.
            let options = DecoderOptions::default()
                .set_strict_mode(true)
                .set_max_width(MAX_IMAGE_SIDE as usize)
                .set_max_height(MAX_IMAGE_SIDE as usize);
            return JpegDecoder::new_with_options(ZCursor::new(bytes), options)
                .decode()
                .map(drop)
                .map_err(|_| invalid("its image data is truncated or corrupt"));
        }
        DynamicImage::from_decoder(decoder)
            .map(drop)
            .map_err(|error| match error {
                ImageError::Limits(_) => too_large(),
                _ => invalid("its image data is truncated or corrupt"),
            })
    });
    match decoded {
        Ok(Ok(())) => Ok(()),
        Ok(Err(refused)) => Err(refused),
        Err(_) => Err(invalid("the decoder could not read it")),
    }
}

/// `wOF2`.
const WOFF2_SIGNATURE: u32 = 0x774F_4632;
/// The tags of the WOFF2 known-table index (flags bits 0–5; 63 means the tag
/// follows as four bytes). WOFF2 §5.1, Table 3.
const KNOWN_TAGS: [&[u8; 4]; 63] = [
    b"cmap", b"head", b"hhea", b"hmtx", b"maxp", b"name", b"OS/2", b"post", b"cvt ", b"fpgm",
    b"glyf", b"loca", b"prep", b"CFF ", b"VORG", b"EBDT", b"EBLC", b"gasp", b"hdmx", b"kern",
    b"LTSH", b"PCLT", b"VDMX", b"vhea", b"vmtx", b"BASE", b"GDEF", b"GPOS", b"GSUB", b"EBSC",
    b"JSTF", b"MATH", b"CBDT", b"CBLC", b"COLR", b"CPAL", b"SVG ", b"sbix", b"acnt", b"avar",
    b"bdat", b"bloc", b"bsln", b"cvar", b"fdsc", b"feat", b"fmtx", b"fvar", b"gvar", b"hsty",
    b"just", b"lcar", b"mort", b"morx", b"opbd", b"prop", b"trak", b"Zapf", b"Silf", b"Glat",
    b"Gloc", b"Feat", b"Sill",
];

/// A big-endian reader over the file that refuses to read past its end.
struct Bytes<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.at.checked_add(N)?;
        let taken = self.bytes.get(self.at..end)?.try_into().ok()?;
        self.at = end;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[byte]| byte)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }

    /// WOFF2's UIntBase128: at most five bytes, no leading zero byte, no
    /// value past `u32::MAX`.
    fn base128(&mut self) -> Option<u32> {
        let mut value: u32 = 0;
        for index in 0..5 {
            let byte = self.u8()?;
            if index == 0 && byte == 0x80 {
                return None;
            }
            if value & 0xFE00_0000 != 0 {
                return None;
            }
            value = (value << 7) | u32::from(byte & 0x7F);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
}

/// The fields of the 48-byte WOFF2 header this check uses.
struct Woff2Header {
    signature: u32,
    flavor: [u8; 4],
    length: u32,
    tables: u16,
    reserved: u16,
    sfnt_size: u32,
    compressed: u32,
    /// (offset, length) of the metadata and of the private block.
    blocks: [(u32, u32); 2],
}

impl Woff2Header {
    fn read(reader: &mut Bytes<'_>) -> Option<Woff2Header> {
        let signature = reader.u32()?;
        let flavor = reader.take::<4>()?;
        let length = reader.u32()?;
        let tables = reader.u16()?;
        let reserved = reader.u16()?;
        let sfnt_size = reader.u32()?;
        let compressed = reader.u32()?;
        // majorVersion, minorVersion: any font version.
        reader.take::<4>()?;
        let meta = (reader.u32()?, reader.u32()?);
        // metaOrigLength: the metadata is never decompressed here.
        reader.u32()?;
        let private = (reader.u32()?, reader.u32()?);
        Some(Woff2Header {
            signature,
            flavor,
            length,
            tables,
            reserved,
            sfnt_size,
            compressed,
            blocks: [meta, private],
        })
    }
}

/// Checks a WOFF2 file's header and table directory (W3C WOFF2 §4 and §5):
/// the signature; a single-font flavor (TrueType or CFF; collections are
/// refused); the declared length equal to the file's; `reserved` zero; 1 to
/// [`MAX_FONT_TABLES`] tables, each with a well-formed entry, a printable tag
/// seen once and a transform the format defines; `glyf` and `loca` together or
/// not at all, with `head` and `cmap` present; the declared decompressed size,
/// and the sizes of the tables together, at most [`MAX_FONT_SFNT_BYTES`]; and
/// the compressed stream, the metadata and the private block inside the file.
///
/// `totalSfntSize` is only bounded, not compared with the tables: the
/// specification says it is for reference and may differ from the rebuilt
/// font when `glyf` and `loca` are transformed.
pub fn check_woff2(bytes: &[u8]) -> Result<(), Refusal> {
    let invalid = |detail: &str| {
        refusal(
            "ASSET_FONT_INVALID",
            format!(
                "the file is not a valid WOFF2 font ({detail}); convert the font to WOFF2 again"
            ),
        )
    };
    let too_large = |detail: String| {
        refusal(
            "ASSET_FONT_TOO_LARGE",
            format!("the font is too large ({detail}); subset it to the characters the app uses"),
        )
    };
    let mut reader = Bytes { bytes, at: 0 };
    let Some(header) = Woff2Header::read(&mut reader) else {
        return Err(invalid("it is shorter than the 48-byte WOFF2 header"));
    };
    if header.signature != WOFF2_SIGNATURE {
        return Err(invalid("it does not start with the signature wOF2"));
    }
    match &header.flavor {
        [0, 1, 0, 0] | b"true" | b"OTTO" => {}
        b"ttcf" => {
            return Err(invalid(
                "font collections are not supported; use one font per file",
            ));
        }
        _ => return Err(invalid("its flavor is neither TrueType nor CFF")),
    }
    if usize::try_from(header.length).ok() != Some(bytes.len()) {
        return Err(invalid(&format!(
            "its header declares {} bytes but the file has {}: it is truncated or has extra bytes",
            header.length,
            bytes.len()
        )));
    }
    if header.reserved != 0 {
        return Err(invalid("its reserved header field is not zero"));
    }
    if header.tables == 0 {
        return Err(invalid("it declares no tables"));
    }
    if header.tables > MAX_FONT_TABLES {
        return Err(too_large(format!(
            "{} tables; at most {MAX_FONT_TABLES}",
            header.tables
        )));
    }
    if header.sfnt_size > MAX_FONT_SFNT_BYTES {
        return Err(too_large(format!(
            "{} bytes once decompressed; at most {MAX_FONT_SFNT_BYTES}",
            header.sfnt_size
        )));
    }

    let mut seen: Vec<[u8; 4]> = Vec::with_capacity(usize::from(header.tables));
    // What the tables need once decompressed and once rebuilt.
    let (mut stream, mut rebuilt) = (0u64, 0u64);
    for _ in 0..header.tables {
        let Some(flags) = reader.u8() else {
            return Err(invalid("its table directory is truncated"));
        };
        let tag = match usize::from(flags & 0x3F) {
            63 => match reader.take::<4>() {
                Some(tag) => tag,
                None => return Err(invalid("its table directory is truncated")),
            },
            index => *KNOWN_TAGS[index],
        };
        if !tag.iter().all(|byte| (0x20..=0x7E).contains(byte)) {
            return Err(invalid("a table tag is not printable"));
        }
        if seen.contains(&tag) {
            return Err(invalid("a table is declared twice"));
        }
        seen.push(tag);
        let transform = flags >> 6;
        let glyph_table = &tag == b"glyf" || &tag == b"loca";
        // glyf and loca carry a transformed length unless they use the null
        // transform (3); other tables carry one only when transformed, which
        // only hmtx may be (version 1); the other versions are reserved.
        let has_transform_length = match (glyph_table, transform) {
            (true, 0) => true,
            (true, 3) | (false, 0) => false,
            (false, 1) if &tag == b"hmtx" => true,
            _ => return Err(invalid("a table uses a reserved transform")),
        };
        let Some(original) = reader.base128() else {
            return Err(invalid("a table length is malformed"));
        };
        let mut in_stream = original;
        if has_transform_length {
            let Some(transformed) = reader.base128() else {
                return Err(invalid("a table length is malformed"));
            };
            if &tag == b"loca" && transformed != 0 {
                return Err(invalid("the transformed loca table must be empty"));
            }
            in_stream = transformed;
        }
        stream += u64::from(in_stream);
        rebuilt += u64::from(original).div_ceil(4) * 4;
    }
    let has = |tag: &[u8; 4]| seen.contains(tag);
    if has(b"glyf") != has(b"loca") {
        return Err(invalid("it has one of glyf and loca without the other"));
    }
    if !has(b"head") || !has(b"cmap") {
        return Err(invalid("it lacks the head or cmap table every font needs"));
    }
    let total = stream.max(rebuilt);
    if total > u64::from(MAX_FONT_SFNT_BYTES) {
        return Err(too_large(format!(
            "its tables hold {total} bytes once decompressed; at most {MAX_FONT_SFNT_BYTES}"
        )));
    }
    let directory_end = reader.at as u64;
    let data_end = directory_end + u64::from(header.compressed);
    if header.compressed == 0 || data_end > bytes.len() as u64 {
        return Err(invalid(
            "its compressed font data is empty or runs past the end of the file",
        ));
    }
    for (offset, block_length) in header.blocks {
        if block_length == 0 {
            continue;
        }
        let end = u64::from(offset) + u64::from(block_length);
        if u64::from(offset) < data_end || end > bytes.len() as u64 {
            return Err(invalid(
                "its metadata or private block lies outside the file or overlaps the font data",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use image::{Rgb, RgbImage, Rgba, RgbaImage};

    /// A small image with some texture, so every format has real data.
    fn picture(width: u32, height: u32) -> RgbaImage {
        RgbaImage::from_fn(width, height, |x, y| {
            let v = ((x * 7 + y * 13) % 251) as u8;
            Rgba([v, v.wrapping_mul(3), 255 - v, 255])
        })
    }

    fn encode(image: DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        image.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    fn png(width: u32, height: u32) -> Vec<u8> {
        encode(
            DynamicImage::ImageRgba8(picture(width, height)),
            ImageFormat::Png,
        )
    }

    fn jpeg(width: u32, height: u32) -> Vec<u8> {
        let rgb = RgbImage::from_fn(width, height, |x, y| {
            Rgb([(x * 5) as u8, (y * 3) as u8, 90])
        });
        encode(DynamicImage::ImageRgb8(rgb), ImageFormat::Jpeg)
    }

    fn webp(width: u32, height: u32) -> Vec<u8> {
        encode(
            DynamicImage::ImageRgba8(picture(width, height)),
            ImageFormat::WebP,
        )
    }

    fn gif(width: u32, height: u32) -> Vec<u8> {
        encode(
            DynamicImage::ImageRgba8(picture(width, height)),
            ImageFormat::Gif,
        )
    }

    fn code(path: &str, bytes: &[u8]) -> Option<&'static str> {
        judge(path, bytes).err().map(|refused| refused.code)
    }

    /// A PNG of only a signature, an IHDR declaring `width` × `height` and an
    /// IEND: what a decompression bomb looks like before its (tiny) data.
    fn png_header(width: u32, height: u32) -> Vec<u8> {
        fn crc32(bytes: &[u8]) -> u32 {
            let mut crc = 0xFFFF_FFFFu32;
            for byte in bytes {
                crc ^= u32::from(*byte);
                for _ in 0..8 {
                    crc = if crc & 1 == 1 {
                        (crc >> 1) ^ 0xEDB8_8320
                    } else {
                        crc >> 1
                    };
                }
            }
            !crc
        }
        let chunk = |kind: &[u8; 4], data: &[u8]| {
            let mut out = (data.len() as u32).to_be_bytes().to_vec();
            let mut body = kind.to_vec();
            body.extend_from_slice(data);
            out.extend_from_slice(&body);
            out.extend_from_slice(&crc32(&body).to_be_bytes());
            out
        };
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&width.to_be_bytes());
        ihdr.extend_from_slice(&height.to_be_bytes());
        // 8-bit RGBA, deflate, adaptive filtering, no interlace.
        ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        out.extend(chunk(b"IHDR", &ihdr));
        // A zlib stream of a few bytes that would inflate to far more.
        out.extend(chunk(
            b"IDAT",
            &[0x78, 0x9C, 0xED, 0xC1, 0x01, 0x01, 0x00, 0x00],
        ));
        out.extend(chunk(b"IEND", &[]));
        out
    }

    #[test]
    fn every_image_format_is_accepted() {
        assert_eq!(code("assets/logo.png", &png(16, 12)), None);
        assert_eq!(code("assets/photo.jpg", &jpeg(16, 12)), None);
        assert_eq!(code("assets/photo.jpeg", &jpeg(3, 3)), None);
        assert_eq!(code("assets/photo.webp", &webp(16, 12)), None);
        assert_eq!(code("assets/spinner.gif", &gif(16, 12)), None);
        assert_eq!(code("wide.png", &png(MAX_IMAGE_SIDE, 1)), None);
    }

    #[test]
    fn bytes_that_do_not_decode_are_refused() {
        for path in ["a.png", "a.jpg", "a.webp", "a.gif"] {
            assert_eq!(code(path, b""), Some("ASSET_IMAGE_INVALID"), "{path}");
            assert_eq!(
                code(path, b"not an image at all"),
                Some("ASSET_IMAGE_INVALID"),
                "{path}"
            );
            assert_eq!(
                code(path, &[0u8; 4096]),
                Some("ASSET_IMAGE_INVALID"),
                "{path}"
            );
        }
        // The extension decides the format: real images under the wrong name.
        assert_eq!(code("a.jpg", &png(8, 8)), Some("ASSET_IMAGE_INVALID"));
        assert_eq!(code("a.png", &jpeg(8, 8)), Some("ASSET_IMAGE_INVALID"));
        assert_eq!(code("a.gif", &webp(8, 8)), Some("ASSET_IMAGE_INVALID"));
        assert_eq!(code("a.webp", &gif(8, 8)), Some("ASSET_IMAGE_INVALID"));
        let refused = judge("a.jpg", &png(8, 8)).unwrap_err();
        assert!(refused.reason.contains("JPEG"), "{}", refused.reason);
    }

    #[test]
    fn truncated_images_are_refused() {
        for (path, bytes) in [
            ("a.png", png(64, 64)),
            ("a.jpg", jpeg(64, 64)),
            ("a.webp", webp(64, 64)),
            ("a.gif", gif(64, 64)),
        ] {
            for keep in [bytes.len() / 2, bytes.len() / 4, 20] {
                assert_eq!(
                    code(path, &bytes[..keep]),
                    Some("ASSET_IMAGE_INVALID"),
                    "{path} cut to {keep} of {} bytes",
                    bytes.len()
                );
            }
        }
    }

    #[test]
    fn corrupt_images_are_refused() {
        // A flipped byte in the PNG's image data breaks its checksum.
        let mut bytes = png(32, 32);
        let at = bytes.len() - 20;
        bytes[at] ^= 0xFF;
        assert_eq!(code("a.png", &bytes), Some("ASSET_IMAGE_INVALID"));
        // A PNG whose header is fine but whose data is garbage.
        let mut bytes = png_header(4, 4);
        let idat = bytes.windows(4).position(|w| w == b"IDAT").unwrap();
        bytes[idat + 4] = 0x00;
        assert_eq!(code("a.png", &bytes), Some("ASSET_IMAGE_INVALID"));
    }

    #[test]
    fn decompression_bombs_are_refused_before_decoding() {
        // Kilobytes that declare gigabytes: refused from the header alone.
        let bomb = png_header(60_000, 60_000);
        assert!(bomb.len() < 100);
        assert_eq!(code("bomb.png", &bomb), Some("ASSET_IMAGE_TOO_LARGE"));
        // Within the side limit but over the pixel limit.
        assert_eq!(
            code("big.png", &png_header(2100, 2100)),
            Some("ASSET_IMAGE_TOO_LARGE")
        );
        // A GIF whose one-pixel screen holds a 60000 × 60000 frame.
        let mut gif_bomb = b"GIF89a".to_vec();
        gif_bomb.extend_from_slice(&[1, 0, 1, 0, 0x80, 0, 0]);
        gif_bomb.extend_from_slice(&[0, 0, 0, 255, 255, 255]);
        gif_bomb.push(0x2C);
        gif_bomb.extend_from_slice(&[0, 0, 0, 0]);
        gif_bomb.extend_from_slice(&60_000u16.to_le_bytes());
        gif_bomb.extend_from_slice(&60_000u16.to_le_bytes());
        gif_bomb.extend_from_slice(&[0, 2, 2, 0x4C, 0x01, 0, 0x3B]);
        assert_eq!(code("bomb.gif", &gif_bomb), Some("ASSET_IMAGE_TOO_LARGE"));
        // One pixel past the side limit, in every format.
        let side = MAX_IMAGE_SIDE + 1;
        assert_eq!(code("a.png", &png(side, 1)), Some("ASSET_IMAGE_TOO_LARGE"));
        assert_eq!(code("a.jpg", &jpeg(side, 1)), Some("ASSET_IMAGE_TOO_LARGE"));
        assert_eq!(
            code("a.webp", &webp(1, side)),
            Some("ASSET_IMAGE_TOO_LARGE")
        );
        assert_eq!(code("a.gif", &gif(side, 1)), Some("ASSET_IMAGE_TOO_LARGE"));
    }

    /// One table of a test font: flags (known-tag index or 63, transform in
    /// the top bits), an arbitrary tag when the index is 63, the original
    /// length and the transformed length when the entry has one.
    struct Table {
        flags: u8,
        tag: Option<[u8; 4]>,
        original: u32,
        transformed: Option<u32>,
    }

    fn known(index: u8, original: u32) -> Table {
        Table {
            flags: index,
            tag: None,
            original,
            transformed: None,
        }
    }

    fn base128(mut value: u32) -> Vec<u8> {
        let mut out = vec![(value & 0x7F) as u8];
        value >>= 7;
        while value > 0 {
            out.insert(0, 0x80 | (value & 0x7F) as u8);
            value >>= 7;
        }
        out
    }

    /// The minimal tables of a TrueType font with transformed glyf and loca.
    fn font_tables() -> Vec<Table> {
        vec![
            known(0, 100), // cmap
            known(1, 54),  // head
            known(2, 36),  // hhea
            known(3, 40),  // hmtx
            known(4, 32),  // maxp
            known(5, 200), // name
            known(6, 96),  // OS/2
            known(7, 32),  // post
            Table {
                flags: 10, // glyf, transform 0: transformed
                tag: None,
                original: 400,
                transformed: Some(300),
            },
            Table {
                flags: 11, // loca, transform 0: empty once transformed
                tag: None,
                original: 20,
                transformed: Some(0),
            },
        ]
    }

    /// A WOFF2 file with these tables and `compressed` bytes of (opaque)
    /// compressed data; `edit` may change the header before the length is set.
    fn woff2_with(tables: &[Table], compressed: u32, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut directory = Vec::new();
        for table in tables {
            directory.push(table.flags);
            if let Some(tag) = table.tag {
                directory.extend_from_slice(&tag);
            }
            directory.extend(base128(table.original));
            if let Some(transformed) = table.transformed {
                directory.extend(base128(transformed));
            }
        }
        let sfnt: u32 = 12
            + 16 * tables.len() as u32
            + tables
                .iter()
                .map(|t| t.original.div_ceil(4) * 4)
                .sum::<u32>();
        let mut out = Vec::new();
        out.extend_from_slice(b"wOF2");
        out.extend_from_slice(&0x0001_0000u32.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes()); // length, set below
        out.extend_from_slice(&(tables.len() as u16).to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&sfnt.to_be_bytes());
        out.extend_from_slice(&compressed.to_be_bytes());
        out.extend_from_slice(&[0, 1, 0, 0]); // version 1.0
        out.extend_from_slice(&[0; 20]); // no metadata, no private block
        assert_eq!(out.len(), 48);
        out.extend(directory);
        out.extend((0..compressed).map(|i| (i * 31) as u8));
        edit(&mut out);
        let length = out.len() as u32;
        out[8..12].copy_from_slice(&length.to_be_bytes());
        out
    }

    fn woff2() -> Vec<u8> {
        woff2_with(&font_tables(), 64, |_| {})
    }

    fn font_code(bytes: &[u8]) -> Option<&'static str> {
        code("fonts/brand.woff2", bytes)
    }

    #[test]
    fn a_minimal_woff2_font_is_accepted() {
        assert_eq!(font_code(&woff2()), None);
        // CFF flavor, an arbitrary tag, the null transform of glyf/loca, a
        // transformed hmtx and a metadata block after the font data.
        let tables = vec![
            known(0, 10),
            known(1, 54),
            Table {
                flags: 63,
                tag: Some(*b"Zzzz"),
                original: 8,
                transformed: None,
            },
            Table {
                flags: 3 | 0x40,
                tag: None,
                original: 40,
                transformed: Some(20),
            },
            Table {
                flags: 10 | 0xC0,
                tag: None,
                original: 100,
                transformed: None,
            },
            Table {
                flags: 11 | 0xC0,
                tag: None,
                original: 12,
                transformed: None,
            },
        ];
        let with_metadata = woff2_with(&tables, 16, |bytes| {
            bytes[4..8].copy_from_slice(b"OTTO");
            let offset = bytes.len() as u32;
            bytes[28..32].copy_from_slice(&offset.to_be_bytes());
            bytes[32..36].copy_from_slice(&8u32.to_be_bytes());
            bytes.extend_from_slice(&[7; 8]);
        });
        assert_eq!(font_code(&with_metadata), None);
    }

    #[test]
    fn truncated_or_padded_fonts_are_refused() {
        let font = woff2();
        assert_eq!(
            font_code(&font[..font.len() - 1]),
            Some("ASSET_FONT_INVALID")
        );
        assert_eq!(font_code(&font[..47]), Some("ASSET_FONT_INVALID"));
        assert_eq!(font_code(&font[..60]), Some("ASSET_FONT_INVALID"));
        assert_eq!(font_code(b""), Some("ASSET_FONT_INVALID"));
        let mut padded = font.clone();
        padded.push(0);
        assert_eq!(font_code(&padded), Some("ASSET_FONT_INVALID"));
        // The length agrees but the directory runs past the data.
        let short = woff2_with(&font_tables(), 64, |bytes| bytes.truncate(60));
        assert_eq!(font_code(&short), Some("ASSET_FONT_INVALID"));
    }

    #[test]
    fn corrupt_font_headers_are_refused() {
        let edited = |edit: &dyn Fn(&mut Vec<u8>)| {
            font_code(&woff2_with(&font_tables(), 64, |bytes| edit(bytes)))
        };
        assert_eq!(
            edited(&|b| b[0..4].copy_from_slice(b"wOFF")),
            Some("ASSET_FONT_INVALID")
        );
        assert_eq!(
            edited(&|b| b[4..8].copy_from_slice(b"ttcf")),
            Some("ASSET_FONT_INVALID")
        );
        assert_eq!(
            edited(&|b| b[4..8].copy_from_slice(b"abcd")),
            Some("ASSET_FONT_INVALID")
        );
        assert_eq!(edited(&|b| b[14] = 1), Some("ASSET_FONT_INVALID"));
        assert_eq!(
            edited(&|b| b[12..14].copy_from_slice(&[0, 0])),
            Some("ASSET_FONT_INVALID")
        );
        // No compressed data, or more than the file holds.
        assert_eq!(
            edited(&|b| b[20..24].copy_from_slice(&[0; 4])),
            Some("ASSET_FONT_INVALID")
        );
        assert_eq!(
            edited(&|b| b[20..24].copy_from_slice(&10_000u32.to_be_bytes())),
            Some("ASSET_FONT_INVALID")
        );
        // A metadata block outside the file, or over the font data.
        assert_eq!(
            edited(&|b| {
                b[28..32].copy_from_slice(&50u32.to_be_bytes());
                b[32..36].copy_from_slice(&4u32.to_be_bytes());
            }),
            Some("ASSET_FONT_INVALID")
        );
        assert_eq!(
            edited(&|b| {
                let end = b.len() as u32;
                b[40..44].copy_from_slice(&end.to_be_bytes());
                b[44..48].copy_from_slice(&4u32.to_be_bytes());
            }),
            Some("ASSET_FONT_INVALID")
        );
        // A garbage file with the right signature.
        let mut garbage = b"wOF2".to_vec();
        garbage.extend((0..500u32).map(|i| (i * 7 + 3) as u8));
        assert_eq!(font_code(&garbage), Some("ASSET_FONT_INVALID"));
    }

    #[test]
    fn corrupt_table_directories_are_refused() {
        let with = |change: &dyn Fn(&mut Vec<Table>)| {
            let mut tables = font_tables();
            change(&mut tables);
            font_code(&woff2_with(&tables, 64, |_| {}))
        };
        assert_eq!(
            with(&|t| t.push(known(0, 4))),
            Some("ASSET_FONT_INVALID"),
            "duplicate"
        );
        assert_eq!(
            with(&|t| {
                t.remove(1);
            }),
            Some("ASSET_FONT_INVALID"),
            "no head"
        );
        assert_eq!(
            with(&|t| {
                t.remove(0);
            }),
            Some("ASSET_FONT_INVALID"),
            "no cmap"
        );
        assert_eq!(
            with(&|t| {
                t.pop();
            }),
            Some("ASSET_FONT_INVALID"),
            "glyf without loca"
        );
        assert_eq!(
            with(&|t| t[9].transformed = Some(4)),
            Some("ASSET_FONT_INVALID"),
            "transformed loca with data"
        );
        assert_eq!(
            with(&|t| t[2].flags |= 0x80),
            Some("ASSET_FONT_INVALID"),
            "reserved transform"
        );
        assert_eq!(
            with(&|t| t.push(Table {
                flags: 63,
                tag: Some(*b"a\0bc"),
                original: 4,
                transformed: None
            })),
            Some("ASSET_FONT_INVALID"),
            "unprintable tag"
        );
        // UIntBase128 with a leading zero byte.
        let leading_zero = woff2_with(&font_tables(), 64, |bytes| {
            bytes.insert(49, 0x80);
        });
        assert_eq!(font_code(&leading_zero), Some("ASSET_FONT_INVALID"));
    }

    #[test]
    fn fonts_that_would_decompress_past_the_bound_are_refused() {
        let many: Vec<Table> = (0..u32::from(MAX_FONT_TABLES) + 1)
            .map(|i| Table {
                flags: 63,
                tag: Some([
                    b'a' + (i / 26 / 26 % 26) as u8,
                    b'a' + (i / 26 % 26) as u8,
                    b'a' + (i % 26) as u8,
                    b'z',
                ]),
                original: 4,
                transformed: None,
            })
            .collect();
        assert_eq!(
            font_code(&woff2_with(&many, 8, |_| {})),
            Some("ASSET_FONT_TOO_LARGE")
        );
        let declared = woff2_with(&font_tables(), 64, |bytes| {
            bytes[16..20].copy_from_slice(&(MAX_FONT_SFNT_BYTES + 1).to_be_bytes());
        });
        assert_eq!(font_code(&declared), Some("ASSET_FONT_TOO_LARGE"));
        let mut tables = font_tables();
        tables[5].original = MAX_FONT_SFNT_BYTES;
        let big_table = woff2_with(&tables, 64, |bytes| {
            bytes[16..20].copy_from_slice(&1000u32.to_be_bytes());
        });
        assert_eq!(font_code(&big_table), Some("ASSET_FONT_TOO_LARGE"));
    }

    #[test]
    fn kinds_follow_the_extension() {
        assert_eq!(AssetKind::of_path("a/b.png"), Some(AssetKind::Png));
        assert_eq!(AssetKind::of_path("b.jpeg"), Some(AssetKind::Jpeg));
        assert_eq!(AssetKind::of_path("b.JPG"), None);
        assert_eq!(AssetKind::of_path(".png"), None);
        assert_eq!(AssetKind::of_path("a.png/b"), None);
        assert_eq!(AssetKind::Woff2.mime_type(), "font/woff2");
        assert!(is_image_path("a/logo.svg") && is_image_path("x.gif"));
        assert!(!is_image_path("f.woff2") && is_font_path("f.woff2"));
        assert!(!is_image_path("a.svg.txt") && !is_image_path(".svg"));
        assert_eq!(code("a.bmp", b"BM"), Some("PATH_EXTENSION"));
    }
}
