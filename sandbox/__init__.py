"""A local Kubernetes control plane for trying and testing nrl-k8s without a cluster.

``nrl-k8s sandbox up`` (``process.py``) starts one background daemon (``controlplane/serve.py``)
that runs, on loopback only:

* **the real control plane**, built once per machine from published Go modules
  (``controlplane/binaries.py``): etcd, kube-apiserver (TLS, RBAC, token authentication),
  kube-controller-manager (garbage collector, Deployments, Jobs) and kube-scheduler;
* **the real KubeRay operator**, with ``--use-kubernetes-proxy``, and its CRDs;
* **kwok** (``controlplane/stages.py``): fake GPU nodes, and Stages that make the pods it plays
  Running and Ready;
* **a local kubelet** (``controlplane/kubelet.py``) for the pods whose work must really happen:
  one real ``ray start --head`` per RayCluster head pod (the head container's env and Secret
  volumes: ``driver_env.py``, ``ray_head.py``), KubeRay's submitter Job pods running their real
  command, a DGD's pods running Dynamo's own runtime from PyPI (``dynamo_runtime/``, wired by
  ``controlplane/dynamo_pods.py``: the frontend as written, GPU engines as Dynamo's mocker), and
  stub servers (``controlplane/stub.py``) for nrl-k8s Deployments. Every process it starts
  resolves cluster names through ``controlplane/cluster_dns.py``. kwok's Logs, Exec and
  PortForward objects point ``kubectl logs|exec|port-forward`` at those processes, and the API
  server reaches them through an egress proxy on a Unix socket (``controlplane/egress.py``) that
  refuses every other address;
* **our controllers** where no operator can be built here (``controlplane/dynamo.py``,
  ``controlplane/dra.py``): Dynamo's DGDs become Deployments and a frontend Service, with our
  DGD CRD in both served versions and its conversion webhook (``controlplane/webhook.py``); a
  ComputeDomain gets its channel ResourceClaimTemplate, and DeviceClasses and ResourceSlices let
  the real scheduler allocate DRA claims;
* **a front proxy** (``controlplane/front.py``) the user's kubeconfig points at: it counts
  requests and injects the API faults; RBAC faults are real RBAC (``controlplane/rbac.py``).

What it is not: no container runs and no image is pulled (a Ray head and its drivers run with
this machine's Python, a DGD's processes with Dynamo's venv), pods share this machine's network
and file system, no GPU or model exists (Dynamo's mocker emits random tokens from a tiny model's
vocabulary), and the Deployment stubs do nothing but answer.

Everything it writes is private to the user (files 0600, directories 0700, umask 077), and
nothing is sent off the machine. Faults are listed in ``faults.py``; ``nrl-k8s sandbox fault
set|clear`` changes them live.
"""

from __future__ import annotations

import importlib.util

from nrl_k8s.errors import MissingExtra

INSTALL = "pip install 'nrl-k8s[sandbox]'"
EXTRA_MODULES = ("ray", "kubernetes", "cryptography")  # what the sandbox extra installs


def require_extra() -> None:
    """MissingExtra naming the install command when a module of the ``sandbox`` extra is missing."""
    missing = [name for name in EXTRA_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtra(f"the sandbox needs {', '.join(missing)}, not installed: {INSTALL}")
