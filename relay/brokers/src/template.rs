//! Address templates of broker destinations (`exchange`, `topic`, `subject`, routing and
//! record keys): `{{ topic }}`, `{{ key }}`, `{{ aggregateType }}`, `{{ payload.<field> }}`,
//! `{{ data.<field> }}` (nested with dots). Any other placeholder fails at startup, naming the
//! field and the destination. The syntax and the rendering are the relay's one template
//! renderer, [`queuebox_config::Template`]; this module holds the vocabulary, because the
//! values come from the [`OutboundMessage`] this crate owns.

use crate::error::BrokerError;
use std::borrow::Cow;

use serde_json::Value;

use crate::outbound::OutboundMessage;

/// What one placeholder of an address template stands for.
enum Placeholder<'a> {
    Topic,
    Key,
    AggregateType,
    /// `payload.a.b` or `data.a.b`: the dotted path inside the payload (`a.b`).
    Payload(&'a str),
}

impl<'a> Placeholder<'a> {
    /// The placeholder `name` stands for; `None` when it is not part of the vocabulary.
    fn of(name: &'a str) -> Option<Self> {
        match name {
            "topic" => Some(Placeholder::Topic),
            "key" => Some(Placeholder::Key),
            "aggregateType" => Some(Placeholder::AggregateType),
            n => {
                let path = n
                    .strip_prefix("payload.")
                    .or_else(|| n.strip_prefix("data."))?;
                path.split('.')
                    .all(|s| !s.is_empty())
                    .then_some(Placeholder::Payload(path))
            }
        }
    }

    /// Its value for `msg`; `None` renders as empty text.
    fn value<'m>(self, msg: &'m OutboundMessage) -> Option<Cow<'m, str>> {
        match self {
            Placeholder::Topic => Some(Cow::Borrowed(&msg.topic)),
            Placeholder::Key => msg.key.as_deref().map(Cow::Borrowed),
            Placeholder::AggregateType => msg.aggregate_type.as_deref().map(Cow::Borrowed),
            Placeholder::Payload(path) => match path
                .split('.')
                .try_fold(&msg.payload, |v, seg| v.get(seg))?
            {
                Value::String(s) => Some(Cow::Borrowed(s)),
                Value::Null => None,
                other => Some(Cow::Owned(other.to_string())),
            },
        }
    }
}

/// An address template whose placeholders were checked against the vocabulary above.
#[derive(Debug, Clone, PartialEq)]
pub struct Template(queuebox_config::Template);

impl Template {
    /// Parses `text`; `field` and `destination` name the error.
    pub fn parse(text: &str, field: &str, destination: &str) -> Result<Self, BrokerError> {
        Self::parse_at(text, format!("destinations.{destination}.{field}"))
    }

    /// Parses `text`; `path` (the key path, e.g. `routes[0].routingKeyTemplate`) names the
    /// error.
    pub fn parse_at(text: &str, path: String) -> Result<Self, BrokerError> {
        let path = || path.clone();
        let template =
            queuebox_config::Template::parse(text).map_err(|e| BrokerError::config(path(), e))?;
        if let Some(other) = template
            .placeholders()
            .find(|name| Placeholder::of(name).is_none())
        {
            return Err(BrokerError::config(path(), format!(
                "the placeholder `{{{{ {other} }}}}` is not allowed; use topic, key, aggregateType, payload.<field> or data.<field>"
            )));
        }
        Ok(Template(template))
    }

    pub fn source(&self) -> &str {
        self.0.text()
    }

    /// Renders for `msg`; a missing value renders as empty text.
    pub fn render(&self, msg: &OutboundMessage) -> String {
        self.render_or(msg, "")
    }

    /// Renders for `msg`; a placeholder without a value (absent or JSON null) renders as
    /// `missing` (a route's `routingKeyMissingFieldDefault`).
    pub fn render_or(&self, msg: &OutboundMessage, missing: &str) -> String {
        self.0.render(|name| {
            Placeholder::of(name)
                .and_then(|p| p.value(msg))
                .or(Some(Cow::Borrowed(missing)))
        })
    }
}

/// Checks a `*From` column name: exactly `aggregate_type`, `topic` or `key`.
pub fn check_from_column(column: &str, field: &str, destination: &str) -> Result<(), BrokerError> {
    match column {
        "aggregate_type" | "topic" | "key" => Ok(()),
        other => Err(BrokerError::config(
            format!("destinations.{destination}.{field}"),
            format!("`{other}` is not a column it accepts; use aggregate_type, topic or key"),
        )),
    }
}

/// The address of `msg`: the `*From` column when set, else the rendered template.
pub fn address(from: Option<&str>, template: &Template, msg: &OutboundMessage) -> String {
    match from {
        Some(col) => msg.column(col).unwrap_or("").to_string(),
        None => template.render(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg() -> OutboundMessage {
        OutboundMessage {
            id: uuid::Uuid::nil(),
            topic: "orders.created".into(),
            key: Some("o-1".into()),
            aggregate_type: Some("order".into()),
            payload: json!({"region": "eu", "n": {"m": 3}}),
            headers: Default::default(),
            attempt: 0,
            routing_key: None,
        }
    }

    #[test]
    fn a_missing_value_renders_as_the_default() {
        let t = Template::parse_at(
            "{{ payload.region }}.{{ payload.zone }}.{{ topic }}",
            "routes[0].routingKeyTemplate".into(),
        )
        .unwrap();
        assert_eq!(t.render_or(&msg(), "none"), "eu.none.orders.created");
        assert_eq!(t.render(&msg()), "eu..orders.created");
        let e = Template::parse_at("{{ nope }}", "routes[1].routingKeyTemplate".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("routes[1].routingKeyTemplate"), "{e}");
    }

    #[test]
    fn every_placeholder_renders_from_the_message() {
        let t = Template::parse(
            "{{ aggregateType }}.{{topic}}.{{ key }}.{{ payload.region }}.{{ data.n.m }}",
            "exchange",
            "d",
        )
        .unwrap();
        assert_eq!(t.render(&msg()), "order.orders.created.o-1.eu.3");
    }

    #[test]
    fn a_missing_or_null_payload_field_renders_as_empty_text() {
        let t = Template::parse(
            "[{{ payload.nope }}|{{ payload.gone }}|{{ key }}]",
            "subject",
            "d",
        )
        .unwrap();
        let mut m = msg();
        m.payload = serde_json::json!({"gone": null});
        m.key = None;
        assert_eq!(t.render(&m), "[||]");
    }

    #[test]
    fn an_unknown_placeholder_fails_naming_the_destination_and_field() {
        let e = Template::parse("{{ eventType }}", "subject", "bus")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("destinations.bus.subject: ") && e.contains("eventType"),
            "{e}"
        );
    }

    #[test]
    fn an_unclosed_brace_fails_naming_the_destination_and_field() {
        let e = Template::parse("{{ topic", "topic", "k")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "destinations.k.topic: unclosed `{{` in `{{ topic`");
    }

    #[test]
    fn a_from_column_other_than_the_three_fails() {
        assert!(check_from_column("payload", "topicFrom", "d").is_err());
    }

    #[test]
    fn a_from_column_wins_over_the_template() {
        let t = Template::parse("{{ topic }}", "subject", "d").unwrap();
        assert_eq!(address(Some("key"), &t, &msg()), "o-1");
    }
}
