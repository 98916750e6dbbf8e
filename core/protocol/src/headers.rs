//! Header rules: which received headers are stored, which stored headers a publisher may
//! send, how the relay stamps its four headers so that a sender cannot spoof them,
//! correlation ids, and error-text redaction.
//!
//! The payload travels as the stored JSON, re-encoded, over the relay's own connections, so
//! the fields that describe the sender's connection or its encoding of the body (framing
//! and hop-by-hop fields, [`is_hop_by_hop`]) are neither stored nor sent: a stale
//! `Content-Length` would truncate or stall the delivery, `Transfer-Encoding` empty it and
//! `Host` misroute it. A header a receiver could never accept (a name that is not an HTTP
//! token, a value with a control character) is refused at receipt ([`check_field`]) and
//! skipped, with a warning, by the publishers ([`forwardable`]).

use serde_json::{Map, Value};
use uuid::Uuid;

/// The most characters of `correlation_id`.
pub const MAX_CORRELATION_CHARS: usize = 128;

/// The inbox row id of a relayed message.
pub const X_INBOX_ID: &str = "x-inbox-id";
/// The source name of a relayed message.
pub const X_SOURCE: &str = "x-source";
/// The inbox idempotency key, unchanged; receivers deduplicate relay traffic on it.
pub const X_IDEMPOTENCY_KEY: &str = "x-idempotency-key";
/// The correlation id that follows a message through logs.
pub const X_CORRELATION_ID: &str = "X-Correlation-Id";

/// Headers never stored from an HTTP request, whatever their case.
pub const NEVER_STORED: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// Fields that belong to one connection or to the sender's framing of the body, not to the
/// message (RFC 9110 §7.6.1 connection options, §8.6 `Content-Length`, §7.2 `Host`, §10.1.1
/// `Expect`, RFC 9112 `Transfer-Encoding`, RFC 9113 `HTTP2-Settings`). `Content-Encoding` is
/// among them because the relay sends the stored JSON unencoded.
pub const HOP_BY_HOP: [&str; 14] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
    "host",
    "expect",
    "http2-settings",
];

/// True for a framing or hop-by-hop field ([`HOP_BY_HOP`]), in any letter case.
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Why a header can never be sent: its name is not an HTTP token, or its value holds a
/// control character. The text names the header (never its value: it may be a secret).
pub fn check_field(name: &str, value: &str) -> Result<(), String> {
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(format!(
            "header name {name:?} is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~ only)"
        ));
    }
    if let Some((at, c)) = value
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && *c != '\t')
    {
        return Err(format!("header {name} holds the control character U+{:04X} at character {at}; header values cannot carry it", c as u32));
    }
    Ok(())
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The position and character of the first control character in `text`, if any. Keys,
/// event types and aggregate ids become header values and topics, which cannot carry one.
pub fn first_control(text: &str) -> Option<(usize, char)> {
    text.chars().enumerate().find(|(_, c)| c.is_control())
}

/// Whether a publisher may send the stored header `name: value`: not a framing or
/// hop-by-hop field, and a sendable name and value. A row written by hand or by an older
/// version may hold such a header; the publisher skips it rather than fail a good message.
pub fn forwardable(name: &str, value: &str) -> Result<(), String> {
    if is_hop_by_hop(name) {
        return Err(format!(
            "header {name} describes the sender's connection, not the message"
        ));
    }
    check_field(name, value)
}

/// Header names a publisher stamps itself (`X-Message-Id`, `X-Topic`, `X-Attempt`,
/// `X-Message-Key`, `Content-Type`) and the relay headers of a relayed inbox row
/// (`x-inbox-id`, `x-source`, `x-idempotency-key`): an application's row may not carry them,
/// or a receiver could be told a false id, topic or origin.
pub const RELAY_OWNED: [&str; 8] = [
    "x-message-id",
    "x-topic",
    "x-attempt",
    "x-message-key",
    "content-type",
    X_INBOX_ID,
    X_SOURCE,
    X_IDEMPOTENCY_KEY,
];

/// Whether an application may publish an outbox row with the header `name: value`: a
/// forwardable field ([`forwardable`]) that QueueBox does not own ([`RELAY_OWNED`]).
pub fn publishable(name: &str, value: &str) -> Result<(), String> {
    if RELAY_OWNED.iter().any(|h| h.eq_ignore_ascii_case(name)) {
        return Err(format!(
            "header {name} is set by QueueBox itself and cannot be published"
        ));
    }
    forwardable(name, value)
}

