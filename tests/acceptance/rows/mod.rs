//! The rows of §12, in order, each with the test that proves it against the real binary or
//! the reason nothing does yet.
//!
//! One module per area of the table: `schema` (1–3), `outbox` (4–20), `transforms` (21,
//! 22, 34, 39, 60), `brokers` (23–27, 51–54), `inbox` (28–38), `push` (40–46, 49, 50),
//! `pull` (47, 48: the Rust pull client on rows the binary stored) and
//! `operations` (55–75). A test returns `Err(NotRun)` only for a missing prerequisite it
//! names (a broker URL, the SQL Server URL, a feature not built yet);
//! everything else it checks with assertions, and a failed assertion fails the row.

use futures::future::BoxFuture;

mod brokers;
mod inbox;
mod operations;
mod outbox;
mod pull;
mod push;
mod schema;
mod transforms;

/// Why a row did not run.
pub struct NotRun(pub String);

pub type Outcome = Result<(), NotRun>;

pub enum Check {
    /// The black-box test of the row.
    Test(fn() -> BoxFuture<'static, Outcome>),
    /// Why the row does not run: the feature is not built, or it has no black-box test yet.
    NotBuilt(&'static str),
}

pub struct Row {
    pub n: u32,
    pub title: &'static str,
    /// The test's path under `rows::` (empty when there is none).
    pub name: &'static str,
    pub check: Check,
}

macro_rules! test {
    ($n:literal, $title:literal, $module:ident :: $f:ident) => {
        Row {
            n: $n,
            title: $title,
            name: concat!(stringify!($module), "::", stringify!($f)),
            check: Check::Test(|| Box::pin($module::$f())),
        }
    };
}

macro_rules! not_run {
    ($n:literal, $title:literal, $why:expr) => {
        Row {
            n: $n,
            title: $title,
            name: "",
            check: Check::NotBuilt($why),
        }
    };
}

pub static ALL: &[Row] = &[
    test!(
        1,
        "Schema migrations at startup (PG + SQL Server)",
        schema::migrations_at_startup_create_the_schema_and_a_restart_is_clean
    ),
    test!(
        2,
        "`migrate` command and exit codes",
        schema::migrate_applies_once_and_refuses_bad_arguments
    ),
    test!(
        3,
        "Baseline of hand-applied schema",
        schema::a_hand_applied_schema_is_baselined_and_migrated_on
    ),
    test!(
        4,
        "Minimal outbox insert",
        outbox::a_minimal_insert_gets_the_column_defaults
    ),
    test!(
        5,
        "HTTP delivery with standard headers",
        outbox::http_delivery_carries_the_standard_headers
    ),
    test!(
        6,
        "Any 2xx completes",
        outbox::any_2xx_completes_and_is_never_resent
    ),
    test!(
        7,
        "Non-2xx / 3xx retries",
        outbox::non_2xx_and_redirects_are_retried
    ),
    test!(
        8,
        "Retry bookkeeping",
        outbox::a_failed_attempt_is_booked_on_the_row_and_counted
    ),
    test!(
        9,
        "Backoff formula",
        outbox::retry_gaps_double_from_the_base_delay
    ),
    test!(
        10,
        "Dead-letter ceiling from row",
        outbox::the_rows_max_attempts_is_its_dead_letter_ceiling
    ),
    test!(
        11,
        "`outbox.maxAttempts` stamped on relayed rows",
        push::max_attempts_settings_are_stamped_on_relayed_rows
    ),
    test!(
        12,
        "No route → dead",
        outbox::a_topic_without_a_route_is_dead
    ),
    test!(
        13,
        "Route glob semantics",
        outbox::route_globs_match_whole_segments_and_the_first_route_wins
    ),
    test!(
        14,
        "Delayed delivery",
        outbox::a_row_is_not_delivered_before_its_scheduled_at
    ),
    test!(
        15,
        "Crash recovery / reclaim",
        outbox::an_expired_lease_is_reclaimed_without_spending_an_attempt
    ),
    test!(
        16,
        "Claim fence / claims lost",
        outbox::a_write_after_losing_the_claim_changes_nothing_and_is_counted
    ),
    test!(
        17,
        "Concurrency limit",
        outbox::concurrency_caps_the_requests_in_flight
    ),
    test!(
        18,
        "Key ordering",
        outbox::rows_of_one_key_arrive_in_insert_order
    ),
    test!(
        19,
        "Empty key parallelism",
        outbox::rows_without_a_key_are_published_concurrently
    ),
    test!(
        20,
        "Claim order ≠ commit order",
        outbox::rows_are_claimed_in_commit_order
    ),
    test!(
        21,
        "Transforms route→destination",
        transforms::route_then_destination_transforms_shape_the_delivery
    ),
    test!(
        22,
        "Transform onError",
        transforms::transform_failures_follow_on_error
    ),
    test!(
        23,
        "RabbitMQ destination",
        brokers::rabbitmq_destination_publishes_persistent_messages_by_topic
    ),
    test!(
        24,
        "Routing key template precedence",
        brokers::a_routes_routing_key_template_wins_over_the_destinations
    ),
    test!(
        25,
        "Address templates / `*From`",
        brokers::address_templates_render_from_the_row
    ),
    test!(
        26,
        "Kafka destination",
        brokers::kafka_destination_produces_keyed_records_with_the_headers
    ),
    test!(
        27,
        "NATS destination",
        brokers::nats_destination_publishes_to_jetstream_with_the_headers
    ),
    test!(
        28,
        "HTTP inbox accept / duplicate",
        inbox::a_webhook_is_accepted_once_and_a_repeat_is_a_duplicate
    ),
    test!(
        29,
        "Inbox 400 cases",
        inbox::invalid_json_and_a_missing_key_answer_400
    ),
    test!(
        30,
        "Unknown source path",
        inbox::an_unknown_source_path_answers_404
    ),
    test!(
        31,
        "Body size limit",
        inbox::a_body_over_max_body_bytes_answers_413_and_stores_nothing
    ),
    test!(
        32,
        "Rate limit",
        inbox::the_request_over_the_rate_limit_gets_429_with_retry_after
    ),
    test!(
        33,
        "Inbox auth: bearer/api-key/hmac",
        inbox::source_auth_refuses_wrong_credentials
    ),
    test!(
        34,
        "Source transform rejection (HTTP)",
        transforms::a_throwing_source_transform_answers_422
    ),
    test!(
        35,
        "Correlation id",
        inbox::the_correlation_id_is_echoed_stored_and_forwarded
    ),
    test!(
        36,
        "Stored inbox headers",
        inbox::stored_headers_keep_custom_ones_and_drop_credentials
    ),
    test!(
        37,
        "Header filter",
        brokers::header_filters_drop_messages_without_storing_them
    ),
    test!(
        38,
        "Header keys (HTTP)",
        inbox::the_idempotency_key_header_decides_duplicates
    ),
    test!(
        39,
        "Key expressions and path lists",
        transforms::key_expressions_and_path_lists_find_the_attributes
    ),
    test!(
        40,
        "Relay (push)",
        push::a_push_webhook_is_relayed_to_the_outbox_with_the_relay_headers
    ),
    test!(
        41,
        "Relay exactly-once forwarding under replicas",
        push::two_replicas_forward_each_push_row_once
    ),
    test!(
        42,
        "Relay header precedence",
        push::a_senders_relay_headers_are_replaced
    ),
    test!(
        43,
        "Empty topic → dead",
        push::an_empty_topic_is_dead_and_such_a_config_is_refused
    ),
    test!(
        44,
        "Relay failure is recoverable",
        push::a_failed_forward_is_retried_after_the_lease
    ),
    test!(
        45,
        "Push aggregate serialisation",
        push::one_aggregate_is_forwarded_in_arrival_order_across_sources
    ),
    test!(
        46,
        "Pull consumption",
        push::the_relay_never_touches_pull_rows
    ),
    test!(
        47,
        "Pull per-(source, aggregate) reservation",
        pull::one_live_claim_per_source_and_aggregate
    ),
    test!(
        48,
        "Pull fence",
        pull::stale_tokens_change_nothing_leases_renew_retries_reschedule
    ),
    test!(49, "`initialDelay`", push::initial_delay_holds_rows_back),
    test!(
        50,
        "Publish-time ordering",
        push::publish_time_orders_the_claim
    ),
    test!(
        51,
        "RabbitMQ source",
        brokers::rabbitmq_source_stores_each_message_once
    ),
    test!(
        52,
        "Kafka source",
        brokers::kafka_source_commits_offsets_after_the_store
    ),
    test!(
        53,
        "NATS source",
        brokers::nats_source_acknowledges_after_the_commit_and_redelivers_on_failure
    ),
    test!(
        54,
        "Body digest fallback",
        brokers::a_message_without_a_key_is_keyed_by_its_digest
    ),
    test!(
        55,
        "Health endpoints",
        operations::health_answers_live_and_ready
    ),
    test!(
        56,
        "Management port",
        operations::the_management_port_serves_metrics_and_health
    ),
    test!(
        57,
        "Metrics exposure",
        operations::every_metric_family_appears_after_traffic
    ),
    test!(
        58,
        "Lag gauges",
        operations::the_oldest_pending_age_gauge_follows_the_table
    ),
    test!(
        59,
        "Admin disabled by default",
        operations::admin_routes_do_not_exist_unless_enabled
    ),
    test!(
        60,
        "Admin transform test",
        transforms::the_admin_transform_test_evaluates_within_its_limits
    ),
    test!(
        61,
        "Admin replay",
        operations::admin_replay_moves_sent_rows_back_to_pending
    ),
    test!(
        62,
        "Documented requeue SQL",
        operations::the_documented_requeue_sql_brings_a_dead_row_back
    ),
    test!(
        63,
        "Retention",
        operations::retention_deletes_old_terminal_rows_only
    ),
    test!(
        64,
        "Env-var configuration",
        operations::configuration_from_the_environment_alone_works
    ),
    test!(
        65,
        "File replaces packaged config",
        operations::a_file_replaces_the_packaged_configuration
    ),
    test!(
        66,
        "Strict config",
        operations::config_mistakes_are_refused_naming_the_key
    ),
    test!(
        67,
        "`file:` secrets",
        operations::file_secrets_are_read_and_a_file_url_is_refused
    ),
    test!(
        68,
        "Secret masking",
        operations::secrets_never_show_in_errors_logs_or_last_error
    ),
    test!(
        69,
        "Outbound URL validation",
        operations::bad_outbound_urls_are_refused_at_startup
    ),
    test!(
        70,
        "Custom table/column names",
        schema::custom_table_and_column_names_run_the_whole_flow
    ),
    test!(
        71,
        "Wait for database",
        operations::startup_waits_for_the_database
    ),
    test!(
        72,
        "Graceful shutdown",
        operations::sigterm_finishes_requests_in_flight_and_refuses_new_ones
    ),
    test!(
        73,
        "SQL Server claim serialisation",
        operations::two_replicas_on_sqlserver_deliver_each_row_once
    ),
    not_run!(
        74,
        "Pull clients (C#/TS/Go)",
        "the 19-item contract runs in parts 31-go, 32-csharp and 40-node, not in this suite"
    ),
    test!(
        75,
        "CDC wake-up (optional)",
        operations::an_insert_wakes_the_outbox_relay_before_the_poll_interval
    ),
];

/// What the rows share on top of the relay's helpers.
pub mod kit {
    pub use crate::common::*;
    use queuebox_core::store::postgres::PgStore;
    use std::time::Duration;

    /// A database of its own, a receiver, and the binary started on `yaml` (`base_config`
    /// plus `extra`); the binary migrates the empty database itself.
    pub async fn start(tag: &str, extra: &str) -> (Relay, Receiver, PgStore) {
        let (url, store) = empty_db(tag).await;
        let rx = Receiver::start().await;
        let relay = Relay::start(&format!("{}{extra}", base_config(&url, &rx.url()))).await;
        (relay, rx, store)
    }

    /// `base_config` with `outbox.<key>: value` changed or added.
    pub fn outbox_setting(yaml: String, key: &str, value: &str) -> String {
        let anchor = "outbox:\n";
        let pos = yaml.find(anchor).unwrap() + anchor.len();
        let mut lines: Vec<String> = yaml.lines().map(String::from).collect();
        let prefix = format!("  {key}:");
        let head_lines = yaml[..pos].lines().count();
        match lines
            .iter()
            .skip(head_lines)
            .take_while(|l| l.starts_with("  "))
            .position(|l| l.starts_with(&prefix))
        {
            Some(i) => lines[head_lines + i] = format!("{prefix} {value}"),
            None => lines.insert(head_lines, format!("{prefix} {value}")),
        }
        lines.join("\n") + "\n"
    }

    /// Makes every insert into `table` fail (a trigger that raises), the way a broken
    /// database would, until [`allow_inserts`].
    pub async fn refuse_inserts(store: &PgStore, table: &str) {
        sqlx::raw_sql(&format!(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '{table} refuses'; END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION refuse();"
        ))
        .execute(store.pool())
        .await
        .unwrap();
    }

    pub async fn allow_inserts(store: &PgStore, table: &str) {
        sqlx::raw_sql(&format!(
            "DROP TRIGGER refuse ON {table}; DROP FUNCTION refuse();"
        ))
        .execute(store.pool())
        .await
        .unwrap();
    }

    /// One catch-all route to the receiver's `/hooks` destination `rx`.
    pub const ROUTE_ALL: &str = "routes:\n  - topicPattern: '**'\n    destination: rx\n";

    pub async fn insert(store: &PgStore, topic: &str, key: Option<&str>) -> uuid::Uuid {
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, key, payload) VALUES ($1, $2, '{\"n\":1}') RETURNING id",
        )
        .bind(topic)
        .bind(key)
        .fetch_one(store.pool())
        .await
        .unwrap()
    }

    /// `(state, attempt, last_error)` of an outbox row.
    pub async fn outbox_row(store: &PgStore, id: uuid::Uuid) -> (String, i32, Option<String>) {
        sqlx::query_as("SELECT state, attempt, last_error FROM outbox WHERE id = $1")
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap()
    }

    pub async fn wait_state(store: &PgStore, id: uuid::Uuid, state: &str, secs: u64) {
        eventually(&format!("outbox row {id} {state}"), secs, || async {
            outbox_row(store, id).await.0 == state
        })
        .await;
    }

    /// Runs the binary with `yaml` as its config (after `{port}` and `{db}` are filled in) and
    /// `args`, and returns its exit code and everything it printed; it must exit within 30 s.
    pub async fn run_to_exit(yaml: &str, db: &str, args: &[&str]) -> (i32, String) {
        let config = write_config(
            &yaml
                .replace("{port}", &free_port().to_string())
                .replace("{db}", db),
        );
        let out = relay_command(config.path(), args).output();
        let out = tokio::time::timeout(Duration::from_secs(30), out)
            .await
            .expect("the binary exits within 30 s")
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }
}
