//! Escaping text into HTML, for every page and document the platform writes
//! itself (the sandbox page, the assembled resource's head, the OAuth pages).
//! The escaping itself is `html-escape`'s.

/// `text` as HTML text content: `&`, `<` and `>` escaped.
pub fn escape_text(text: &str) -> String {
    html_escape::encode_text(text).into_owned()
}

/// `text` inside a double-quoted attribute value: `&`, `<`, `>` and `"` escaped.
pub fn escape_attribute(text: &str) -> String {
    html_escape::encode_double_quoted_attribute(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_each_context_needs() {
        assert_eq!(escape_text("a<b>&\"c'"), "a&lt;b&gt;&amp;\"c'");
        assert_eq!(escape_attribute("a\"b<c>&"), "a&quot;b&lt;c&gt;&amp;");
    }
}
