//! Address templates of broker destinations (`exchange`, `topic`, `subject`, routing and
//! record keys): `{{ topic }}`, `{{ key }}`, `{{ aggregateType }}`, `{{ payload.<field> }}`,
//! `{{ data.<field> }}` (nested with dots). Any other placeholder fails at startup, naming the
//! field and the destination.

use serde_json::Value;

use crate::outbound::OutboundMessage;

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Topic,
    Key,
    AggregateType,
    /// `payload.a.b` or `data.a.b`: the path inside the payload.
    Payload(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
    source: String,
}

impl Template {
    /// Parses `text`; `field` and `destination` name the error.
    pub fn parse(text: &str, field: &str, destination: &str) -> anyhow::Result<Self> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_string()));
            }
            let after = &rest[start + 2..];
            let end = after
                .find("}}")
                .ok_or_else(|| anyhow::anyhow!("destinations.{destination}.{field}: unclosed `{{{{` in `{text}`"))?;
            let name = after[..end].trim();
            let part = match name {
                "topic" => Part::Topic,
                "key" => Part::Key,
                "aggregateType" => Part::AggregateType,
                n if (n.starts_with("payload.") || n.starts_with("data.")) && n.split('.').skip(1).all(|s| !s.is_empty()) => {
                    Part::Payload(n.split('.').skip(1).map(str::to_string).collect())
                }
                other => anyhow::bail!(
                    "destinations.{destination}.{field}: the placeholder `{{{{ {other} }}}}` is not allowed; use topic, key, aggregateType, payload.<field> or data.<field>"
                ),
            };
            parts.push(part);
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template { parts, source: text.to_string() })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders for `msg`; a missing value renders as empty text.
    pub fn render(&self, msg: &OutboundMessage) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Topic => out.push_str(&msg.topic),
                Part::Key => out.push_str(msg.key.as_deref().unwrap_or("")),
                Part::AggregateType => out.push_str(msg.aggregate_type.as_deref().unwrap_or("")),
                Part::Payload(path) => {
                    let mut v = Some(&msg.payload);
                    for seg in path {
                        v = v.and_then(|v| v.get(seg));
                    }
                    match v {
                        Some(Value::String(s)) => out.push_str(s),
                        Some(Value::Null) | None => {}
                        Some(other) => out.push_str(&other.to_string()),
                    }
                }
            }
        }
        out
    }
}

/// Checks a `*From` column name: exactly `aggregate_type`, `topic` or `key`.
pub fn check_from_column(column: &str, field: &str, destination: &str) -> anyhow::Result<()> {
    match column {
        "aggregate_type" | "topic" | "key" => Ok(()),
        other => anyhow::bail!("destinations.{destination}.{field}: `{other}` is not a column it accepts; use aggregate_type, topic or key"),
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
    fn templates_render_every_placeholder_and_refuse_others() {
        let t = Template::parse("{{ aggregateType }}.{{topic}}.{{ key }}.{{ payload.region }}.{{ data.n.m }}", "exchange", "d").unwrap();
        assert_eq!(t.render(&msg()), "order.orders.created.o-1.eu.3");
        let e = Template::parse("{{ eventType }}", "subject", "bus").unwrap_err().to_string();
        assert!(e.contains("destinations.bus.subject") && e.contains("eventType"), "{e}");
        assert!(check_from_column("payload", "topicFrom", "d").is_err());
        assert_eq!(address(Some("key"), &t, &msg()), "o-1");
    }
}
