//! W3C Trace Context (`traceparent`, `tracestate`) as QueueBox carries it: read from a
//! received message, validated, stored in the inbox row's own columns (data the relay owns,
//! never one of the stored headers), and stamped on the outbox row the push relay writes,
//! from where every publisher sends it like any row header.
//!
//! Why columns and not a stored header: stored headers are what the sender said, relayed
//! under the relay's header rules. A trace context that rode along as a header could be
//! forged past those rules (a malformed value, two values, a value on a row the relay
//! re-stamps). Here the received headers of those names are always dropped at receipt
//! ([`strip`]) and on the relayed row ([`stamp`]), and only a context that passed
//! [`TraceContext::from_headers`] is emitted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The W3C header carrying version, trace id, parent id and flags.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header carrying vendor-specific trace state; meaningful only with a traceparent.
pub const TRACESTATE: &str = "tracestate";
/// The characters of a version-00 traceparent (`00-<32 hex>-<16 hex>-<2 hex>`), the column size.
pub const TRACEPARENT_CHARS: usize = 55;
/// The most characters of tracestate kept (W3C: a receiver may drop a longer one); the column size.
pub const MAX_TRACESTATE_CHARS: usize = 512;

/// A validated trace context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    /// Always the version-00 form, lower-case hex.
    pub traceparent: String,
    pub tracestate: Option<String>,
}

/// Why a received trace context was not kept (logged at debug by the caller; the message
/// itself is stored either way).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ignored {
    #[error("traceparent is not a W3C trace context: {0}")]
    Traceparent(&'static str),
    #[error("the message carries {0} traceparent headers; W3C says to ignore them all")]
    Repeated(usize),
    #[error("tracestate dropped (the traceparent is kept): {0}")]
    Tracestate(&'static str),
}

impl TraceContext {
    /// The trace context of received headers (any letter case), with what was ignored:
    /// `(None, [])` without a traceparent; `(None, [why])` for a malformed or repeated one
    /// (its tracestate goes with it); `(Some, [why])` when only the tracestate was dropped.
    /// Repeated tracestate headers are joined with `,` (RFC 9110 list semantics).
    pub fn from_headers<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (Option<TraceContext>, Vec<Ignored>) {
        let mut parents = Vec::new();
        let mut states = Vec::new();
        for (name, value) in headers {
            if name.eq_ignore_ascii_case(TRACEPARENT) {
                parents.push(value);
            } else if name.eq_ignore_ascii_case(TRACESTATE) {
                states.push(value.trim());
            }
        }
        let parent = match parents.as_slice() {
            [] => return (None, Vec::new()),
            [one] => match parse_traceparent(one) {
                Ok(p) => p,
                Err(why) => return (None, vec![Ignored::Traceparent(why)]),
            },
            many => return (None, vec![Ignored::Repeated(many.len())]),
        };
        let state = states
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(",");
        let (tracestate, ignored) = if state.is_empty() {
            (None, Vec::new())
        } else {
            match check_tracestate(&state) {
                Ok(()) => (Some(state), Vec::new()),
                Err(why) => (None, vec![Ignored::Tracestate(why)]),
            }
        };
        (
            Some(TraceContext {
                traceparent: parent,
                tracestate,
            }),
            ignored,
        )
    }

    /// Whether the fields hold what [`from_headers`](Self::from_headers) would keep (for a
    /// context built by hand), naming the bad field.
    pub fn check(&self) -> Result<(), String> {
        match parse_traceparent(&self.traceparent) {
            Ok(p) if p == self.traceparent => {}
            Ok(_) => return Err("trace.traceparent must be in its version-00 form".into()),
            Err(why) => return Err(format!("trace.traceparent: {why}")),
        }
        match &self.tracestate {
            Some(s) => check_tracestate(s).map_err(|why| format!("trace.tracestate: {why}")),
            None => Ok(()),
        }
    }

    /// The trace id (the 32 hex digits after the version).
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }
}

