"""A local, simulated Kubernetes control plane for trying nrl-k8s without a cluster.

``nrl-k8s sandbox up`` starts one background process (``daemon.py``) holding:

* an in-memory **Kubernetes API server** (``apiserver.py``): discovery, namespaces, pods,
  services, configmaps, secrets, events, CRDs and their custom resources with ``/status``,
  SelfSubjectAccessReview, get/list/watch/create/update/patch/server-side apply/delete,
  ownerReference garbage collection and the service proxy. The kubeconfig it writes points at
  ``https://127.0.0.1:PORT`` with the server's self-signed CA embedded, because kubectl never
  sends a token over plain HTTP; the same port also answers plain HTTP (the operators use
  that). Objects live in memory (``--state FILE`` keeps them across restarts).
* the RayCluster, RayJob and DynamoGraphDeployment **CRDs** (not the DGD one with
  ``--fault no-dgd-crd``); the DGD is served in ``v1beta1`` (stored) and ``v1alpha1``,
  converted both ways as the Dynamo operator's conversion webhook does (``conversion.py``);
* a simulated **KubeRay operator** and **Dynamo operator** (``operators/``): reconcilers
  driven by watch events that create the pods, Services and statuses the real operators
  create (see each module for exactly which);
* **one real Ray head** (``ray_head.py``), shared by every RayCluster: RayJob entrypoints are
  really submitted to its dashboard and really run, as shell commands on this machine, in the
  environment ``sandbox up`` was started with plus what the cluster's head container would give
  them (``driver_env.py``): its env, ``secretKeyRef`` values resolved from the stored Secret,
  and its Secret volumes written under ``DIR/volumes`` (0700/0600; an env value pointing into
  a volume's ``mountPath`` is rewritten to the written copy, so the path differs from a pod's);
* one **stub Dynamo frontend** per DGD (``frontend_stub.py``): ``/v1/models``, ``/health``,
  ``/live`` on 127.0.0.1.

What it does NOT simulate — do not mistake it for a cluster:

* **scheduling**: every pod "runs" on one fake node at 127.0.0.1 after a timer; resource
  requests, GPUs, node selectors, tolerations, affinity, quotas and queues are ignored (only
  the ``dgd-stuck-pending`` fault makes pods unschedulable);
* **kubelets, containers, images**: no container is created and no image is pulled; pod
  statuses are written by the operators. Only Ray job drivers run, on the shared Ray head,
  with this machine's Python — not in the RayCluster's image;
* **networking**: no pod network, cluster IPs or DNS; a Service is reachable only through the
  API server's service proxy, which forwards to the loopback endpoint recorded on the Service
  (the real Ray dashboard for ``<cluster>-head-svc:8265``, the stub for ``<dgd>-frontend:8000``);
* **real GPUs or inference**: the stub frontend serves no completions;
* **isolation between RayClusters**: they all share the one Ray head (so the one dashboard
  lists every cluster's jobs) and its CPUs; worker pods add no capacity;
* KubeRay suspend, retries (``backoffLimit``), autoscaling, submitter pods (every
  ``submissionMode`` behaves like HTTPMode); Dynamo planners, rolling updates, NATS/etcd;
  real RBAC (only the ``rbac-deny`` fault), admission webhooks, CRD schema validation.

Everything listens on loopback only: the API server and stubs bind 127.0.0.1, and so does every
Ray server of the head, its workers and job drivers (``ray_head.py`` says how). Everything it
writes is private to the user: files 0600, directories it creates 0700 (Ray's temp dir, which
Ray makes 0777, sits inside one), under umask 077 — which job drivers inherit, so files a RayJob
writes are private too. Nothing is sent off the machine (``RAY_USAGE_STATS_ENABLED=0``).

Timing: simulated delays are timers (``delay / --speed``, times the ``slow=FACTOR`` fault).
Faults are listed in ``faults.py``; ``nrl-k8s sandbox fault set|clear`` changes them live.
Lifecycle and files: ``process.py``.
"""
