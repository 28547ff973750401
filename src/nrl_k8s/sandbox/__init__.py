"""A local, simulated Kubernetes control plane for trying nrl-k8s without a cluster.

``nrl-k8s sandbox up`` starts one background process (``daemon.py``) holding:

* an in-memory **Kubernetes API server** (``apiserver.py``): discovery, namespaces, pods,
  services, configmaps, secrets, events, deployments, ``resource.k8s.io/v1``
  resourceclaimtemplates, CRDs and their custom resources with ``/status``,
  SelfSubjectAccessReview, get/list/watch/create/update/patch/server-side apply/delete,
  ownerReference garbage collection, the service proxy and ``pods/log`` (``pod_logs.py``: the
  Ray head's real output, a RayJob submitter's driver log, the stubs' output). Bodies may be
  JSON, YAML or the protobuf ``kubectl create`` sends (``protobuf.py``). The kubeconfig it writes points at
  ``https://127.0.0.1:PORT`` with the server's self-signed CA embedded, because kubectl never
  sends a token over plain HTTP; the same port also answers plain HTTP (the operators use
  that). Objects live in memory (``--state FILE`` keeps them across restarts).
* the RayCluster, RayJob, DynamoGraphDeployment and ComputeDomain **CRDs** (not the DGD one
  with ``--fault no-dgd-crd``; KubeRay 1.5's RayJob CRD, without ``preRunningDeadlineSeconds``,
  with ``--fault old-rayjob-crd``); the DGD is served in ``v1beta1`` (stored) and ``v1alpha1``,
  converted both ways as the Dynamo operator's conversion webhook does (``conversion.py``);
* simulated **controllers** driven by watch events (``operators/``), creating the pods,
  Services, statuses and Events the real ones create (see each module for exactly which): KubeRay
  (RayCluster, RayJob), Dynamo (DGD), Deployment + endpoints (pods, ``Available``, a Service
  selecting a Deployment's pods reaches them), and the NVIDIA DRA driver (a ComputeDomain's
  channel ResourceClaimTemplate, ``status.status: Ready``);
* **one real Ray head** (``ray_head.py``), shared by every RayCluster: RayJob entrypoints and
  jobs submitted through a head Service (drivers, daemons) really run, as shell commands on
  this machine, in the environment ``sandbox up`` was started with plus what the cluster's head
  container would give them (``driver_env.py``): its env, ``secretKeyRef`` values resolved from
  the stored Secret, and its Secret volumes written under ``DIR/volumes`` (0700/0600; an env
  value pointing into a volume's ``mountPath`` is rewritten to the written copy, so the path
  differs from a pod's). A job's ``working_dir`` package really unpacks and the driver starts
  in it. Through ``<cluster>-head-svc`` each RayCluster's dashboard lists and serves only the
  jobs and packages submitted through it (``head_proxy.py``), and deleting a RayCluster stops
  them; other ports of the head container reach ``127.0.0.1:<same port>``;
* loopback **stubs** (``frontend_stub.py``): one OpenAI-style frontend per DGD (``/v1/models``,
  ``/health``, ``/live``) and one server per container port of each Deployment (200 on any GET).

What it does NOT simulate — do not mistake it for a cluster:

* **scheduling**: every pod "runs" on one fake node at 127.0.0.1 after a timer; resource
  requests, GPUs, node selectors, tolerations, affinity, quotas and queues are ignored (only
  the ``dgd-stuck-pending`` fault makes pods unschedulable);
* **kubelets, containers, images**: no container is created and no image is pulled; pod
  statuses are written by the operators. Only Ray job drivers run, on the shared Ray head,
  with this machine's Python — not in the RayCluster's image;
* **networking**: no pod network, cluster IPs or DNS; a Service is reachable only through the
  API server's service proxy, which forwards to the loopback endpoint recorded on the Service
  (the real Ray dashboard for ``<cluster>-head-svc:8265``, the stub for ``<dgd>-frontend:8000``,
  a Deployment's stubs for a Service selecting its pods);
* **real GPUs, devices or inference**: the stubs serve no completions; DRA claims are never
  allocated; a Deployment's containers do not run;
* **full isolation between RayClusters**: they all share the one Ray head, its CPUs, its GCS and
  its submission ids (an id another cluster used is "already exists"); only the Job and package
  API through each head Service is kept apart; the dashboard reached directly lists every job;
  worker pods add no capacity;
* KubeRay retries (``backoffLimit``), ``deletionStrategy``, autoscaling, submitter pods (K8sJobMode and
  SidecarMode submit like HTTPMode; InteractiveMode submits nothing, as upstream); Dynamo planners, rolling updates, NATS/etcd;
  ReplicaSets, StatefulSets, Jobs, probes; real RBAC (only the ``rbac-deny`` fault), admission
  webhooks, CRD schema validation, server defaults inside pod templates.

Everything listens on loopback only: the API server and stubs bind 127.0.0.1, and so does every
Ray server of the head, its workers and job drivers (``ray_head.py`` says how). Everything it
writes is private to the user: files 0600, directories it creates 0700 (Ray's temp dir, which
Ray makes 0777, sits inside one), under umask 077 — which job drivers inherit, so files a RayJob
writes are private too. Nothing is sent off the machine (``RAY_USAGE_STATS_ENABLED=0``).

Timing: simulated delays are timers (``delay / --speed``, times the ``slow=FACTOR`` fault); the
``delay=KIND:SECONDS`` fault (``sandbox up --delay KIND=SECONDS``) sets a kind's readiness time.
Faults are listed in ``faults.py``; ``nrl-k8s sandbox fault set|clear`` changes them live.
Lifecycle and files: ``process.py``.
"""