/// The bytes a header map takes on a row, counted as names plus values (the bound
/// `inbox.maxHeaderBytes` applies to this).
pub fn stored_size(headers: &Map<String, Value>) -> usize {
    headers
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or_else(|| v.to_string().len(), str::len))
        .sum()
}

/// The longest `last_error` text written to a row.
pub const MAX_ERROR_CHARS: usize = 2000;

/// Sets `name` to `value`, first removing every header of that name in any letter case.
pub fn set_replacing(headers: &mut Map<String, Value>, name: &str, value: &str) {
    headers.retain(|k, _| !k.eq_ignore_ascii_case(name));
    headers.insert(name.to_string(), Value::String(value.to_string()));
}

/// The headers of the outbox row the relay writes for an inbox row: the received headers,
/// then the four relay headers, each replacing a received one of that name in any case.
pub fn relay_headers(
    received: &Map<String, Value>,
    inbox_id: Uuid,
    source: &str,
    idempotency_key: &str,
    correlation_id: &str,
) -> Map<String, Value> {
    let mut h = received.clone();
    set_replacing(&mut h, X_INBOX_ID, &inbox_id.to_string());
    set_replacing(&mut h, X_SOURCE, source);
    set_replacing(&mut h, X_IDEMPOTENCY_KEY, idempotency_key);
    set_replacing(&mut h, X_CORRELATION_ID, correlation_id);
    h
}

/// The headers stored on an inbox row: one string per name (the last value of a repeated
/// name wins), names as received, minus credentials, the source's own auth header, the
/// framing and hop-by-hop fields ([`HOP_BY_HOP`]), every field the sender's
/// `Connection` header names as connection-specific, and `traceparent` / `tracestate`
/// (validated into the row's own columns by [`crate::trace`], never relayed as sent).
pub fn stored_headers<'a>(
    received: impl IntoIterator<Item = (&'a str, &'a str)>,
    auth_header: Option<&str>,
) -> Map<String, Value> {
    let received: Vec<(&str, &str)> = received.into_iter().collect();
    let connection_options: Vec<&str> = received
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(',').map(str::trim))
        .filter(|o| !o.is_empty())
        .collect();
    let mut out = Map::new();
    for (name, value) in received {
        let secret = NEVER_STORED.iter().any(|n| n.eq_ignore_ascii_case(name))
            || auth_header.is_some_and(|a| a.eq_ignore_ascii_case(name));
        let hop = is_hop_by_hop(name)
            || connection_options
                .iter()
                .any(|o| o.eq_ignore_ascii_case(name));
        let trace = name.eq_ignore_ascii_case(crate::trace::TRACEPARENT)
            || name.eq_ignore_ascii_case(crate::trace::TRACESTATE);
        if !secret && !hop && !trace {
            set_replacing(&mut out, name, value);
        }
    }
    out
}

/// A usable correlation id: control characters removed, at most 128 characters, and a
/// fresh UUID when the sender gave none or only blanks.
pub fn correlation_id(received: Option<&str>) -> String {
    let cleaned: String = received
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_CORRELATION_CHARS)
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() {
        Uuid::new_v4().to_string()
    } else {
        cleaned.to_string()
    }
}

/// Error text fit for a row's `last_error` and for logs: passwords in URLs and
/// `password=`/`secret=`/`token=` pairs masked, the given secrets masked, and at most
/// [`MAX_ERROR_CHARS`] characters.
pub fn redact_error(text: &str, secrets: &[&str]) -> String {
    let mut s = mask_url_passwords(text);
    s = mask_pairs(&s);
    for secret in secrets.iter().filter(|x| x.len() >= 4) {
        s = s.replace(secret, "***");
    }
    if s.chars().count() > MAX_ERROR_CHARS {
        s = s.chars().take(MAX_ERROR_CHARS - 1).collect::<String>() + "…";
    }
    s
}

