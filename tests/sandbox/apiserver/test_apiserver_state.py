"""Persistence of objects (and CRDs) across restarts with ``state_file``."""

from __future__ import annotations

from kubernetes import client

from nrl_k8s.sandbox.apiserver import ApiServer
from nrl_k8s.sandbox.crds import RAYJOB_CRD
from nrl_k8s.sandbox.faults import Faults


def _start(state_file) -> tuple[ApiServer, client.ApiClient]:
    server = ApiServer(user_token="t", operator_token="o", faults=Faults(), state_file=state_file, tls=False)
    port = server.start()
    return server, client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}", api_key={"authorization": "Bearer t"}))


def test_state_survives_a_restart(tmp_path):
    state = tmp_path / "state.json"
    server, api = _start(state)
    server.install_crd(RAYJOB_CRD)
    made = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "ray.io", "v1", "default", "rayjobs", {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job"}, "spec": {"entrypoint": "true"}}
    )
    api.close()
    server.stop()

    server, api = _start(state)
    try:
        custom = client.CustomObjectsApi(api)
        again = custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", "job")
        assert again["metadata"]["uid"] == made["metadata"]["uid"]
        later = client.CoreV1Api(api).create_namespaced_config_map("default", {"metadata": {"name": "c"}})
        assert int(later.metadata.resource_version) > int(made["metadata"]["resourceVersion"])
    finally:
        api.close()
        server.stop()
