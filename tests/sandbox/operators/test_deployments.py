"""The simulated Deployment and endpoints controllers against a real `sandbox up`, with the official client."""

from __future__ import annotations

import json
import shutil

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_helpers import condition, field, proxy
from sandbox_harness import History, eventually, observe, unique

from nrl_k8s.kinds import deployment as deployment_kind
from nrl_k8s.kinds.base import Ready
from nrl_k8s.sandbox.proxy import ENDPOINTS_ANNOTATION


@pytest.fixture(scope="module")
def apps(api) -> client.AppsV1Api:
    return client.AppsV1Api(api)


def manifest(name: str, replicas: int = 1, ports=(("http", 8080),), env: str = "a") -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "server", "image": "example/server:1", "env": [{"name": "V", "value": env}],
                    "ports": [{"name": n, "containerPort": p} for n, p in ports],
                }]},
            },
        },
    }  # fmt: skip


def service(name: str, target, port: int = 80, port_name: str = "web") -> dict:
    return {
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"name": port_name, "port": port, "targetPort": target}]},
    }


def raw(call, *args) -> dict:
    return json.loads(call(*args, _preload_content=False).data)


def available(name: str):
    """Until the Deployment is Ready by nrl-k8s's own readiness rule (generation observed, all available)."""
    return lambda objects: name in objects and isinstance(deployment_kind.readiness(objects[name]), Ready)


def pods_of(core, ns: str, name: str) -> list[dict]:
    return json.loads(core.list_namespaced_pod(ns, label_selector=f"app={name}", _preload_content=False).data)["items"]


