#!/usr/bin/env bash
# The README's demo, end to end on the local sandbox (no cluster needed):
# start the real control plane (kube-apiserver, the KubeRay operator, kwok GPU nodes), run the sandbox example with
# `run --rayjob` (DGD first, then the RayJob), show `status`; then the long-lived flow
# (`run --raycluster`: Deployment, two RayClusters, DGD, gym daemon, uploaded driver code),
# once cold and once warm (everything reused, nothing uploaded again); stop everything.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${NRL_K8S_DEMO_DIR:-$PWD/.sandbox}"
pair=(examples/sandbox.yaml --infra examples/sandbox.infra.yaml)

nrl-k8s sandbox down --dir "$dir" >/dev/null 2>&1 || true
eval "$(nrl-k8s sandbox up --dir "$dir")"
trap 'nrl-k8s sandbox down --dir "$dir"' EXIT

nrl-k8s check "${pair[@]}"
nrl-k8s run --rayjob --no-shutdown "${pair[@]}"
nrl-k8s status "${pair[@]}"

longlived=(examples/sandbox_longlived.yaml --infra examples/sandbox_longlived.infra.yaml)
nrl-k8s run --raycluster "${longlived[@]}"
nrl-k8s run --raycluster "${longlived[@]}"
nrl-k8s status
