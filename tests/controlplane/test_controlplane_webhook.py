"""The DGD conversion webhook over HTTPS (no cluster): ConversionReviews as the API server sends
them, answered with every object converted, and the CRD that points the API server at it."""

from __future__ import annotations

import base64
import copy
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from nrl_k8s_sandbox.controlplane.conversion import ALPHA, BETA
from nrl_k8s_sandbox.controlplane.crds import COMPUTEDOMAIN_CRD, crds, dgd_crd
from nrl_k8s_sandbox.controlplane.pki import Authority
from nrl_k8s_sandbox.controlplane.webhook import ConversionWebhook

GOLDEN = Path(__file__).parent.parent / "golden"


@pytest.fixture(scope="module")
def webhook(tmp_path_factory):
    ca = Authority(tmp_path_factory.mktemp("pki"))
    pair = ca.issue("webhook", "dgd-webhook", server=True)
    hook = ConversionWebhook(pair.cert, pair.key)
    hook.start()
    try:
        yield hook, ssl.create_default_context(cafile=str(ca.cert))
    finally:
        hook.stop()


def post(webhook, body: bytes, path: str = "/convert?timeout=30s") -> tuple[int, dict]:
    """POST ``body`` to the webhook as the API server does (it appends ``?timeout=``)."""
    hook, context = webhook
    url = hook.url.replace("/convert", path)
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def converted(webhook, objects: list[dict], desired: str, uid: str = "review-1") -> list[dict]:
    review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
              "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}}
    code, answer = post(webhook, json.dumps(review).encode())
    assert code == 200
    assert answer["apiVersion"] == "apiextensions.k8s.io/v1" and answer["kind"] == "ConversionReview"
    assert answer["response"]["uid"] == uid
    assert answer["response"]["result"] == {"status": "Success"}, answer
    return answer["response"]["convertedObjects"]


def golden(name: str) -> dict:
    return next(doc for doc in yaml.safe_load_all((GOLDEN / name).read_text()) if doc)


def test_webhook_serves_loopback_https(webhook):
    hook, _ = webhook
    assert hook.url.startswith("https://127.0.0.1:") and hook.url.endswith("/convert")


@pytest.mark.parametrize("name", ["dgd.qwen3_0.6b_kind.yaml", "dgd.qwen3_30b_disagg_gb300.yaml",
                                  "dgd.qwen3_4b_with_benchmark.yaml"])
def test_v1alpha1_round_trip_through_http(webhook, name):
    alpha = golden(name)
    alpha["status"] = {"state": "successful", "observedGeneration": 1,
                       "services": {"Frontend": {"replicas": 1, "readyReplicas": 1}}}
    [beta] = converted(webhook, [copy.deepcopy(alpha)], BETA)
    assert beta["apiVersion"] == BETA
    assert "services" not in beta["spec"] and beta["spec"]["components"]
    assert beta["status"]["components"] == alpha["status"]["services"]
    [back] = converted(webhook, [beta], ALPHA)
    assert back == alpha


def test_v1beta1_round_trip_and_several_objects(webhook):
    first, second = golden("dgd.qwen3_0.6b_kind_v1beta1.yaml"), golden("dgd.qwen3_30b_disagg_gb300_v1beta1.yaml")
    alphas = converted(webhook, [first, second], ALPHA)
    assert [a["apiVersion"] for a in alphas] == [ALPHA, ALPHA]
    assert converted(webhook, alphas, BETA) == [first, second]


def test_an_object_already_in_the_desired_version_comes_back_as_is(webhook):
    beta = golden("dgd.qwen3_0.6b_kind_v1beta1.yaml")
    assert converted(webhook, [beta], BETA) == [beta]


def test_a_version_it_cannot_convert_fails_the_review(webhook):
    review = {"request": {"uid": "u", "desiredAPIVersion": "nvidia.com/v2",
                          "objects": [golden("dgd.qwen3_0.6b_kind.yaml")]}}
    code, answer = post(webhook, json.dumps(review).encode())
    assert code == 200
    assert answer["response"]["uid"] == "u"
    assert answer["response"]["result"]["status"] == "Failure"
    assert "nvidia.com/v2" in answer["response"]["result"]["message"]
    assert "convertedObjects" not in answer["response"]


def test_something_that_is_not_an_object_fails_the_review(webhook):
    review = {"request": {"uid": "u", "desiredAPIVersion": BETA, "objects": [5]}}
    code, answer = post(webhook, json.dumps(review).encode())
    assert (code, answer["response"]["result"]["status"]) == (200, "Failure")


def test_bad_requests(webhook):
    assert post(webhook, b"{not json")[0] == 400
    assert post(webhook, b"[]")[0] == 400
    assert post(webhook, b"{}", path="/elsewhere")[0] == 404


def test_dgd_crd_points_the_api_server_at_the_webhook():
    crd = dgd_crd("https://127.0.0.1:1234/convert", b"PEM")
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "dynamographdeployments.nvidia.com"
    assert (spec["group"], spec["scope"], spec["names"]["shortNames"]) == ("nvidia.com", "Namespaced", ["dgd"])
    versions = {v["name"]: v for v in spec["versions"]}
    assert {name: (v["served"], v["storage"]) for name, v in versions.items()} == {
        "v1alpha1": (True, False), "v1beta1": (True, True)}
    assert all(v["subresources"] == {"status": {}} for v in versions.values())
    assert [c["name"] for c in versions["v1beta1"]["additionalPrinterColumns"]] == ["State", "Ready", "Backend", "Age"]
    beta_spec = versions["v1beta1"]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert beta_spec["properties"]["components"]["items"]["required"] == ["name"]
    alpha_status = versions["v1alpha1"]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert alpha_status["properties"]["state"] == {"type": "string"} and "services" in alpha_status["properties"]
    webhook = spec["conversion"]["webhook"]
    assert spec["conversion"]["strategy"] == "Webhook" and webhook["conversionReviewVersions"] == ["v1"]
    assert webhook["clientConfig"] == {
        "url": "https://127.0.0.1:1234/convert",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }


def test_computedomain_crd():
    spec = COMPUTEDOMAIN_CRD["spec"]
    assert (spec["group"], spec["names"]["kind"], spec["scope"]) == (
        "resource.nvidia.com",
        "ComputeDomain",
        "Namespaced",
    )
    [version] = spec["versions"]
    assert (version["name"], version["storage"], version["subresources"]) == ("v1beta1", True, {"status": {}})
    assert [c["metadata"]["name"] for c in crds("https://127.0.0.1:1/convert", b"x")] == [
        "dynamographdeployments.nvidia.com", "computedomains.resource.nvidia.com"]
