"""The sandbox on a real Kubernetes control plane (``nrl-k8s sandbox up --control-plane real``).

Built from published modules (``binaries``), started on loopback by ``serve``: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kwok's fake GPU nodes (``stages``), the
real KubeRay operator, and in the daemon the local kubelet (``kubelet``: pods that must really
run, as local processes), the API server's egress proxy (``egress``) and the Dynamo controller.
"""