/// A traceparent in its version-00 form, or why it is not one. Follows W3C Trace Context
/// level 1 §3.2: lower-case hex only; version `ff` invalid; a trace id or parent id of all
/// zeros invalid; a future version may append fields after a `-`, which are dropped (the
/// relay speaks version 00).
pub fn parse_traceparent(value: &str) -> Result<String, &'static str> {
    let v = value.trim_matches([' ', '\t']);
    // Every check below indexes bytes; a multi-byte character would put an index inside it
    // (a panic, found by fuzzing a header "0ۛ4bf…"), and no valid traceparent has one.
    if !v.is_ascii() {
        return Err("holds a character that is not ASCII");
    }
    if v.len() < TRACEPARENT_CHARS {
        return Err("shorter than 55 characters");
    }
    let hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let (version, rest) = v.split_at(2);
    if !hex(version) {
        return Err("the version is not two lower-case hex digits");
    }
    if version == "ff" {
        return Err("version ff is invalid");
    }
    if version == "00" && v.len() != TRACEPARENT_CHARS {
        return Err("a version-00 traceparent has exactly 55 characters");
    }
    if version != "00" && v.len() > TRACEPARENT_CHARS && v.as_bytes()[TRACEPARENT_CHARS] != b'-' {
        return Err("fields after the flags must follow a '-'");
    }
    let b = rest.as_bytes();
    if b[0] != b'-' || b[33] != b'-' || b[50] != b'-' {
        return Err("the fields are not separated by '-' as 00-<trace id>-<parent id>-<flags>");
    }
    let (trace_id, parent_id, flags) = (&rest[1..33], &rest[34..50], &rest[51..53]);
    if !hex(trace_id) || !hex(parent_id) || !hex(flags) {
        return Err("trace id, parent id and flags must be lower-case hex");
    }
    if trace_id.bytes().all(|b| b == b'0') {
        return Err("the trace id is all zeros");
    }
    if parent_id.bytes().all(|b| b == b'0') {
        return Err("the parent id is all zeros");
    }
    Ok(format!("00-{trace_id}-{parent_id}-{flags}"))
}

/// W3C §3.3: at most 32 comma-separated `key=value` members, printable ASCII values without
/// `,` or `=`; and at most [`MAX_TRACESTATE_CHARS`] characters.
fn check_tracestate(state: &str) -> Result<(), &'static str> {
    if state.len() > MAX_TRACESTATE_CHARS {
        return Err("longer than 512 characters");
    }
    let members: Vec<&str> = state
        .split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty())
        .collect();
    if members.len() > 32 {
        return Err("more than 32 list members");
    }
    for m in members {
        let Some((key, value)) = m.split_once('=') else {
            return Err("a list member is not key=value");
        };
        let key_ok = !key.is_empty()
            && key.len() <= 256
            && key
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'*' | b'/' | b'@'));
        if !key_ok {
            return Err("a list member's key is not lower-case letters, digits and _-*/@");
        }
        let value_ok = !value.is_empty()
            && value.len() <= 256
            && value
                .bytes()
                .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=');
        if !value_ok {
            return Err("a list member's value is not printable ASCII without ',' and '='");
        }
    }
    Ok(())
}

/// Drops every `traceparent` / `tracestate` header (any letter case) from stored headers:
/// the trace context lives in the row's columns, never among the sender's headers.
pub fn strip(headers: &mut Map<String, Value>) {
    headers
        .retain(|k, _| !k.eq_ignore_ascii_case(TRACEPARENT) && !k.eq_ignore_ascii_case(TRACESTATE));
}