def test_deployment_gets_ready_pods_and_the_status_of_the_real_controller(sandbox_namespace, core, apps):
    ns, name = sandbox_namespace, unique("web")
    with History(apps.list_namespaced_deployment, ns, field_selector=f"metadata.name={name}") as history:
        created = apps.create_namespaced_deployment(ns, manifest(name, replicas=2))
        history.wait(lambda h: available(name)(h.objects()), what="the Deployment Available")
        first = history.events(name)[0][1]
    assert not isinstance(deployment_kind.readiness(first), Ready)  # not Available from the start
    live = raw(apps.read_namespaced_deployment, name, ns)
    status = live["status"]
    assert {k: status.get(k) for k in ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas", "observedGeneration")} \
        == {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2, "observedGeneration": 1}
    assert (condition(live, "Available")["status"], condition(live, "Available")["reason"]) == ("True", "MinimumReplicasAvailable")
    assert condition(live, "Progressing")["reason"] == "NewReplicaSetAvailable"

    pods = pods_of(core, ns, name)
    assert len(pods) == 2
    for pod in pods:
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Deployment", name, created.metadata.uid, True)
        assert pod["metadata"]["labels"]["app"] == name and pod["metadata"]["labels"]["pod-template-hash"]
        assert pod["status"]["phase"] == "Running" and all(c["ready"] for c in pod["status"]["containerStatuses"])

    core.delete_namespaced_pod(pods[0]["metadata"]["name"], ns)  # replaced, like a pod that died
    replaced = observe(core.list_namespaced_pod, ns, label_selector=f"app={name}",
                       until=lambda o: pods[0]["metadata"]["name"] not in o and len(o) == 2
                       and all(p["status"]["phase"] == "Running" for p in o.values()))  # fmt: skip
    assert pods[1]["metadata"]["name"] in replaced
    apps.delete_namespaced_deployment(name, ns)
    observe(core.list_namespaced_pod, ns, label_selector=f"app={name}", until=lambda o: not o)


@pytest.mark.parametrize("target", [8080, "http"], ids=["target-port-number", "target-port-name"])
def test_a_service_selecting_the_deployments_pods_reaches_its_stub_through_the_proxy(sandbox_namespace, api, core, apps, target):
    ns, name = sandbox_namespace, unique("svc")
    core.create_namespaced_service(ns, service(name, target))  # before the pods exist
    apps.create_namespaced_deployment(ns, manifest(name))
    observe(apps.list_namespaced_deployment, ns, field_selector=f"metadata.name={name}", until=available(name))

    # written before the Deployment was reported Available: no wait needed
    annotation = json.loads(core.read_namespaced_service(name, ns).metadata.annotations[ENDPOINTS_ANNOTATION])
    assert set(annotation) == {"80", "web"} and annotation["80"].startswith("http://127.0.0.1:")
    for port in ("80", "web"):
        code, body = proxy(api, "GET", ns, f"{name}:{port}", "healthz/deep?x=1")
        assert code == 200, body
        assert json.loads(body)["path"] == "/healthz/deep?x=1"

    apps.delete_namespaced_deployment(name, ns)
    observe(core.list_namespaced_service, ns, field_selector=f"metadata.name={name}",
            until=lambda o: ENDPOINTS_ANNOTATION not in (field(o.get(name), "metadata", "annotations") or {}))  # fmt: skip
    with pytest.raises(ApiException) as err:
        core.connect_get_namespaced_service_proxy_with_path(f"{name}:80", ns, "healthz")
    assert err.value.status == 503
    eventually(lambda: _refused(annotation["80"]), what="the stub stopped")


def _refused(url: str) -> bool:
    import httpx

    try:
        httpx.get(url, timeout=5, trust_env=False)
    except httpx.TransportError:
        return True
    return False


def test_a_template_change_rolls_the_pods_and_scaling_adds_or_removes_them(sandbox_namespace, api, core, apps):
    ns, name = sandbox_namespace, unique("roll")
    apps.create_namespaced_deployment(ns, manifest(name))
    core.create_namespaced_service(ns, service(name, 8080))
    observe(apps.list_namespaced_deployment, ns, field_selector=f"metadata.name={name}", until=available(name))
    (old,) = pods_of(core, ns, name)

    with History(core.list_namespaced_pod, ns, label_selector=f"app={name}") as pods:
        changed = manifest(name, ports=(("http", 9090),), env="b")["spec"]["template"]
        apps.patch_namespaced_deployment(name, ns, {"spec": {"template": changed}}, _content_type="application/merge-patch+json")
        done = observe(apps.list_namespaced_deployment, ns, field_selector=f"metadata.name={name}",
                       until=lambda o: available(name)(o) and o[name]["status"]["observedGeneration"] == 2)  # fmt: skip
        pods.wait(lambda h: set(h.objects()) and old["metadata"]["name"] not in h.objects(), what="the old pod gone")
        (new,) = pods.objects().values()
        # the new pod was Running before the old one went: never a moment without a Running pod
        running = {old["metadata"]["name"]}
        for kind, pod in pods.events():
            if kind == "DELETED" or pod["status"].get("phase") != "Running":
                running.discard(pod["metadata"]["name"])
            else:
                running.add(pod["metadata"]["name"])
            assert running, [(k, p["metadata"]["name"], p["status"].get("phase")) for k, p in pods.events()]
    assert new["metadata"]["labels"]["pod-template-hash"] != old["metadata"]["labels"]["pod-template-hash"]
    assert new["spec"]["containers"][0]["env"] == [{"name": "V", "value": "b"}]
    assert done[name]["status"]["updatedReplicas"] == 1
    # the Service follows the new pod's port (targetPort 8080 no longer exists: no endpoints)
    observe(core.list_namespaced_service, ns, field_selector=f"metadata.name={name}",
            until=lambda o: ENDPOINTS_ANNOTATION not in (field(o.get(name), "metadata", "annotations") or {}))  # fmt: skip
    core.patch_namespaced_service(name, ns, {"spec": {"ports": [{"name": "web", "port": 80, "targetPort": 9090}]}})
    eventually(lambda: proxy(api, "GET", ns, f"{name}:80", "x")[0] == 200, what="the Service reaching the new port")

    apps.patch_namespaced_deployment(name, ns, {"spec": {"replicas": 3}})
    scaled = observe(apps.list_namespaced_deployment, ns, field_selector=f"metadata.name={name}",
                     until=lambda o: available(name)(o) and o[name]["status"].get("availableReplicas") == 3)  # fmt: skip
    assert len(pods_of(core, ns, name)) == 3 and scaled[name]["status"]["replicas"] == 3
    apps.patch_namespaced_deployment(name, ns, {"spec": {"replicas": 0}})
    observe(core.list_namespaced_pod, ns, label_selector=f"app={name}", until=lambda o: not o)
    zero = observe(apps.list_namespaced_deployment, ns, field_selector=f"metadata.name={name}",
                   until=lambda o: o[name]["status"].get("observedGeneration") == 4 and "replicas" not in o[name]["status"])  # fmt: skip
    assert condition(zero[name], "Available")["status"] == "True"
    assert not {"readyReplicas", "availableReplicas", "updatedReplicas"} & set(zero[name]["status"])


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_rollout_status_and_get(sandbox, sandbox_namespace, tmp_path):
    import yaml

    name = unique("kubectl-deploy")
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(manifest(name)))
    ns = ["-n", sandbox_namespace]
    assert f"deployment.apps/{name} created" in sandbox.kubectl("apply", *ns, "-f", str(path)).stdout
    assert "successfully rolled out" in sandbox.kubectl("rollout", "status", *ns, f"deployment/{name}", "--timeout=240s").stdout
    sandbox.kubectl("wait", *ns, "--for=condition=Available", f"deployment/{name}", "--timeout=240s")
    assert sandbox.kubectl("get", *ns, "deploy", name, "-o", "jsonpath={.status.readyReplicas}").stdout == "1"
    sandbox.kubectl("delete", *ns, "-f", str(path), "--wait=true")
