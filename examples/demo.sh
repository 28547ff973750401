#!/usr/bin/env bash
# The README's demo: validate the sandbox example and print what `run --rayjob` would apply.
set -euo pipefail
cd "$(dirname "$0")/.."
pair=(examples/sandbox.yaml --infra examples/sandbox.infra.yaml)
nrl-k8s check "${pair[@]}"
nrl-k8s run --rayjob --dry-run "${pair[@]}"
nrl-k8s cluster up --dry-run --target dynamo.serving "${pair[@]}"
