#!/usr/bin/env bash
# Brokers: starts real RabbitMQ, NATS JetStream and Kafka (KRaft) on loopback
# (scripts/brokers.sh installs what is missing), runs the broker tests against them and the
# test PostgreSQL — the queuebox-brokers clients (relay/brokers/tests/brokers_*.rs) and the
# real relay binary with broker sources and destinations (relay/tests/brokers_relay.rs), and
# the relay over the brokers' TLS listeners (relay/tests/tls_brokers.rs: RabbitMQ amqps and
# Kafka SSL / SASL_SSL with certificates brokers.sh makes with openssl) — and stops the
# brokers whatever happens.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/brokers.sh deps
trap 'bash scripts/brokers.sh stop' EXIT
bash scripts/brokers.sh start
eval "$(bash scripts/brokers.sh env)"
export QUEUEBOX_TEST_AMQP_URL QUEUEBOX_TEST_NATS_URL QUEUEBOX_TEST_KAFKA_BROKERS \
  QUEUEBOX_TEST_AMQPS_URL QUEUEBOX_TEST_KAFKA_SSL_BROKERS QUEUEBOX_TEST_KAFKA_SASL_SSL_BROKERS \
  QUEUEBOX_TEST_KAFKA_SSL_OTHER_HOST_BROKERS QUEUEBOX_TEST_BROKER_TLS_DIR
cargo build -p queuebox --bins --quiet
# The broker tests are #[ignore]d so that other parts report them as not run; run them here.
cargo test -p queuebox-brokers --quiet --no-fail-fast --test 'brokers_*' -- --ignored --test-threads=4
cargo test -p queuebox --quiet --test brokers_relay -- --ignored --test-threads=2
cargo test -p queuebox --quiet --test tls_brokers -- --ignored --test-threads=2
