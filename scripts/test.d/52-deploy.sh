#!/usr/bin/env bash
# Deployment recipes (deploy/), checked offline:
#   helm      deploy/helm/queuebox: `helm lint --strict` (values.schema.json too) and
#             `helm template`, with the defaults and with every option on (ServiceMonitor,
#             chart-made Secret, no migrations init container)
#   kubecheck every rendered object and the plain manifests (deploy/kubernetes/queuebox.yaml,
#             which must equal a fresh render) validated against Kubernetes' schemas without a
#             cluster: deploy/tools/kubecheck (k8s.io/api strict decoding + client-go's embedded
#             schema; kubectl --dry-run=client and kubeconform's default schemas need the
#             network or an API server)
#   config    the chart's queuebox.yml passes the relay's own `queuebox check-config`
#   systemd   deploy/systemd/queuebox.service: `systemd-analyze verify` (any warning fails)
#             and `systemd-analyze security --offline` exposure at most 2.5
#   rules     deploy/prometheus/queuebox-rules.yml: deploy/tools/kubecheck/rulecheck, which runs
#             Prometheus's own rule parser (rulefmt.ParseFile, what `promtool check rules`
#             calls: strict fields, PromQL, templates) plus promtool's duplicate checks; and
#             `promtool check rules` itself when promtool is cached
# The Go tools are built from the module proxy at pinned versions once, into
# $QB_DEPLOY_TOOLS (default target/deploy-tools/bin, git-ignored), and reused; a warm run of
# this part takes seconds. helm is a `tool` of kubecheck's module (deploy/tools/kubecheck/
# go.mod pins helm v3.22.1), so one `go build` compiles both against one set of Kubernetes
# modules: the k8s.io packages, most of the build, compile once. Cold, beside other builds,
# both took 4 min 46 s against 541 s + 391 s when each was built from its own module;
# promtool, built only when asked, took 1,747 s; rulecheck compiles only Prometheus's rule
# and PromQL packages, in the same build.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
tools=${QB_DEPLOY_TOOLS:-${CARGO_TARGET_DIR:-$root/target}/deploy-tools/bin}
mkdir -p "$tools"
HELM_VERSION=v3.22.1
PROMETHEUS_VERSION=v0.316.0 # the Go module version of Prometheus 3.x's promtool
export GOFLAGS=-mod=mod
t_all=$(date +%s)
failed=()
step() { echo "--- deploy: $*"; }
fail() { echo "deploy: FAILED: $*" >&2; failed+=("$1"); }
# go_tool <name> <version tag> <go install package@version | build dir>: a cached binary
go_tool() {
  local name=$1 tag=$2 what=$3 bin="$tools/$1-$2" t0
  if [ ! -x "$bin" ]; then
    t0=$(date +%s)
    step "building $name $tag (cached in $tools)" >&2
    if [ -d "$what" ]; then
      (cd "$what" && go build -o "$bin" .) >&2
    else
      local gobin; gobin=$(mktemp -d)
      GOBIN=$gobin go install "$what" >&2
      mv "$gobin/$(basename "${what%@*}")" "$bin"; rmdir "$gobin"
    fi
    echo "deploy: built $name in $(($(date +%s) - t0))s" >&2
  fi
  echo "$bin"
}
command -v go >/dev/null || { echo "deploy: go is not installed" >&2; exit 1; }
# helm, kubecheck and rulecheck: one build of kubecheck's module (its go.mod pins helm, the
# k8s.io modules and Prometheus), cached under the hash of its sources.
# The build holds a lock (scripts/warm-builds.sh runs `--build-tools` early in CI, in the
# background): this part waits for a build already running, then finds the tools cached.
exec 8>"$tools/.build.lock"
flock 8
kc_key=$(cat deploy/tools/kubecheck/go.mod deploy/tools/kubecheck/go.sum deploy/tools/kubecheck/*.go deploy/tools/kubecheck/rulecheck/*.go | sha256sum | cut -c1-12)
helm=$tools/helm-$kc_key kubecheck=$tools/kubecheck-$kc_key rulecheck=$tools/rulecheck-$kc_key
if [ ! -x "$helm" ] || [ ! -x "$kubecheck" ] || [ ! -x "$rulecheck" ]; then
  t0=$(date +%s)
  step "building helm $HELM_VERSION, kubecheck and rulecheck (one go build, cached in $tools)"
  out=$(mktemp -d)
  (cd deploy/tools/kubecheck && go build -o "$out/" helm.sh/helm/v3/cmd/helm . ./rulecheck)
  mv "$out/helm" "$helm"; mv "$out/kubecheck" "$kubecheck"; mv "$out/rulecheck" "$rulecheck"
  rmdir "$out"
  echo "deploy: built helm, kubecheck and rulecheck in $(($(date +%s) - t0))s"
fi
grep -q "^	helm.sh/helm/v3 $HELM_VERSION" deploy/tools/kubecheck/go.mod ||
  fail "deploy/tools/kubecheck/go.mod does not pin helm $HELM_VERSION"
# promtool's cold build compiles all of Prometheus (1,747 s here, beside other builds): it is
# used, beside rulecheck, when cached, or built once with QB_DEPLOY_BUILD_PROMTOOL=1.
promtool=
if [ -x "$tools/promtool-$PROMETHEUS_VERSION" ] || [ -n "${QB_DEPLOY_BUILD_PROMTOOL:-}" ]; then
  promtool=$(go_tool promtool "$PROMETHEUS_VERSION" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION")
fi
echo "deploy: tools ready after $(($(date +%s) - t_all))s"
flock -u 8
[ "${1:-}" = --build-tools ] && exit 0
export HELM_CACHE_HOME=$tools/../helm-cache HELM_CONFIG_HOME=$tools/../helm-config HELM_DATA_HOME=$tools/../helm-data
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chart=deploy/helm/queuebox
all_on=(--set serviceMonitor.enabled=true --set secrets.create=true --set secrets.data.database-password=x --set migrations.enabled=false)

t0=$(date +%s)
step "helm lint and template"
"$helm" lint --strict "$chart" || fail "helm lint"
"$helm" lint --strict "$chart" "${all_on[@]}" || fail "helm lint (every option on)"
"$helm" template queuebox "$chart" --namespace queuebox >"$work/default.yaml" || fail "helm template"
"$helm" template queuebox "$chart" --namespace queuebox "${all_on[@]}" >"$work/all-on.yaml" || fail "helm template (every option on)"
grep -q '^kind: ServiceMonitor' "$work/all-on.yaml" || fail "helm template: serviceMonitor.enabled renders no ServiceMonitor"
echo "deploy: helm took $(($(date +%s) - t0))s"

t0=$(date +%s)
step "schema validation (kubecheck)"
"$kubecheck" "$work/default.yaml" || fail "kubecheck (chart defaults)"
"$kubecheck" "$work/all-on.yaml" || fail "kubecheck (chart, every option on)"
HELM=$helm bash deploy/kubernetes/render.sh "$work/plain.yaml" || fail "render plain manifests"
diff -u deploy/kubernetes/queuebox.yaml "$work/plain.yaml" ||
  fail "deploy/kubernetes/queuebox.yaml differs from the chart's render (run: HELM=$helm bash deploy/kubernetes/render.sh)"
"$kubecheck" deploy/kubernetes/queuebox.yaml || fail "kubecheck (plain manifests)"
# The Deployment the issue asks for: 2 replicas, probes on the health endpoints, a PDB.
for want in 'replicas: 2' 'path: /health/live' 'path: /health/ready' 'kind: PodDisruptionBudget' 'name: migrate'; do
  grep -q "$want" deploy/kubernetes/queuebox.yaml || fail "plain manifests: no '$want'"
done
echo "deploy: validation took $(($(date +%s) - t0))s"

t0=$(date +%s)
step "the chart's configuration passes queuebox check-config"
# The relay 50-install packaged (target/release; CI's 50-install drops target/debug with
# QB_DROP_DEBUG_TREE), else the one 10-rust built, else a debug build now.
relay=
for b in release debug; do
  [ -x "${CARGO_TARGET_DIR:-$root/target}/$b/queuebox" ] && { relay=${CARGO_TARGET_DIR:-$root/target}/$b/queuebox; break; }
done
[ -n "$relay" ] || { cargo build --quiet -p queuebox --bin queuebox; relay=${CARGO_TARGET_DIR:-$root/target}/debug/queuebox; }
"$helm" template queuebox "$chart" --show-only templates/configmap.yaml |
  sed -n '/^  queuebox.yml: |$/,$p' | tail -n +2 | sed 's/^    //' |
  sed "s#file:/etc/queuebox/secrets/#file:$work/#" >"$work/queuebox.yml"
echo secret >"$work/database-password"
if out=$(env -u QUEUEBOX_CONFIG_FILE "$relay" --config "$work/queuebox.yml" check-config 2>&1); then
  echo "deploy: check-config accepts the chart's configuration"
else
  echo "$out" >&2; fail "check-config (chart configuration)"
fi
echo "deploy: check-config took $(($(date +%s) - t0))s"

t0=$(date +%s)
step "systemd-analyze verify / security"
if ! command -v systemd-analyze >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /tmp/.qb-apt-updated ]; then apt-get update -qq && touch /tmp/.qb-apt-updated; fi
  apt-get install -y -qq systemd >/dev/null
fi
# verify needs ExecStart's program to exist: the same unit with the path of a stand-in.
mkdir -p "$work/unit"
cp /bin/true "$work/unit/queuebox"
sed "s#/usr/local/bin/queuebox#$work/unit/queuebox#" deploy/systemd/queuebox.service >"$work/unit/queuebox.service"
# verify exits 0 on a value it ignores ("Failed to parse ..., ignoring"): any output fails.
if out=$(systemd-analyze verify "$work/unit/queuebox.service" 2>&1) && [ -z "$out" ]; then
  echo "deploy: systemd-analyze verify: no warning"
else
  echo "$out" >&2; fail "systemd-analyze verify"
fi
# Exposure on systemd's 0-10 scale (threshold in tenths): 1.6 when written.
if out=$(systemd-analyze security --offline=yes --threshold=25 "$work/unit/queuebox.service" 2>&1); then
  echo "deploy: $(echo "$out" | grep 'Overall exposure')"
else
  echo "$out" | tail -30 >&2; fail "systemd-analyze security (exposure above 2.5)"
fi
echo "deploy: systemd took $(($(date +%s) - t0))s"

t0=$(date +%s)
step "rules: rulecheck (Prometheus's rule parser)"
"$rulecheck" deploy/prometheus/queuebox-rules.yml || fail "rulecheck"
if [ -n "$promtool" ]; then
  step "promtool check rules"
  "$promtool" check rules deploy/prometheus/queuebox-rules.yml || fail "promtool check rules"
fi
echo "deploy: rules took $(($(date +%s) - t0))s"

echo "deploy: $(($(date +%s) - t_all))s in all"
[ ${#failed[@]} -eq 0 ] || { echo "deploy: failed: ${failed[*]}" >&2; exit 1; }
echo "deploy: chart, manifests, unit and rules pass"
