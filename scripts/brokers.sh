#!/usr/bin/env bash
# Installs (idempotently: skips what is present) and starts real brokers on 127.0.0.1 for
# the broker tests and benchmarks, each as a process this script controls (no systemd):
#   RabbitMQ   (Debian package rabbitmq-server)             amqp://guest:guest@127.0.0.1:${QB_AMQP_PORT:-55672}/%2f
#   NATS + JetStream (Debian package nats-server, -js)      nats://127.0.0.1:${QB_NATS_PORT:-54222}
#   Apache Kafka, KRaft single node (org.apache.kafka:kafka_2.13 from Maven Central,
#     jars cached in ~/.cache/queuebox-kafka)               127.0.0.1:${QB_KAFKA_PORT:-59092}
# RabbitMQ and Kafka also listen with TLS, for the TLS tests (relay/tests/tls_brokers.rs), with
# certificates made by openssl in $QB_BROKERS_DIR/tls (see broker_tls_certs):
#   RabbitMQ amqps, client certificate required              127.0.0.1 and 127.0.0.2:${QB_AMQPS_PORT:-55671}
#   Kafka SSL, client certificate required                   127.0.0.1:${QB_KAFKA_SSL_PORT:-59094}
#     and the same on 127.0.0.2, a host name the certificate does not name
#                                                            127.0.0.2:${QB_KAFKA_SSL_OTHER_HOST_PORT:-59096}
#   Kafka SASL_SSL: PLAIN, SCRAM-SHA-256 and -512, user relay / relay-secret
#                                                            127.0.0.1:${QB_KAFKA_SASL_SSL_PORT:-59095}
# Usage:
#   bash scripts/brokers.sh start [rabbitmq|nats|kafka ...]   (default: all three; waits until ready)
#   bash scripts/brokers.sh stop  [rabbitmq|nats|kafka ...]
#   bash scripts/brokers.sh restart rabbitmq|nats|kafka       (stop, then start; data kept)
#   bash scripts/brokers.sh env                                (prints the export lines)
#   bash scripts/brokers.sh rabbitmqctl <args>                 (rabbitmqctl against our node)
#   bash scripts/brokers.sh install                            (install only)
#   bash scripts/brokers.sh deps                               (build dependencies of the relay:
#                                                               librdkafka-dev + pkg-config, for rdkafka)
# Ports are non-default so that a broker started by a package's init script cannot collide.
set -euo pipefail

QB_BROKERS_DIR="${QB_BROKERS_DIR:-/tmp/queuebox-brokers}"
QB_AMQP_PORT="${QB_AMQP_PORT:-55672}"
QB_RABBIT_DIST_PORT="${QB_RABBIT_DIST_PORT:-55673}"
QB_EPMD_PORT="${QB_EPMD_PORT:-54369}"
QB_NATS_PORT="${QB_NATS_PORT:-54222}"
QB_KAFKA_PORT="${QB_KAFKA_PORT:-59092}"
QB_KAFKA_CONTROLLER_PORT="${QB_KAFKA_CONTROLLER_PORT:-59093}"
QB_AMQPS_PORT="${QB_AMQPS_PORT:-55671}"
QB_KAFKA_SSL_PORT="${QB_KAFKA_SSL_PORT:-59094}"
QB_KAFKA_SASL_SSL_PORT="${QB_KAFKA_SASL_SSL_PORT:-59095}"
QB_KAFKA_SSL_OTHER_HOST_PORT="${QB_KAFKA_SSL_OTHER_HOST_PORT:-59096}"
QB_KAFKA_VERSION="${QB_KAFKA_VERSION:-3.9.1}"
QB_KAFKA_CACHE="${QB_KAFKA_CACHE:-$HOME/.cache/queuebox-kafka}/$QB_KAFKA_VERSION"

RABBIT_DIR="$QB_BROKERS_DIR/rabbitmq"
NATS_DIR="$QB_BROKERS_DIR/nats"
KAFKA_DIR="$QB_BROKERS_DIR/kafka"
TLS_DIR="$QB_BROKERS_DIR/tls"

log() { echo "brokers: $*" >&2; }

apt_updated=0
apt_install() {  # apt_install <package>...: installs the ones missing, one apt-get update per run
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  if [ $apt_updated = 0 ]; then apt-get update -qq >&2; apt_updated=1; fi
  # RUNLEVEL=1 keeps invoke-rc.d from starting the packaged services; we run our own.
  RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

wait_for() {  # wait_for <seconds> <what> <command...>
  local secs=$1 what=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ]; then log "$what did not become ready within ${secs}s"; return 1; fi
    sleep 0.5
  done
}