/// The relayed row's trace headers: whatever the headers hold under those names is removed
/// (a row stored before the trace columns existed may carry a sender's value), then the
/// inbox row's own context, if any, is set.
pub fn stamp(headers: &mut Map<String, Value>, trace: Option<&TraceContext>) {
    strip(headers);
    if let Some(t) = trace {
        headers.insert(TRACEPARENT.into(), Value::String(t.traceparent.clone()));
        if let Some(s) = &t.tracestate {
            headers.insert(TRACESTATE.into(), Value::String(s.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn of(h: &[(&str, &str)]) -> (Option<TraceContext>, Vec<Ignored>) {
        TraceContext::from_headers(h.iter().copied())
    }

    #[test]
    fn a_valid_traceparent_and_tracestate_are_kept() {
        let (t, ignored) = of(&[("TraceParent", GOOD), ("tracestate", "congo=t61rcWkgMzE")]);
        let t = t.unwrap();
        assert!(ignored.is_empty());
        assert_eq!(t.traceparent, GOOD);
        assert_eq!(t.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
    }

    #[test]
    fn malformed_traceparents_are_ignored_with_their_tracestate() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            // Multi-byte characters where the checks index bytes (fuzz finds: they panicked).
            "0\u{6db}4bf;2f3577b34da6a3ce929d0e0e4736-05f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47\u{e9}-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\u{e9}",
            // One wrong separator, parent id or flags alone: each is checked on its own.
            "00x4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736x00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7x01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bG-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
            // A future version's extra fields follow a '-', never the flags directly.
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        ] {
            let (t, ignored) = of(&[("traceparent", bad), ("tracestate", "a=b")]);
            assert_eq!(t, None, "{bad:?}");
            assert!(matches!(ignored[..], [Ignored::Traceparent(_)]), "{bad:?}");
        }
        let (t, ignored) = of(&[("traceparent", GOOD), ("traceparent", GOOD)]);
        assert_eq!((t, ignored), (None, vec![Ignored::Repeated(2)]));
    }

    #[test]
    fn a_future_version_is_read_as_version_00() {
        let v = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later";
        assert_eq!(parse_traceparent(v).unwrap(), GOOD);
        // Exactly the 55 characters of version 00, with nothing after the flags.
        let exact = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(parse_traceparent(exact).unwrap(), GOOD);
    }

    /// A context built by hand must hold exactly what receipt would keep: the version-00
    /// form (not a padded or future one) and a valid tracestate.
    #[test]
    fn a_context_built_by_hand_is_checked_field_by_field() {
        let ctx = |p: &str, s: Option<&str>| TraceContext {
            traceparent: p.into(),
            tracestate: s.map(String::from),
        };
        assert_eq!(ctx(GOOD, Some("a=1")).check(), Ok(()));
        let padded = format!(" {GOOD}");
        assert!(ctx(&padded, None)
            .check()
            .unwrap_err()
            .contains("version-00 form"));
        assert!(ctx("00-xyz", None)
            .check()
            .unwrap_err()
            .starts_with("trace.traceparent:"));
        assert!(ctx(GOOD, Some("A=1"))
            .check()
            .unwrap_err()
            .starts_with("trace.tracestate:"));
    }

    /// W3C's bounds, at the edge: 512 characters and 32 members fit, one more does not.
    #[test]
    fn tracestate_bounds_are_512_characters_and_32_members() {
        let two = |extra: usize| format!("a={},b={}", "x".repeat(254), "x".repeat(253 + extra));
        assert_eq!(two(0).len(), 512);
        assert_eq!(check_tracestate(&two(0)), Ok(()));
        assert!(check_tracestate(&two(1)).is_err());
        let members = |n: usize| {
            (0..n)
                .map(|i| format!("k{i}=v"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(check_tracestate(&members(32)), Ok(()));
        assert!(check_tracestate(&members(33)).is_err());
    }

    #[test]
    fn strip_drops_both_names_in_any_case_and_keeps_the_rest() {
        let mut h = Map::new();
        for k in ["TraceParent", "TRACESTATE", "x-trace"] {
            h.insert(k.into(), "v".into());
        }
        strip(&mut h);
        assert_eq!(h.keys().collect::<Vec<_>>(), ["x-trace"]);
    }

    #[test]
    fn a_bad_tracestate_is_dropped_and_the_traceparent_kept() {
        let long = format!("a={}", "x".repeat(600));
        for bad in ["no-equals", "UPPER=x", "a=b\u{7f}", long.as_str()] {
            let (t, ignored) = of(&[("traceparent", GOOD), ("tracestate", bad)]);
            assert_eq!(t.unwrap().tracestate, None, "{bad:?}");
            assert!(matches!(ignored[..], [Ignored::Tracestate(_)]), "{bad:?}");
        }
        let (t, _) = of(&[
            ("traceparent", GOOD),
            ("tracestate", "a=1"),
            ("tracestate", "b=2"),
        ]);
        assert_eq!(t.unwrap().tracestate.as_deref(), Some("a=1,b=2"));
    }

    #[test]
    fn stamp_replaces_any_header_of_those_names() {
        let mut h = Map::new();
        h.insert("TraceParent".into(), "forged".into());
        h.insert("TRACESTATE".into(), "forged=1".into());
        h.insert("x-other".into(), "kept".into());
        stamp(&mut h, None);
        assert_eq!(h.len(), 1);
        let t = TraceContext {
            traceparent: GOOD.into(),
            tracestate: None,
        };
        h.insert("traceparent".into(), "forged".into());
        stamp(&mut h, Some(&t));
        assert_eq!(h["traceparent"], GOOD);
        assert_eq!(h.len(), 2);
    }
}
