"""Protobuf request bodies (what ``kubectl create`` and ``kubectl auth can-i`` send) and Secret
``stringData`` on every write.

The decoder cases are bodies captured from kubectl 1.32 (``kubectl create ...`` against the
sandbox, hex of the request body); the kubectl cases drive the real kubectl when it is installed.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from kubernetes import client

from nrl_k8s.sandbox import protobuf

# kubectl create ns foo
NAMESPACE = "6b3873000a0f0a02763112094e616d657370616365121b0a130a03666f6f12001a0022002a0032003800420012001a020a001a002200"
# kubectl create configmap cm1 --from-literal=a=b --from-literal=c=d
CONFIGMAP = ("6b3873000a0f0a0276311209436f6e6669674d617012250a130a03636d3112001a0022002a0032003800420012060a016112016212"
             "060a01631201641a002200")
# kubectl create secret generic s1 --from-literal=password=hunter2
SECRET = ("6b3873000a0c0a0276311206536563726574122b0a120a02733112001a0022002a0032003800420012130a0870617373776f726412"
          "0768756e746572321a001a002200")
# kubectl auth can-i create rayjobs
ACCESS_REVIEW = ("6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a65637441636365737352"
                 "657669657712420a100a0012001a0022002a0032003800420012240a220a0764656661756c7412066372656174651a0022002a"
                 "077261796a6f627332003a001a08080012001a0020001a002200")
# kubectl create deployment d2 --image=nginx --replicas=2 --port=80 -- sleep 10
DEPLOYMENT = ("6b3873000a150a07617070732f7631120a4465706c6f796d656e7412bf010a1d0a02643212001a0022002a003200380042005a090a"
              "0361707012026432128f010802120b0a090a03617070120264321a760a1b0a0012001a0022002a003200380042005a090a036170"
              "7012026432125712390a056e67696e7812056e67696e781a05736c6565701a0231302a00320a0a001000185022002a0042006a00"
              "7200800100880100900100a201001a00320042004a0052005800600068008201008a01009a0100c2010022020a00280038001a0c"
              "0800100018002000280038001a002200")
# kubectl create service nodeport np --tcp=80:http
SERVICE = ("6b3873000a0d0a02763112075365727669636512680a1d0a026e7012001a0022002a003200380042005a090a0361707012026e7012"
           "430a1e0a0738302d6874747012035443501850220a080110001a0468747470280012090a0361707012026e701a0022084e6f6465506f"
           "72743a00420052005a00600068001a020a001a002200")
# kubectl create serviceaccount sa1
SERVICE_ACCOUNT = "6b3873000a140a027631120e536572766963654163636f756e7412150a130a0373613112001a0022002a003200380042001a002200"


@pytest.mark.parametrize(
    "body, expected",
    [
        (NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foo"}}),
        (CONFIGMAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "b", "c": "d"}}),
        (SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"password": "aHVudGVyMg=="}}),
        (ACCESS_REVIEW, {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                         "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "rayjobs"}}}),
        (DEPLOYMENT, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d2", "labels": {"app": "d2"}},
                      "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d2"}},
                               "template": {"metadata": {"labels": {"app": "d2"}}, "spec": {"containers": [
                                   {"name": "nginx", "image": "nginx", "command": ["sleep", "10"],
                                    "ports": [{"containerPort": 80}]}]}}}}),
        (SERVICE, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "np", "labels": {"app": "np"}},
                   "spec": {"ports": [{"name": "80-http", "protocol": "TCP", "port": 80, "targetPort": "http"}],
                            "selector": {"app": "np"}, "type": "NodePort"}}),
        (SERVICE_ACCOUNT, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa1"}}),
    ],
    ids=["namespace", "configmap", "secret", "access-review", "deployment", "service", "serviceaccount"],
)
def test_decodes_what_kubectl_sends(body, expected):
    assert protobuf.decode(bytes.fromhex(body)) == expected


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (lengths < 128)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return protobuf.MAGIC + _field(1, type_meta) + _field(2, raw)


def test_zero_pointer_fields_are_kept_and_zero_values_dropped():
    # ConfigMap{metadata{name: "c"}, immutable: false (a *bool: set), binaryData{"b": "\x00\x01"}}
    raw = _field(1, _field(1, b"c")) + bytes([4 << 3, 0]) + _field(3, _field(1, b"b") + _field(2, b"\x00\x01"))
    assert protobuf.decode(_envelope("v1", "ConfigMap", raw)) == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "immutable": False,
        "binaryData": {"b": "AAE="}}


@pytest.mark.parametrize(
    "body, error, text",
    [
        (b"{}", protobuf.ProtobufError, "magic"),
        (protobuf.MAGIC + b"\x0a\x05\x0a", protobuf.ProtobufError, "truncated"),
        (_envelope("v1", "Pod", b""), protobuf.Unsupported, "no protobuf Pod (v1)"),
        (_envelope("v1", "ConfigMap", _field(9, b"x")), protobuf.Unsupported, "field 9 of protobuf ConfigMap"),
    ],
    ids=["no-magic", "truncated", "unknown-kind", "unknown-field"],
)
def test_refuses_what_it_cannot_decode(body, error, text):
    with pytest.raises(error, match=re.escape(text)):
        protobuf.decode(body)


PROTOBUF = {"Content-Type": protobuf.MEDIA_TYPE, "Accept": f"{protobuf.MEDIA_TYPE},application/json"}


def test_protobuf_create_over_http_answers_json(server, http):
    created = http.post("/api/v1/namespaces/default/secrets", content=bytes.fromhex(SECRET), headers=PROTOBUF)
    assert (created.status_code, created.headers["content-type"]) == (201, "application/json")
    assert created.json()["data"] == {"password": "aHVudGVyMg=="} and created.json()["type"] == "Opaque"


@pytest.mark.parametrize(
    "path, body, code, text",
    [
        ("/api/v1/namespaces/default/configmaps", _envelope("v1", "ConfigMap", _field(9, b"x")), 415, "field 9"),
        ("/api/v1/namespaces/default/configmaps", protobuf.MAGIC + b"\x0a\x05\x0a", 400, "could not be decoded"),
        ("/api/v1/namespaces/default/events", _envelope("v1", "Event", b""), 415,
         "accepted media types include: application/json, application/yaml"),
    ],
    ids=["unknown-field", "malformed", "kind-not-decoded"],
)
def test_protobuf_bodies_it_cannot_take_are_refused(server, http, path, body, code, text):
    answer = http.post(path, content=body, headers=PROTOBUF)
    assert (answer.status_code, answer.json()["code"]) == (code, code) and text in answer.json()["message"]


def test_a_client_that_accepts_only_protobuf_gets_406(server, http):
    answer = http.get("/api/v1/namespaces", headers={"Accept": protobuf.MEDIA_TYPE})
    assert (answer.status_code, answer.json()["reason"]) == (406, "NotAcceptable")


def test_secret_string_data_becomes_data_on_every_write(server, core, http):
    core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "data": {"a": "eA=="}})
    replaced = core.replace_namespaced_secret("s", "default", {"metadata": {"name": "s"}, "stringData": {"b": "y"}})
    assert replaced.data == {"b": "eQ=="} and replaced.string_data is None
    patched = core.patch_namespaced_secret("s", "default", {"stringData": {"b": "z", "c": "w"}})
    assert patched.data == {"b": "eg==", "c": "dw=="} and patched.string_data is None
    applied = http.patch("/api/v1/namespaces/default/secrets/s", params={"fieldManager": "me", "force": "true"},
                         content=json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                                             "stringData": {"d": "v"}}),
                         headers={"Content-Type": "application/apply-patch+yaml"})
    assert applied.status_code == 200 and applied.json()["data"]["d"] == "dg==" and "stringData" not in applied.json()
    stored = http.get("/api/v1/namespaces/default/secrets/s").json()
    assert "stringData" not in stored and stored["data"]["d"] == "dg=="


kubectl_only = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@kubectl_only
def test_kubectl_create_sends_protobuf_and_succeeds(server, kubectl, core):
    assert kubectl("create", "namespace", "team-a").strip() == "namespace/team-a created"
    assert kubectl("create", "configmap", "cm", "--from-literal=a=b").strip() == "configmap/cm created"
    assert kubectl("create", "secret", "generic", "s", "--from-literal=password=hunter2").strip() == "secret/s created"
    assert kubectl("create", "serviceaccount", "runner").strip() == "serviceaccount/runner created"
    assert kubectl("create", "deployment", "web", "--image=nginx:1", "--replicas=0").strip() == "deployment.apps/web created"
    assert kubectl("create", "service", "clusterip", "web", "--tcp=80:8080").strip() == "service/web created"
    assert kubectl("create", "configmap", "dry", "--from-literal=x=y", "--dry-run=server", "-o", "name").strip() == "configmap/dry"
    assert core.read_namespace("team-a").status.phase == "Active"
    assert core.read_namespaced_config_map("cm", "default").data == {"a": "b"}
    assert core.read_namespaced_secret("s", "default").data == {"password": "aHVudGVyMg=="}
    assert client.AppsV1Api(core.api_client).read_namespaced_deployment("web", "default").spec.replicas == 0
    assert core.read_namespaced_service("web", "default").spec.ports[0].target_port == 8080
    assert [cm.metadata.name for cm in core.list_namespaced_config_map("default").items] == ["cm"]


@kubectl_only
def test_kubectl_auth_can_i(server, crds, faults, kubectl):
    assert kubectl("auth", "can-i", "create", "rayjobs").strip() == "yes"
    faults.set("rbac-deny", "create:rayjobs")
    done = kubectl.raw("auth", "can-i", "create", "rayjobs")
    assert (done.returncode, done.stdout.strip()) == (1, "no - denied by the sandbox rbac-deny fault")
    assert kubectl("auth", "can-i", "get", "pods", "--subresource=log").strip() == "yes"