port_open() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }  # port_open <port> [host]

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# The brokers' fixed ports lie inside Linux's ephemeral range (32768-60999), so an outgoing
# connection of an earlier test can hold one as its local port and a broker then fails to
# bind it ("Address already in use"). Reserving them keeps the kernel from handing them
# out; where /proc/sys is read-only (an unprivileged container) nothing changes.
reserve_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur
  [ -w "$f" ] || return 0
  cur=$(cat "$f")
  echo "${cur:+$cur,}$QB_NATS_PORT,$QB_EPMD_PORT,$QB_AMQPS_PORT,$QB_AMQP_PORT,$QB_RABBIT_DIST_PORT,$QB_KAFKA_PORT,$QB_KAFKA_CONTROLLER_PORT,$QB_KAFKA_SSL_PORT,$QB_KAFKA_SASL_SSL_PORT,$QB_KAFKA_SSL_OTHER_HOST_PORT" >"$f" 2>/dev/null || true
}

stop_pidfile() {  # stop_pidfile <pidfile> <name>: TERM, wait up to 30 s, then KILL
  local f=$1 name=$2 pid
  pid_alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then log "$name did not stop in 30 s; killing it"; kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$f"
  log "$name stopped"
}

# ---------------------------------------------------------------- TLS certificates
# A throwaway CA and, signed by it, a server certificate for localhost and 127.0.0.1 (not
# 127.0.0.2: the host-name test connects there) and a client certificate (CN queuebox); also
# a CA nobody trusts (other-ca.crt) and a client certificate it signed (client-other.*). All
# PEM; server.pem is the key and certificate in one file, Kafka's PEM keystore. Made once and
# again when they expire within a day.
broker_tls_certs() {
  command -v openssl >/dev/null || apt_install openssl
  if [ -s "$TLS_DIR/client-other.crt" ] && openssl x509 -checkend 86400 -noout -in "$TLS_DIR/server.crt" >/dev/null 2>&1; then return 0; fi
  log "making TLS certificates in $TLS_DIR"
  rm -rf "$TLS_DIR"; mkdir -p "$TLS_DIR"
  (
    cd "$TLS_DIR"
    ca() {
      openssl req -x509 -newkey rsa:2048 -nodes -days 30 -sha256 -subj "/CN=$2" -keyout "$1.key" -out "$1.crt" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    }
    leaf() {  # leaf NAME CN ISSUER EXTENSION
      openssl req -new -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
      printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$4" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA "$3.crt" -CAkey "$3.key" -CAcreateserial -days 30 -sha256 \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    ca ca "QueueBox broker test CA"
    ca other-ca "Some other CA"
    leaf server localhost ca "extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
    leaf client queuebox ca "extendedKeyUsage=clientAuth"
    leaf client-other queuebox other-ca "extendedKeyUsage=clientAuth"
    cat server.key server.crt >server.pem
    chmod 600 ./*.key server.pem
  )
}

# ---------------------------------------------------------------- RabbitMQ
rabbit_env() {
  export HOME="$RABBIT_DIR/home"  # the Erlang cookie lives here, shared by server and CLI
  export RABBITMQ_NODENAME="queuebox@localhost"
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  export RABBITMQ_NODE_PORT="$QB_AMQP_PORT"
  export RABBITMQ_DIST_PORT="$QB_RABBIT_DIST_PORT"
  export ERL_EPMD_PORT="$QB_EPMD_PORT"
  export ERL_EPMD_ADDRESS=127.0.0.1
  export RABBITMQ_MNESIA_BASE="$RABBIT_DIR/mnesia"
  export RABBITMQ_LOG_BASE="$RABBIT_DIR/log"
  export RABBITMQ_CONFIG_FILE="$RABBIT_DIR/rabbitmq.conf"
  export RABBITMQ_ADVANCED_CONFIG_FILE="$RABBIT_DIR/advanced.config"
  export RABBITMQ_ENABLED_PLUGINS_FILE="$RABBIT_DIR/enabled_plugins"
  export RABBITMQ_CONF_ENV_FILE="$RABBIT_DIR/rabbitmq-env.conf"
  export RABBITMQ_PID_FILE="$RABBIT_DIR/rabbitmq.pid"
}

rabbit_start() {
  apt_install rabbitmq-server
  mkdir -p "$RABBIT_DIR/home" "$RABBIT_DIR/mnesia" "$RABBIT_DIR/log"
  rabbit_env
  if pid_alive "$RABBIT_DIR/server.pid" && port_open "$QB_AMQP_PORT"; then
    if port_open "$QB_AMQPS_PORT"; then log "rabbitmq already running on $QB_AMQP_PORT"; return 0; fi
    log "rabbitmq is running without its TLS listener (an older configuration); restarting it"
    rabbit_stop; rabbit_env
  fi
  [ -f "$RABBIT_DIR/enabled_plugins" ] || echo "[]." >"$RABBIT_DIR/enabled_plugins"
  [ -f "$RABBIT_DIR/rabbitmq-env.conf" ] || : >"$RABBIT_DIR/rabbitmq-env.conf"
  [ -f "$RABBIT_DIR/advanced.config" ] || echo "[]." >"$RABBIT_DIR/advanced.config"
  broker_tls_certs
  # amqps on 127.0.0.1 and 127.0.0.2 (a host name the certificate does not name); a client
  # without a certificate signed by the CA is refused in the handshake.
  cat >"$RABBIT_DIR/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$QB_AMQP_PORT
listeners.ssl.1 = 127.0.0.1:$QB_AMQPS_PORT
listeners.ssl.2 = 127.0.0.2:$QB_AMQPS_PORT
ssl_options.cacertfile = $TLS_DIR/ca.crt
ssl_options.certfile = $TLS_DIR/server.crt
ssl_options.keyfile = $TLS_DIR/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = true
loopback_users = none
log.console = false
log.file.level = warning
disk_free_limit.absolute = 50MB
vm_memory_high_watermark.relative = 0.2
CONF
  [ -s "$HOME/.erlang.cookie" ] || { head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$HOME/.erlang.cookie"; chmod 600 "$HOME/.erlang.cookie"; }
  # The server script execs erl in the foreground; we background it and keep its pid.
  setsid /usr/lib/rabbitmq/bin/rabbitmq-server >"$RABBIT_DIR/server.out" 2>&1 </dev/null &
  echo $! >"$RABBIT_DIR/server.pid"
  if ! wait_for 120 rabbitmq /usr/lib/rabbitmq/bin/rabbitmqctl -q await_startup --timeout 5; then
    tail -30 "$RABBIT_DIR/server.out" >&2 || true; return 1
  fi
  wait_for 30 "rabbitmq port $QB_AMQP_PORT" port_open "$QB_AMQP_PORT"
  wait_for 30 "rabbitmq amqps port $QB_AMQPS_PORT" port_open "$QB_AMQPS_PORT"
  log "rabbitmq ready on 127.0.0.1:$QB_AMQP_PORT (amqps $QB_AMQPS_PORT)"
}

rabbit_stop() {
  [ -d "$RABBIT_DIR" ] || return 0
  rabbit_env
  if pid_alive "$RABBIT_DIR/server.pid"; then
    /usr/lib/rabbitmq/bin/rabbitmqctl -q stop >/dev/null 2>&1 || true
  fi
  stop_pidfile "$RABBIT_DIR/server.pid" rabbitmq
  # epmd was started for our port by the server; stop only ours (it listens on QB_EPMD_PORT).
  if command -v epmd >/dev/null && port_open "$QB_EPMD_PORT"; then epmd -port "$QB_EPMD_PORT" -kill >/dev/null 2>&1 || true; fi
}

# ---------------------------------------------------------------- NATS
nats_start() {
  apt_install nats-server
  mkdir -p "$NATS_DIR/store"
  if pid_alive "$NATS_DIR/server.pid" && port_open "$QB_NATS_PORT"; then log "nats already running on $QB_NATS_PORT"; return 0; fi
  setsid nats-server -a 127.0.0.1 -p "$QB_NATS_PORT" -js -sd "$NATS_DIR/store" >"$NATS_DIR/server.out" 2>&1 </dev/null &
  echo $! >"$NATS_DIR/server.pid"
  if ! wait_for 60 nats port_open "$QB_NATS_PORT"; then tail -30 "$NATS_DIR/server.out" >&2; return 1; fi
  # JetStream is ready once the server logged it (the listener opens after JetStream starts).
  wait_for 30 "nats jetstream" grep -q "Server is ready" "$NATS_DIR/server.out"
  log "nats (JetStream) ready on 127.0.0.1:$QB_NATS_PORT"
}

nats_stop() { [ -d "$NATS_DIR" ] && stop_pidfile "$NATS_DIR/server.pid" nats; return 0; }

# ---------------------------------------------------------------- Kafka
kafka_install() {
  command -v java >/dev/null || apt_install openjdk-17-jre-headless
  if [ -s "$QB_KAFKA_CACHE/complete" ]; then return 0; fi
  command -v mvn >/dev/null || apt_install maven
  log "resolving org.apache.kafka:kafka_2.13:$QB_KAFKA_VERSION and its runtime dependencies from Maven Central"
  local pom_dir; pom_dir=$(mktemp -d)
  cat >"$pom_dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>queuebox</groupId><artifactId>kafka-runtime</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$QB_KAFKA_VERSION</version></dependency>
    <!-- a logging backend, so the broker's log says why when it fails -->
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
POM
  rm -rf "$QB_KAFKA_CACHE"; mkdir -p "$QB_KAFKA_CACHE/libs"
  (cd "$pom_dir" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$QB_KAFKA_CACHE/libs") >&2
  rm -rf "$pom_dir"
  ls "$QB_KAFKA_CACHE/libs" | grep -q "^kafka_2.13-$QB_KAFKA_VERSION.jar$"
  date -u +%FT%TZ >"$QB_KAFKA_CACHE/complete"
}

kafka_java() {  # kafka_java <main class> <args...>
  java -Xms256m -Xmx768m -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j.configuration="file:$KAFKA_DIR/log4j.properties" -Dkafka.logs.dir="$KAFKA_DIR/logs" \
    -cp "$QB_KAFKA_CACHE/libs/*" "$@"
}

kafka_ready() {  # the broker answers metadata on its listener
  port_open "$QB_KAFKA_PORT" && grep -q "Kafka Server started" "$KAFKA_DIR/server.out"
}

kafka_start() {
  kafka_install
  mkdir -p "$KAFKA_DIR/data" "$KAFKA_DIR/logs"
  if pid_alive "$KAFKA_DIR/server.pid" && port_open "$QB_KAFKA_PORT"; then
    if port_open "$QB_KAFKA_SSL_PORT" && port_open "$QB_KAFKA_SSL_OTHER_HOST_PORT" 127.0.0.2; then
      log "kafka already running on $QB_KAFKA_PORT"; return 0
    fi
    log "kafka is running without its TLS listeners (an older configuration); restarting it"
    kafka_stop
  fi
  broker_tls_certs
  # Besides PLAINTEXT: SSL (client certificate required) and SASL_SSL (PLAIN users from the
  # JAAS line, SCRAM users from the metadata log, added at format time), PEM keystores; and
  # SSL_OTHER_HOST, SSL on 127.0.0.2, an address the certificate does not name, so that the
  # client's first (bootstrap) connection already fails the host-name check.
  cat >"$KAFKA_DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$QB_KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$QB_KAFKA_PORT,CONTROLLER://127.0.0.1:$QB_KAFKA_CONTROLLER_PORT,SSL://127.0.0.1:$QB_KAFKA_SSL_PORT,SASL_SSL://127.0.0.1:$QB_KAFKA_SASL_SSL_PORT,SSL_OTHER_HOST://127.0.0.2:$QB_KAFKA_SSL_OTHER_HOST_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$QB_KAFKA_PORT,SSL://127.0.0.1:$QB_KAFKA_SSL_PORT,SASL_SSL://127.0.0.1:$QB_KAFKA_SASL_SSL_PORT,SSL_OTHER_HOST://127.0.0.2:$QB_KAFKA_SSL_OTHER_HOST_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SSL_OTHER_HOST:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$TLS_DIR/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS_DIR/ca.crt
listener.name.ssl.ssl.client.auth=required
listener.name.ssl_other_host.ssl.client.auth=required
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_relay="relay-secret";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
log.dirs=$KAFKA_DIR/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
min.insync.replicas=1
default.replication.factor=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.flush.interval.messages=9223372036854775807
PROPS
  cat >"$KAFKA_DIR/log4j.properties" <<PROPS
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.kafka.server.KafkaRaftServer=INFO
log4j.logger.kafka.server.BrokerServer=INFO
PROPS
  if [ ! -s "$KAFKA_DIR/data/meta.properties" ]; then
    log "formatting kafka storage (KRaft)"
    kafka_java kafka.tools.StorageTool format -t "qb-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' | head -c 22)" \
      -c "$KAFKA_DIR/server.properties" --ignore-formatted \
      --add-scram 'SCRAM-SHA-256=[name=relay,password=relay-secret]' \
      --add-scram 'SCRAM-SHA-512=[name=relay,password=relay-secret]' >"$KAFKA_DIR/format.out" 2>&1 \
      || { cat "$KAFKA_DIR/format.out" >&2; return 1; }
    touch "$KAFKA_DIR/scram-users"
  fi
  : >"$KAFKA_DIR/server.out"
  # exec: the pid we record is the JVM itself, so `stop` signals the broker, not a wrapper.
  setsid bash -c "$(declare -f kafka_java | sed 's/^\( *\)java /\1exec java /'); KAFKA_DIR='$KAFKA_DIR' QB_KAFKA_CACHE='$QB_KAFKA_CACHE' kafka_java kafka.Kafka '$KAFKA_DIR/server.properties'" \
    >"$KAFKA_DIR/server.out" 2>&1 </dev/null &
  echo $! >"$KAFKA_DIR/server.pid"
  if ! wait_for 120 kafka kafka_ready; then tail -40 "$KAFKA_DIR/server.out" >&2; return 1; fi
  wait_for 30 "kafka SSL port $QB_KAFKA_SSL_OTHER_HOST_PORT on 127.0.0.2" port_open "$QB_KAFKA_SSL_OTHER_HOST_PORT" 127.0.0.2
  if [ ! -e "$KAFKA_DIR/scram-users" ]; then  # storage formatted before SCRAM users were added
    kafka_java kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$QB_KAFKA_PORT" --alter --entity-type users \
      --entity-name relay --add-config 'SCRAM-SHA-256=[password=relay-secret],SCRAM-SHA-512=[password=relay-secret]' >&2
    touch "$KAFKA_DIR/scram-users"
  fi
  log "kafka (KRaft) ready on 127.0.0.1:$QB_KAFKA_PORT (SSL $QB_KAFKA_SSL_PORT, SASL_SSL $QB_KAFKA_SASL_SSL_PORT, SSL on 127.0.0.2:$QB_KAFKA_SSL_OTHER_HOST_PORT)"
}

kafka_stop() { [ -d "$KAFKA_DIR" ] && stop_pidfile "$KAFKA_DIR/server.pid" kafka; return 0; }

print_env() {
  cat <<ENV
export QUEUEBOX_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:$QB_AMQP_PORT/%2f
export QUEUEBOX_TEST_NATS_URL=nats://127.0.0.1:$QB_NATS_PORT
export QUEUEBOX_TEST_KAFKA_BROKERS=127.0.0.1:$QB_KAFKA_PORT
export QUEUEBOX_TEST_AMQPS_URL=amqps://guest:guest@127.0.0.1:$QB_AMQPS_PORT/%2f
export QUEUEBOX_TEST_KAFKA_SSL_BROKERS=127.0.0.1:$QB_KAFKA_SSL_PORT
export QUEUEBOX_TEST_KAFKA_SASL_SSL_BROKERS=127.0.0.1:$QB_KAFKA_SASL_SSL_PORT
export QUEUEBOX_TEST_KAFKA_SSL_OTHER_HOST_BROKERS=127.0.0.2:$QB_KAFKA_SSL_OTHER_HOST_PORT
export QUEUEBOX_TEST_BROKER_TLS_DIR=$TLS_DIR
ENV
}

mode="${1:-start}"; shift || true
if [ "$mode" = rabbitmqctl ]; then rabbit_env; exec /usr/lib/rabbitmq/bin/rabbitmqctl "$@"; fi
which=("$@"); [ ${#which[@]} -eq 0 ] && which=(rabbitmq nats kafka)
for b in "${which[@]}"; do case "$b" in rabbitmq|nats|kafka) ;; *) echo "unknown broker $b" >&2; exit 2 ;; esac; done
fn() { case "$1" in rabbitmq) echo rabbit ;; *) echo "$1" ;; esac; }

case "$mode" in
  deps)
    reserve_ports
    apt_install librdkafka-dev pkg-config ;;
  install)
    apt_install rabbitmq-server nats-server librdkafka-dev pkg-config
    kafka_install ;;
  start)
    t0=$(date +%s)
    reserve_ports
    # One apt transaction for both packages, then the brokers.
    apt_list=(); for b in "${which[@]}"; do case $b in rabbitmq) apt_list+=(rabbitmq-server) ;; nats) apt_list+=(nats-server) ;; esac; done
    [ ${#apt_list[@]} -gt 0 ] && apt_install "${apt_list[@]}"
    for b in "${which[@]}"; do "$(fn "$b")_start"; done
    log "started ${which[*]} in $(( $(date +%s) - t0 ))s" ;;
  stop)
    for b in "${which[@]}"; do "$(fn "$b")_stop"; done ;;
  restart)
    for b in "${which[@]}"; do "$(fn "$b")_stop"; "$(fn "$b")_start"; done ;;
  env) print_env ;;
  *) echo "usage: scripts/brokers.sh start|stop|restart|install|env [rabbitmq|nats|kafka ...] | rabbitmqctl <args>" >&2; exit 2 ;;
esac
