//! `${VAR}` and `${VAR:-default}` substitution in the file's text, and the problem each
//! unset variable causes, named at the key that references it.

use crate::strict::ConfigErrors;

/// Replaces `${VAR}` and `${VAR:-default}`; `$${` is a literal `${`. Returns the text and
/// the names of the variables that are unset and have no default, in order; the caller
/// reports each at the key that references it ([`unset_var_problems`]).
pub(super) fn substitute_vars(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> (String, Vec<String>) {
    let mut missing = Vec::new();
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
        match lookup(name)
            .filter(|v| !(v.is_empty() && default.is_some()))
            .or(default.map(str::to_string))
        {
            Some(v) => out.push_str(&v),
            None => {
                if !missing.iter().any(|m| m == name) {
                    missing.push(name.to_string());
                }
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    (out, missing)
}

/// One problem per key that references an unset variable, named by its key path (read from
/// `raw`, the text before substitution) and naming the variable; returns the key paths too,
/// so the caller can drop the errors the empty value then causes at the same keys. A
/// reference found in no key or value sits in a comment and is no problem. When `raw` is
/// not YAML on its own, the problem is named after the variable alone.
pub(super) fn unset_var_problems(
    raw: &str,
    missing: &[String],
    errs: &mut ConfigErrors,
) -> Vec<String> {
    let tree: Option<serde_yaml::Value> = serde_yaml::from_str(raw).ok();
    let mut owned = Vec::new();
    for name in missing {
        let reference = format!("${{{name}}}");
        let message = format!("environment variable `{name}` is not set and `{reference}` has no default (use ${{{name}:-default}})");
        match &tree {
            Some(tree) => {
                let mut at = Vec::new();
                paths_referencing(tree, "", &reference, &mut at);
                for path in at {
                    errs.push(path.clone(), message.clone());
                    owned.push(path);
                }
            }
            None => errs.push(reference, message),
        }
    }
    owned
}

/// The key paths under `path` whose key or scalar value holds `reference` (not escaped as `$${`).
fn paths_referencing(v: &serde_yaml::Value, path: &str, reference: &str, out: &mut Vec<String>) {
    use serde_yaml::Value;
    let holds = |s: &str| {
        s.match_indices(reference)
            .any(|(i, _)| i == 0 || s.as_bytes()[i - 1] != b'$')
    };
    match v {
        Value::String(s) if holds(s) => out.push(if path.is_empty() {
            "<root>".into()
        } else {
            path.to_string()
        }),
        Value::Mapping(m) => {
            for (k, child) in m {
                let key = match k {
                    Value::String(s) => s.clone(),
                    other => serde_yaml::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                let child_path = crate::strict::join(path, &key);
                if holds(&key) {
                    out.push(child_path);
                } else {
                    paths_referencing(child, &child_path, reference, out);
                }
            }
        }
        Value::Sequence(items) => {
            for (i, child) in items.iter().enumerate() {
                paths_referencing(child, &format!("{path}[{i}]"), reference, out);
            }
        }
        Value::Tagged(t) => paths_referencing(&t.value, path, reference, out),
        _ => {}
    }
}