/// `scheme://user:secret@host` → `scheme://user:***@host`.
fn mask_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        let (head, tail) = rest.split_at(pos + 3);
        out.push_str(head);
        // The authority ends at the first '/', whitespace or end; the password sits between
        // the first ':' and the last '@' inside it.
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match (authority.find(':'), authority.rfind('@')) {
            (Some(colon), Some(at)) if colon < at => {
                out.push_str(&authority[..colon + 1]);
                out.push_str("***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// `password=abc`, `pwd=abc;`, `token: abc` → the value masked up to `;`, `&`, `,` or space.
fn mask_pairs(text: &str) -> String {
    const KEYS: [&str; 6] = ["password", "pwd", "secret", "token", "apikey", "api_key"];
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < text.len() {
        let hit = KEYS.iter().find(|k| {
            lower[i..].starts_with(*k) && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric())
        });
        if let Some(k) = hit {
            let mut j = i + k.len();
            while j < text.len() && bytes[j] == b' ' {
                j += 1;
            }
            if j < text.len() && (bytes[j] == b'=' || bytes[j] == b':') {
                j += 1;
                while j < text.len() && bytes[j] == b' ' {
                    j += 1;
                }
                let start = j;
                while j < text.len()
                    && !matches!(bytes[j], b';' | b'&' | b',' | b' ' | b'\n' | b'"' | b'\'')
                {
                    j += 1;
                }
                out.push_str(&text[i..start]);
                if j > start {
                    out.push_str("***");
                }
                i = j;
                continue;
            }
        }
        let ch = text[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_headers_replace_spoofed_names_in_any_case() {
        let mut received = Map::new();
        received.insert("X-SOURCE".into(), "evil".into());
        received.insert("x-Inbox-Id".into(), "spoof".into());
        received.insert("x-custom".into(), "kept".into());
        let id = Uuid::new_v4();
        let h = relay_headers(&received, id, "orders", "k1", "c1");
        assert_eq!(h.get("x-source"), Some(&Value::from("orders")));
        assert!(!h.contains_key("X-SOURCE") && !h.contains_key("x-Inbox-Id"));
        assert_eq!(h.get("x-inbox-id"), Some(&Value::from(id.to_string())));
        assert_eq!(h.get("x-custom"), Some(&Value::from("kept")));
        assert_eq!(h.len(), 5);
    }

    #[test]
    fn framing_and_connection_fields_are_never_stored() {
        let received = [
            ("Content-Length", "37"),
            ("Transfer-Encoding", "chunked"),
            ("Host", "relay:8080"),
            ("Connection", "keep-alive, X-Hop"),
            ("X-Hop", "one hop only"),
            ("Expect", "100-continue"),
            ("Content-Type", "application/json"),
            ("X-Tenant", "acme"),
        ];
        let h = stored_headers(received, None);
        let names: Vec<&str> = h.keys().map(String::as_str).collect();
        assert_eq!(names, ["Content-Type", "X-Tenant"]);
    }

    #[test]
    fn a_field_with_a_control_character_or_a_bad_name_cannot_be_sent() {
        assert!(check_field("X-Ok", "tab\tis fine, é too").is_ok());
        assert!(check_field("X-Bad", "line\nbreak")
            .unwrap_err()
            .contains("U+000A"));
        assert!(check_field("X-Bad", "nul\0")
            .unwrap_err()
            .contains("U+0000"));
        assert!(check_field("Bad Name", "v")
            .unwrap_err()
            .contains("not an HTTP token"));
        assert!(forwardable("content-length", "3").is_err());
        assert!(forwardable("x-custom", "3").is_ok());
    }

    #[test]
    fn relay_owned_headers_cannot_be_published_in_any_case() {
        for name in ["X-Message-Id", "x-topic", "X-SOURCE", "Content-Type"] {
            let err = publishable(name, "v").unwrap_err();
            assert!(err.contains("set by QueueBox itself"), "{name}: {err}");
        }
        assert!(publishable("X-Tenant", "acme").is_ok());
        // Not relay-owned, still not forwardable: the framing rule applies too.
        assert!(publishable("Content-Length", "3").is_err());
    }

    #[test]
    fn stored_size_counts_names_and_values() {
        let mut h = Map::new();
        h.insert("ab".into(), "cde".into());
        h.insert("gh".into(), Value::from(12345)); // not a string: its JSON text, 5 bytes
        assert_eq!(stored_size(&h), 2 + 3 + 2 + 5);
        assert_eq!(stored_size(&Map::new()), 0);
    }

    #[test]
    fn credentials_the_auth_header_and_trace_fields_are_never_stored() {
        let received = [
            ("Authorization", "Bearer t"),
            ("Cookie", "s=1"),
            ("X-Api-Key", "k"),
            ("traceparent", "00-abc-def-01"),
            ("TraceState", "a=b"),
            ("X-Tenant", "acme"),
        ];
        let h = stored_headers(received, Some("x-api-key"));
        let names: Vec<&str> = h.keys().map(String::as_str).collect();
        assert_eq!(names, ["X-Tenant"]);
        // Without an auth header of its own, the source keeps X-Api-Key as a plain field.
        let h = stored_headers(received, None);
        assert!(h.contains_key("X-Api-Key") && !h.contains_key("Authorization"));
    }

    #[test]
    fn a_correlation_id_is_cleaned_bounded_or_made_fresh() {
        assert_eq!(correlation_id(Some("  order-7\u{7}  ")), "order-7");
        assert_eq!(
            correlation_id(Some(&"c".repeat(500))).len(),
            MAX_CORRELATION_CHARS
        );
        for blank in [None, Some(""), Some("   "), Some("\u{1}\u{2}")] {
            let id = correlation_id(blank);
            assert!(Uuid::parse_str(&id).is_ok(), "{blank:?} gave {id}");
            assert_ne!(id, correlation_id(blank), "a fresh id each time");
        }
    }

    #[test]
    fn redaction_masks_given_secrets_of_four_or_more_characters() {
        assert_eq!(
            redact_error("key abcd and abc", &["abcd"]),
            "key *** and abc"
        );
        // Shorter values would mask ordinary words: they are left alone.
        assert_eq!(redact_error("key abc", &["abc"]), "key abc");
        // Exactly the bound is not cut; one more is, with an ellipsis as its last character.
        let at_bound = "x".repeat(MAX_ERROR_CHARS);
        assert_eq!(redact_error(&at_bound, &[]), at_bound);
        let over = redact_error(&"x".repeat(MAX_ERROR_CHARS + 1), &[]);
        assert_eq!(over.chars().count(), MAX_ERROR_CHARS);
        assert!(over.ends_with('…'));
    }

    #[test]
    fn url_passwords_are_masked_only_inside_the_authority() {
        // The authority ends at whitespace as well as at '/'.
        assert_eq!(
            mask_url_passwords("amqp://u:p@h failed, retry ftp://v:q@i/x"),
            "amqp://u:***@h failed, retry ftp://v:***@i/x"
        );
        // A user without a password, a port after the host: nothing to mask.
        let no_password = "postgres://app@db:5432/x";
        assert_eq!(mask_url_passwords(no_password), no_password);
        // An '@' after the authority (in the path) is not a password's end.
        let at_in_path = "http://host:8080/a@b";
        assert_eq!(mask_url_passwords(at_in_path), at_in_path);
    }

    #[test]
    fn secret_pairs_are_masked_at_a_word_start_only() {
        assert_eq!(mask_pairs("password=abc"), "password=***");
        assert_eq!(mask_pairs("token : abc,x"), "token : ***,x");
        // Inside a longer word it is not the key: "mypassword=abc" names something else.
        assert_eq!(mask_pairs("mypassword=abc"), "mypassword=abc");
    }

    /// The scanner's edges: a key, its spaces or its value at the very end of the text (each
    /// index stops at the length, never reads past it), a key word not followed by `=` or `:`
    /// (prose, left alone), and an empty value (nothing to mask, so no `***`).
    #[test]
    fn secret_pairs_end_of_text_prose_and_empty_values() {
        assert_eq!(mask_pairs("bad token"), "bad token");
        assert_eq!(mask_pairs("bad token  "), "bad token  ");
        assert_eq!(mask_pairs("token: "), "token: ");
        assert_eq!(mask_pairs("a pwd=hunter2"), "a pwd=***");
        assert_eq!(mask_pairs("the token expired"), "the token expired");
        assert_eq!(mask_pairs("password=;x"), "password=;x");
        assert_eq!(mask_pairs("password= ,x"), "password= ,x");
    }

    #[test]
    fn redaction_masks_passwords() {
        let s = redact_error(
            "connect postgres://app:hunter2@db:5432/x failed; password=abc;x",
            &[],
        );
        assert_eq!(
            s,
            "connect postgres://app:***@db:5432/x failed; password=***;x"
        );
        assert_eq!(
            redact_error(&"x".repeat(5000), &[]).chars().count(),
            MAX_ERROR_CHARS
        );
    }
}
