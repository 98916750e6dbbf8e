//! The one `{{ name }}` template renderer of the relay. Two vocabularies use it:
//!
//! - a source's relay topic (`orders.{{ eventType }}`): `source` and `eventType`, checked at
//!   load ([`TOPIC_PLACEHOLDERS`]) and rendered by [`render_topic`];
//! - a broker destination's address (`exchange`, `subject`, `topic`, routing and record
//!   keys): `topic`, `key`, `aggregateType`, `payload.<field>`, checked and rendered by
//!   `queuebox-brokers`, which owns the outbox message the values come from.
//!
//! The syntax — where a placeholder starts and ends, that an unclosed `{{` is an error, that
//! spaces around a name do not count — lives only here; each user supplies its names' values.

use std::borrow::Cow;

/// The placeholders a source's relay topic template may use.
pub const TOPIC_PLACEHOLDERS: [&str; 2] = ["source", "eventType"];

/// Why a template text is not a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A `{{` with no `}}` after it.
    #[error("unclosed `{{{{` in `{template}`")]
    Unclosed { template: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    /// The name between `{{` and `}}`, without the spaces around it.
    Placeholder(String),
}

/// A template parsed once (at start-up) and rendered per message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

impl Template {
    /// Splits `text` into literal text and `{{ name }}` placeholders. Any name parses; the
    /// caller decides which names its vocabulary allows ([`Template::placeholders`]).
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_string()));
            }
            let after = &rest[start + 2..];
            let end = after.find("}}").ok_or_else(|| TemplateError::Unclosed {
                template: text.to_string(),
            })?;
            parts.push(Part::Placeholder(after[..end].trim().to_string()));
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template {
            text: text.to_string(),
            parts,
        })
    }

    /// The text the template was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The placeholder names, in order (a repeated name appears each time).
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Placeholder(name) => Some(name.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The literal text with each placeholder replaced by `value(name)`; a placeholder
    /// without a value renders as empty text.
    pub fn render<'v>(&self, mut value: impl FnMut(&str) -> Option<Cow<'v, str>>) -> String {
        let mut out = String::with_capacity(self.text.len());
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Placeholder(name) => out.push_str(value(name).as_deref().unwrap_or("")),
            }
        }
        out
    }
}

/// Renders a source's relay topic template; a missing event type renders as empty, and the
/// result is trimmed (an empty topic dead-letters the inbox row). [`crate::load`] refuses a
/// topic template that does not parse, so the unparsed text is returned only for a template
/// that never went through it.
pub fn render_topic(template: &str, source: &str, event_type: Option<&str>) -> String {
    let rendered = match Template::parse(template) {
        Ok(t) => t.render(|name| match name {
            "source" => Some(Cow::Borrowed(source)),
            "eventType" => event_type.map(Cow::Borrowed),
            _ => None,
        }),
        Err(_) => template.to_string(),
    };
    rendered.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &str, values: &[(&str, &str)]) -> String {
        let t = Template::parse(text).unwrap();
        t.render(|name| {
            values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| Cow::Owned(v.to_string()))
        })
    }

    #[test]
    fn text_and_placeholders_render_in_order() {
        assert_eq!(
            render("a.{{x}}.b.{{y}}", &[("x", "1"), ("y", "2")]),
            "a.1.b.2"
        );
    }

    #[test]
    fn spaces_around_a_name_do_not_count() {
        assert_eq!(render("{{   x }}", &[("x", "1")]), "1");
    }

    #[test]
    fn a_placeholder_without_a_value_renders_as_empty_text() {
        assert_eq!(render("a.{{ nope }}.b", &[]), "a..b");
    }

    #[test]
    fn a_template_without_placeholders_renders_as_itself() {
        assert_eq!(render("orders.created", &[]), "orders.created");
    }

    #[test]
    fn placeholders_are_listed_in_order_with_repeats() {
        let t = Template::parse("{{ b }}{{a}}.{{ b }}").unwrap();
        assert_eq!(t.placeholders().collect::<Vec<_>>(), ["b", "a", "b"]);
    }

    #[test]
    fn an_unclosed_brace_is_an_error_naming_the_template() {
        let e = Template::parse("orders.{{ eventType").unwrap_err();
        assert_eq!(e.to_string(), "unclosed `{{` in `orders.{{ eventType`");
    }

    #[test]
    fn a_topic_renders_source_and_event_type_and_is_trimmed() {
        assert_eq!(
            render_topic(" {{source}}.{{ eventType }} ", "s", Some("e")),
            "s.e"
        );
    }

    #[test]
    fn a_topic_without_an_event_type_renders_it_as_empty() {
        assert_eq!(render_topic("{{ eventType }}", "s", None), "");
    }
}
