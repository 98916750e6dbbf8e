#!/usr/bin/env bash
# Writes the plain manifests (queuebox.yaml) from the Helm chart with its default values, for
# `kubectl apply -f` without Helm: namespace "queuebox", release "queuebox". The Secret is
# not in them: create it first (README.md). scripts/test.d/52-deploy.sh renders them again
# and fails when the committed file differs.
# Usage: HELM=<helm binary> bash deploy/kubernetes/render.sh [out file]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-deploy/kubernetes/queuebox.yaml}
{
  echo "# QueueBox relay: plain Kubernetes manifests, rendered from deploy/helm/queuebox with its"
  echo "# default values by deploy/kubernetes/render.sh (do not edit by hand; change the chart)."
  echo "# kubectl create namespace queuebox"
  echo "# kubectl -n queuebox create secret generic queuebox --from-file=database-password=./database-password"
  echo "# kubectl -n queuebox apply -f deploy/kubernetes/queuebox.yaml"
  "${HELM:-helm}" template queuebox deploy/helm/queuebox --namespace queuebox |
    grep -v -e '^ *helm.sh/chart:' -e '^ *app.kubernetes.io/managed-by:' -e '^# Source:'
} >"$out"
