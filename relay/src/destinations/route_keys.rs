//! A route's `routingKeyTemplate` (docs/relay.md, "Routing keys"): rendered for each row the route
//! delivers and handed to the publisher as [`OutboundMessage::routing_key`], where it replaces
//! the destination's own key (RabbitMQ `routingKeyTemplate`, Kafka `keyTemplate`). A
//! placeholder without a value renders as the route's `routingKeyMissingFieldDefault` (default
//! empty). Compiled once at start-up: a placeholder outside the address-template vocabulary
//! stops the start naming `routes[i].routingKeyTemplate`.

use queuebox_brokers::template::Template;
use queuebox_config::{Config, RouteConfig};

use super::OutboundMessage;

/// The compiled route templates, by route index (`None`: the route has none).
pub struct RouteKeys {
    routes: Vec<Option<(Template, String)>>,
}

impl RouteKeys {
    pub fn compile(cfg: &Config) -> anyhow::Result<RouteKeys> {
        let routes = cfg
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r.routing_key_template
                    .as_deref()
                    .map(|text| {
                        let t = Template::parse_at(text, format!("routes[{i}].routingKeyTemplate"))
                            .map_err(|e| anyhow::anyhow!("{e}"))?;
                        let missing = r.routing_key_missing_field_default.clone();
                        Ok((t, missing.unwrap_or_default()))
                    })
                    .transpose()
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(RouteKeys { routes })
    }

    /// `msg` with the routing key of `route` (one of `cfg.routes`), when it has a template.
    pub fn apply(
        &self,
        cfg: &Config,
        route: &RouteConfig,
        mut msg: OutboundMessage,
    ) -> OutboundMessage {
        let compiled = cfg
            .routes
            .iter()
            .position(|r| std::ptr::eq(r, route))
            .and_then(|i| self.routes.get(i))
            .and_then(Option::as_ref);
        if let Some((template, missing)) = compiled {
            msg.routing_key = Some(template.render_or(&msg, missing));
        }
        msg
    }
}
