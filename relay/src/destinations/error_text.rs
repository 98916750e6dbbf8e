//! How a failed HTTP exchange reads in a row's `last_error`: the whole error chain (reqwest
//! hides the cause, such as "connection refused", in its sources), and a response body cut
//! to the configured size. Shared by the HTTP publisher and the OAuth2 token fetch.

/// `text` cut to at most `max` bytes on a character boundary.
pub(super) fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// The error and each of its sources, joined by ": ".
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
