//! `${VAR}` substitution, relay topic templates and route globs.

use super::strict::ConfigErrors;

/// The placeholders a source's relay topic template may use.
pub const TOPIC_PLACEHOLDERS: [&str; 2] = ["source", "eventType"];

/// Replaces `${VAR}` and `${VAR:-default}`; `$${` is a literal `${`. A missing variable
/// without a default is a problem naming it.
pub(super) fn substitute_vars(text: &str, lookup: impl Fn(&str) -> Option<String>, errs: &mut ConfigErrors) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("${") {
        if pos > 0 && rest.as_bytes()[pos - 1] == b'$' {
            out.push_str(&rest[..pos - 1]);
            out.push_str("${");
            rest = &rest[pos + 2..];
            continue;
        }
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[pos..]);
            rest = "";
            break;
        };
        let inner = &after[..end];
        let (name, default) = match inner.find(":-") {
            Some(i) => (&inner[..i], Some(&inner[i + 2..])),
            None => (inner, None),
        };
        match lookup(name).filter(|v| !(v.is_empty() && default.is_some())).or(default.map(str::to_string)) {
            Some(v) => out.push_str(&v),
            None => errs.push(format!("${{{name}}}"), "environment variable is not set and the reference has no default (use ${VAR:-default})"),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The placeholder names in a `{{ name }}` template, in order.
pub fn topic_placeholders(template: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(pos) = rest.find("{{") {
        let after = &rest[pos + 2..];
        let end = after.find("}}").ok_or_else(|| format!("unclosed `{{{{` in `{template}`"))?;
        names.push(after[..end].trim().to_string());
        rest = &after[end + 2..];
    }
    Ok(names)
}

/// Renders a relay topic template; a missing event type renders as empty, and the result
/// is trimmed (an empty topic dead-letters the inbox row).
pub fn render_topic(template: &str, source: &str, event_type: Option<&str>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(pos) = rest.find("{{") {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[pos..]);
            rest = "";
            break;
        };
        match after[..end].trim() {
            "source" => out.push_str(source),
            "eventType" => out.push_str(event_type.unwrap_or("")),
            _ => {}
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// Anchored glob over a dotted topic: `*` is one segment without dots, `**` is any text
/// including dots, every other character is literal.
pub fn glob_match(pattern: &str, topic: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p {
            [] => t.is_empty(),
            [b'*', b'*', rest @ ..] => (0..=t.len()).any(|i| go(rest, &t[i..])),
            [b'*', rest @ ..] => {
                let mut i = 0;
                loop {
                    if go(rest, &t[i..]) {
                        return true;
                    }
                    if i == t.len() || t[i] == b'.' {
                        return false;
                    }
                    i += 1;
                }
            }
            [c, rest @ ..] => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(pattern.as_bytes(), topic.as_bytes())
}
