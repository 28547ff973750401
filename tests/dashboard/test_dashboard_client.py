"""Unit tests of the dashboard client over httpx.MockTransport (the transport is the seam)."""

from __future__ import annotations

import base64
import hashlib
import json
import struct

import httpcore
import httpx
import pytest

from nrl_k8s.errors import DashboardError, JobGone, SubmissionExists, WaitTimeout
from nrl_k8s.kube.connection import Connection, tls_context
from nrl_k8s.ray.dashboard import Dashboard, JobInfo
from nrl_k8s.ray.package import stage

BASE = "http://127.0.0.1:8265"

JOB = {
    "type": "SUBMISSION",
    "job_id": "02000000",
    "submission_id": "run-1",
    "driver_info": {"id": "02000000", "node_ip_address": "127.0.0.1", "pid": "42"},
    "status": "SUCCEEDED",
    "entrypoint": "echo hello",
    "message": "Job finished successfully.",
    "error_type": None,
    "start_time": 1730000000123,
    "end_time": 1730000004567,
    "metadata": {"owner": "nrl-k8s"},
    "runtime_env": {},
    "driver_agent_http_address": "http://127.0.0.1:52365",
    "driver_node_id": "abc",
    "driver_exit_code": 0,
}


class Script:
    """A MockTransport handler answering from a list (responses or exceptions), recording requests."""

    def __init__(self, *answers: httpx.Response | Exception):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def dashboard(self, **options) -> Dashboard:
        return Dashboard(BASE, transport=httpx.MockTransport(self), backoff_s=0, **options)

    @property
    def calls(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]


def ok(body) -> httpx.Response:
    return httpx.Response(200, json=body)


def text(code: int, body: str) -> httpx.Response:
    return httpx.Response(code, text=body)


NO_AGENT = text(500, "No available agent to submit job, please try again later.")
DUPLICATE_TRACEBACK = (
    "Traceback (most recent call last):\n  File \"job_manager.py\", line 1, in submit_job\n"
    "ValueError: Job with submission_id run-1 already exists. Please use a different submission_id.\n.\n"
)


# -- JSON → JobInfo ---------------------------------------------------------------------------

PARSE_CASES = {
    "full": (
        JOB,
        JobInfo("run-1", "02000000", "SUCCEEDED", "Job finished successfully.", "echo hello",
                1730000000123, 1730000004567, 0, {"owner": "nrl-k8s"}),
    ),
    "pending-missing-fields": (
        {"submission_id": "run-2", "status": "PENDING", "entrypoint": "sleep 1"},
        JobInfo("run-2", None, "PENDING", "", "sleep 1", None, None, None, {}),
    ),
    "nulls": (
        {"submission_id": None, "job_id": "03000000", "status": "RUNNING", "message": None, "metadata": None,
         "start_time": 5, "end_time": None, "driver_exit_code": None},
        JobInfo(None, "03000000", "RUNNING", "", "", 5, None, None, {}),
    ),
    "failed-exit-code": (
        {"submission_id": "run-3", "status": "FAILED", "driver_exit_code": 3, "end_time": 7},
        JobInfo("run-3", None, "FAILED", "", "", None, 7, 3, {}),
    ),
}


@pytest.mark.parametrize(("data", "expected"), PARSE_CASES.values(), ids=PARSE_CASES.keys())
def test_job_info_from_json(data, expected):
    assert JobInfo.from_json(data) == expected


@pytest.mark.parametrize(
    ("status", "terminal"),
    [("PENDING", False), ("RUNNING", False), ("STOPPED", True), ("SUCCEEDED", True), ("FAILED", True)],
    ids=lambda v: str(v),
)
def test_terminal_statuses(status, terminal):
    assert JobInfo.from_json({"status": status}).terminal is terminal


# -- every method ---------------------------------------------------------------------------------

def test_version():
    script = Script(ok({"version": "4", "ray_version": "2.60.0", "ray_commit": "x"}))
    assert script.dashboard().version()["ray_version"] == "2.60.0"
    assert script.calls == ["GET /api/version"]


def test_list_jobs_uses_trailing_slash_and_parses():
    script = Script(ok([JOB, {**JOB, "submission_id": "run-2", "status": "RUNNING", "driver_exit_code": None}]))
    jobs = script.dashboard().list_jobs()
    assert [(j.submission_id, j.status) for j in jobs] == [("run-1", "SUCCEEDED"), ("run-2", "RUNNING")]
    assert script.calls == ["GET /api/jobs/"]


GET_CASES = {
    "found": (ok(JOB), "SUCCEEDED"),
    "unknown-404": (text(404, "Job run-1 does not exist"), None),
}


@pytest.mark.parametrize(("answer", "status"), GET_CASES.values(), ids=GET_CASES.keys())
def test_get_job(answer, status):
    script = Script(answer)
    job = script.dashboard().get_job("run-1")
    assert (job.status if job else None) == status
    assert script.calls == ["GET /api/jobs/run-1"]


def test_submit_sends_only_given_fields_with_trailing_slash():
    script = Script(ok({"submission_id": "run-1", "job_id": None}))
    returned = script.dashboard().submit(
        "python main.py", submission_id="run-1", runtime_env={"env_vars": {"A": "1"}},
        metadata={"owner": "nrl-k8s"}, entrypoint_num_cpus=1,
    )
    assert returned == "run-1"
    assert script.calls == ["POST /api/jobs/"]
    assert json.loads(script.requests[0].content) == {
        "entrypoint": "python main.py", "submission_id": "run-1", "runtime_env": {"env_vars": {"A": "1"}},
        "metadata": {"owner": "nrl-k8s"}, "entrypoint_num_cpus": 1,
    }


def test_submit_without_id_generates_one_and_a_lost_response_is_not_a_duplicate():
    # The first POST lands but its answer is lost (read timeout); the retry hits "already exists".
    script = Script(httpx.ReadTimeout("lost"), text(500, DUPLICATE_TRACEBACK))
    returned = script.dashboard().submit("echo hi")
    sent = [json.loads(r.content)["submission_id"] for r in script.requests]
    assert returned.startswith("raysubmit_")
    assert sent == [returned, returned]


@pytest.mark.parametrize("code", [500, 400], ids=["current-ray-500", "old-ray-400"])
def test_duplicate_submission_raises_submission_exists(code):
    script = Script(text(code, DUPLICATE_TRACEBACK))
    with pytest.raises(SubmissionExists, match="run-1 already exists"):
        script.dashboard().submit("echo hi", submission_id="run-1")
    assert len(script.requests) == 1


@pytest.mark.parametrize("stopped", [True, False], ids=["was-running", "already-finished"])
def test_stop(stopped):
    script = Script(ok({"stopped": stopped}))
    assert script.dashboard().stop("run-1") is stopped
    assert script.calls == ["POST /api/jobs/run-1/stop"]


def test_logs():
    script = Script(ok({"logs": "hello\n"}))
    assert script.dashboard().logs("run-1") == "hello\n"
    assert script.calls == ["GET /api/jobs/run-1/logs"]


@pytest.mark.parametrize("call", ["stop", "logs"], ids=["stop", "logs"])
def test_unknown_job_on_stop_and_logs_is_an_error(call):
    script = Script(text(404, "Job nope does not exist"))
    with pytest.raises(DashboardError, match=r"404: Job nope does not exist") as info:
        getattr(script.dashboard(), call)("nope")
    assert BASE in info.value.message


# -- the package API ------------------------------------------------------------------------------

@pytest.fixture
def package(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "repo/pkg").mkdir(parents=True)
    (tmp_path / "repo/pkg/main.py").write_text("print('hi')\n")
    return stage(tmp_path / "repo", [tmp_path / "repo/pkg"], "a: 1\n")


HAS_PACKAGE_CASES = {"present": (httpx.Response(200), True), "absent": (text(404, "Package does not exist"), False)}


@pytest.mark.parametrize(("answer", "present"), HAS_PACKAGE_CASES.values(), ids=HAS_PACKAGE_CASES.keys())
def test_has_package(answer, present):
    script = Script(answer)
    assert script.dashboard().has_package("_ray_pkg_abc.zip") is present
    assert script.calls == ["GET /api/packages/gcs/_ray_pkg_abc.zip"]


def test_has_package_error_is_a_dashboard_error():
    with pytest.raises(
        DashboardError, match=r"could not check for package _ray_pkg_abc.zip: .* → 500: RuntimeError: gcs"
    ):
        Script(text(500, "Traceback (most recent call last):\nRuntimeError: gcs down\n")).dashboard().has_package(
            "_ray_pkg_abc.zip")


def test_ensure_package_uploads_the_zip_when_absent(package):
    script = Script(text(404, "Package does not exist"), httpx.Response(200))
    uploaded = script.dashboard().ensure_package(package)
    assert script.calls == [f"GET /api/packages/gcs/{package.name}", f"PUT /api/packages/gcs/{package.name}"]
    assert script.requests[1].content == package.zip_bytes()
    assert uploaded == len(package.zip_bytes()) > 0


def test_ensure_package_skips_a_package_the_cluster_has(package):
    script = Script(httpx.Response(200))
    assert script.dashboard().ensure_package(package) == 0
    assert script.calls == [f"GET /api/packages/gcs/{package.name}"]


def test_upload_is_retried_on_transient_failures(package):
    script = Script(text(404, "no"), text(503, "no endpoints"), httpx.ReadTimeout("slow"), httpx.Response(200))
    assert script.dashboard().ensure_package(package) == len(package.zip_bytes())
    assert [r.method for r in script.requests] == ["GET", "PUT", "PUT", "PUT"]


def test_refused_upload_names_the_package(package):
    script = Script(text(404, "no"), text(413, "Maximum request body size 104857600 exceeded."))
    with pytest.raises(
        DashboardError, match=f"could not upload package {package.name}: .* → 413: Maximum request body"
    ):
        script.dashboard().ensure_package(package)


# -- retries and error mapping --------------------------------------------------------------------

RETRY_CASES = {
    "no-available-agent-500": (NO_AGENT, NO_AGENT),
    "503": (text(503, "no endpoints available for service"),),
    "502": (text(502, "bad gateway"),),
    "504": (text(504, "gateway timeout"),),
    "connect-error": (httpx.ConnectError("refused"), httpx.ConnectError("refused")),
    "read-timeout": (httpx.ReadTimeout("slow"),),
    "remote-protocol-error": (httpx.RemoteProtocolError("peer closed"),),
}


@pytest.mark.parametrize("failures", RETRY_CASES.values(), ids=RETRY_CASES.keys())
def test_transient_failures_are_retried_then_succeed(failures):
    script = Script(*failures, ok({"submission_id": "run-1", "job_id": None}))
    assert script.dashboard().submit("echo hi", submission_id="run-1") == "run-1"
    assert len(script.requests) == len(failures) + 1


EXHAUSTED_CASES = {
    "503": (text(503, "no endpoints available for service"), r"→ 503: no endpoints available"),
    "no-available-agent": (NO_AGENT, r"→ 500: No available agent"),
    "connect-error": (httpx.ConnectError("refused"), r"unreachable after 3 attempt\(s\) \(ConnectError: refused\)"),
}


@pytest.mark.parametrize(("failure", "pattern"), EXHAUSTED_CASES.values(), ids=EXHAUSTED_CASES.keys())
def test_retries_are_bounded(failure, pattern):
    script = Script(failure)
    with pytest.raises(DashboardError, match=pattern) as info:
        script.dashboard(retries=2).version()
    assert len(script.requests) == 3
    assert BASE in info.value.message


NOT_RETRIED = {
    "400": text(400, "TypeError: bad field"),
    "401": text(401, "Unauthorized"),
    "403": text(403, "Forbidden"),
    "422": text(422, "unprocessable"),
    "other-500": text(500, "Traceback (most recent call last):\nRuntimeError: boom"),
}


@pytest.mark.parametrize("answer", NOT_RETRIED.values(), ids=NOT_RETRIED.keys())
def test_other_errors_are_not_retried(answer):
    script = Script(answer)
    with pytest.raises(DashboardError) as info:
        script.dashboard().submit("echo hi", submission_id="run-1")
    assert len(script.requests) == 1
    assert type(info.value) is DashboardError
    assert f"POST {BASE}/api/jobs/ → {answer.status_code}" in info.value.message


DETAIL_CASES = {
    "ray-traceback-with-trailing-dot": ("Traceback (most recent call last):\n  File x\nRuntimeError: boom\n.\n",
                                        "RuntimeError: boom"),
    "plain-text": ("upstream went away\n", "upstream went away"),
    "empty-body": ("", "Internal Server Error"),
}


@pytest.mark.parametrize(("body", "detail"), DETAIL_CASES.values(), ids=DETAIL_CASES.keys())
def test_error_detail(body, detail):
    with pytest.raises(DashboardError) as info:
        Script(text(500, body)).dashboard().version()
    assert info.value.message.endswith(f"→ 500: {detail}")


def test_non_json_answer_is_a_dashboard_error():
    script = Script(httpx.Response(200, text="<html>login</html>"))
    with pytest.raises(DashboardError, match="non-JSON") as info:
        script.dashboard().list_jobs()
    assert info.value.hint == "is this URL a Ray dashboard?"


# -- follow_logs: the log tail websocket ----------------------------------------------------------
# The seam is the raw connection httpx hands over after 101 (``extensions["network_stream"]``).

TIMEOUT = object()  # a read that times out


class Wire:
    """The connection after ``101``: each read returns the next scripted bytes (``TIMEOUT``: a read
    timeout; past the script: the connection ends); writes are recorded."""

    def __init__(self, *reads):
        self.reads = list(reads)
        self.written: list[bytes] = []
        self.closed = False

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if not self.reads:
            return b""
        item = self.reads.pop(0)
        if item is TIMEOUT:
            raise httpcore.ReadTimeout("timed out")
        return item

    def write(self, data: bytes, timeout: float | None = None) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True


def frame(payload: str | bytes, opcode: int = 0x1, fin: bool = True) -> bytes:
    """A server frame (unmasked), with the 7-bit, 16-bit or 64-bit length encoding."""
    data = payload.encode() if isinstance(payload, str) else payload
    first = bytes([(0x80 if fin else 0) | opcode])
    if len(data) < 126:
        return first + bytes([len(data)]) + data
    if len(data) < 65536:
        return first + bytes([126]) + struct.pack("!H", len(data)) + data
    return first + bytes([127]) + struct.pack("!Q", len(data)) + data


CLOSE = frame(struct.pack("!H", 1000), opcode=0x8)


def unmasked(sent: bytes) -> tuple[int, bytes]:
    """(opcode, payload) of a short frame the client sent; clients must mask."""
    assert sent[1] & 0x80, "client frames are masked"
    mask, payload = sent[2:6], sent[6:6 + (sent[1] & 0x7F)]
    return sent[0] & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class Head:
    """A Ray dashboard: ``GET /api/jobs/run-1`` answers the next status (the last one repeats);
    each log tail request gets the next answer: a Wire (the upgrade succeeds) or a Response."""

    def __init__(self, statuses: list[str], *tails: Wire | httpx.Response, log: str = ""):
        self.statuses, self.tails, self.log = list(statuses), list(tails), log
        self.upgrades: list[httpx.Request] = []
        self.asked = 0  # status requests

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/logs/tail"):
            self.upgrades.append(request)
            answer = self.tails.pop(0)
            if isinstance(answer, httpx.Response):
                return answer
            accept = base64.b64encode(hashlib.sha1(request.headers["sec-websocket-key"].encode()
                                                   + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()).decode()
            return httpx.Response(101, headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                                "Sec-WebSocket-Accept": accept}, extensions={"network_stream": answer})
        if request.url.path.endswith("/logs"):
            return ok({"logs": self.log})
        self.asked += 1
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return status if isinstance(status, httpx.Response) else ok({"submission_id": "run-1", "status": status})

    def dashboard(self, **options) -> Dashboard:
        return Dashboard(BASE, transport=httpx.MockTransport(self), backoff_s=0, **options)


def test_follow_reads_frames_split_fragmented_and_long_and_answers_pings():
    long = "x" * 70000  # a 64-bit length
    first = frame("a\n")
    wire = Wire(first[:1], first[1:] + frame("b", fin=False), frame("\n", opcode=0x0),
                frame(b"hi", opcode=0x9), frame("y" * 300), frame(long), CLOSE)
    head = Head(["RUNNING", "SUCCEEDED"], wire)
    assert list(head.dashboard().follow_logs("run-1")) == ["a\n", "b\n", "y" * 300, long]
    assert [unmasked(sent) for sent in wire.written] == [(0xA, b"hi"), (0x8, struct.pack("!H", 1000))]
    assert wire.closed
    (upgrade,) = head.upgrades
    assert upgrade.url.path == "/api/jobs/run-1/logs/tail"
    assert (upgrade.headers["upgrade"], upgrade.headers["sec-websocket-version"]) == ("websocket", "13")


RESUME_CASES = {
    # Ray replays the log from its start on every connection: what was yielded is skipped.
    "dropped-mid-line": ([Wire(frame("a\n"), frame("b")), Wire(frame("a\nb\nc"), frame("\n"), CLOSE)],
                         ["RUNNING", "SUCCEEDED"], ["a\n", "b", "\nc", "\n"]),
    "closed-while-running": ([Wire(frame("a\n"), CLOSE), Wire(frame("a\nb\n"), CLOSE)],
                             ["RUNNING", "RUNNING", "SUCCEEDED"], ["a\n", "b\n"]),
    "silent-after-the-job-ended": ([Wire(frame("a\n"), TIMEOUT, TIMEOUT), Wire(frame("a\nb\n"), CLOSE)],
                                   ["RUNNING", "SUCCEEDED"], ["a\n", "b\n"]),
    "quiet-while-running": ([Wire(frame("a\n"), TIMEOUT, TIMEOUT, TIMEOUT, frame("b\n"), CLOSE)],
                            ["RUNNING", "RUNNING", "RUNNING", "SUCCEEDED"], ["a\n", "b\n"]),
    "closed-and-the-cluster-gone": ([Wire(frame("a\n"), CLOSE)], [text(404, "services not found")], ["a\n"]),
    "gateway-error-then-up": ([text(503, "no endpoints available"), Wire(frame("a\n"), CLOSE)],
                              ["RUNNING", "SUCCEEDED"], ["a\n"]),
}


@pytest.mark.parametrize(("tails", "statuses", "chunks"), RESUME_CASES.values(), ids=RESUME_CASES.keys())
def test_follow_resumes_without_repeating_or_losing_text(tails, statuses, chunks):
    head = Head(statuses, *tails)
    assert list(head.dashboard(retries=3).follow_logs("run-1", idle_s=0)) == chunks
    assert len(head.upgrades) == len(tails)


def test_follow_of_a_job_gone_after_an_unclean_close_is_an_error():
    head = Head([text(404, "Job run-1 does not exist")], Wire(frame("a\n"), frame(struct.pack("!H", 1011), opcode=0x8)))
    follow = head.dashboard().follow_logs("run-1")
    assert next(follow) == "a\n"
    with pytest.raises(DashboardError, match="no job run-1"):
        next(follow)


UNREACHABLE = text(503, "no endpoints available")
ENDED_CASES = {
    # KubeRay deletes a RayJob's cluster as its job ends: the stream breaks, or (a port-forward
    # to the gone head) goes silent, and the dashboard never answers again
    "dropped": Wire(frame("a\n")),
    "silent": Wire(frame("a\n"), TIMEOUT),
}


@pytest.mark.parametrize("wire", ENDED_CASES.values(), ids=ENDED_CASES.keys())
def test_follow_of_a_job_its_rayjob_says_is_over_asks_the_gone_dashboard_once(wire):
    head = Head([UNREACHABLE], wire)
    follow = head.dashboard(retries=8).follow_logs("run-1", idle_s=0, over=lambda: True)
    assert next(follow) == "a\n"
    with pytest.raises(JobGone):
        next(follow)
    assert head.asked == 2  # once before the tail, once after: not retried, the head went with its cluster


def test_follow_of_a_job_not_yet_over_retries_an_unreachable_dashboard():
    head = Head([UNREACHABLE], Wire(frame("a\n"), TIMEOUT))
    follow = head.dashboard(retries=8).follow_logs("run-1", idle_s=0, over=lambda: False)
    assert next(follow) == "a\n"
    with pytest.raises(DashboardError, match="unreachable|503"):
        next(follow)
    assert head.asked == 10  # once before the tail, then 1 + 8 retries


def test_follow_of_a_job_already_over_reads_its_whole_log_at_once():
    head = Head(["SUCCEEDED"], log="a\nb\n")  # no tail: Ray's would poll the ended log for seconds
    assert list(head.dashboard().follow_logs("run-1")) == ["a\nb\n"]
    assert (head.asked, head.upgrades) == (1, [])


def test_follow_of_an_ended_job_whose_dashboard_answers_reads_on():
    head = Head(["RUNNING", "SUCCEEDED"], Wire(frame("a\n")), Wire(frame("a\nb\n"), CLOSE))  # dropped, reopened
    assert list(head.dashboard(retries=8).follow_logs("run-1", idle_s=0, over=lambda: True)) == ["a\n", "b\n"]


def test_follow_gives_up_after_retries_in_a_row():
    head = Head(["RUNNING"], *[Wire() for _ in range(3)])
    with pytest.raises(DashboardError, match="failed 3 time"):
        list(head.dashboard(retries=2).follow_logs("run-1"))


def test_follow_deadline_raises_wait_timeout_with_status():
    head = Head(["RUNNING"], Wire(frame("x"), TIMEOUT))
    with pytest.raises(WaitTimeout, match="is still RUNNING after 0s"):
        list(head.dashboard().follow_logs("run-1", deadline_s=0))


def test_follow_past_the_deadline_reads_the_rest_of_an_ended_job():
    head = Head(["RUNNING", "SUCCEEDED"], Wire(frame("x\n"), CLOSE))
    assert list(head.dashboard().follow_logs("run-1", deadline_s=0)) == ["x\n"]


REFUSED_CASES = {
    "unknown-job": (text(404, "Job run-1 does not exist"), "no job run-1", None),
    "forbidden": (text(403, "forbidden"), "→ 403", "refused the credentials"),
    "no-websocket": (text(200, "plain"), "answered 200 instead of switching to a websocket", None),
}


@pytest.mark.parametrize(("answer", "message", "hint"), REFUSED_CASES.values(), ids=REFUSED_CASES.keys())
def test_follow_refused_upgrade(answer, message, hint):
    with pytest.raises(DashboardError, match=message) as info:
        list(Head(["RUNNING"], answer).dashboard().follow_logs("run-1"))
    assert hint is None or hint in (info.value.hint or "")


# -- base URLs: in-cluster DNS, API server proxy, explicit URL -------------------------------------

def api_server(*, host="https://127.0.0.1:6443/", token="Bearer tok-1", auth=None) -> Connection:
    """A Connection to a (never contacted) API server sending ``token``, or ``auth()``'s headers."""
    return Connection(host, ssl_context=tls_context(insecure=True),
                      auth=auth or (lambda: {"Authorization": token} if token else {}))


def seen_by_server(build) -> httpx.Request:
    script = Script(ok({"version": "4"}))
    dash = build(transport=httpx.MockTransport(script))
    dash.version()
    return script.requests[0]


def test_in_cluster_url():
    request = seen_by_server(lambda **o: Dashboard.in_cluster("rc-head-svc", "team", **o))
    assert str(request.url) == "http://rc-head-svc.team.svc:8265/api/version"


def test_api_proxy_url_and_bearer_token():
    request = seen_by_server(lambda **o: Dashboard.via_api_proxy(api_server(), "rc-head-svc", "team", **o))
    assert str(request.url) == (
        "https://127.0.0.1:6443/api/v1/namespaces/team/services/rc-head-svc:8265/proxy/api/version"
    )
    assert request.headers["authorization"] == "Bearer tok-1"


def test_api_proxy_asks_for_fresh_credentials_on_every_request():
    tokens = iter(["Bearer first", "Bearer second"])
    script = Script(ok({"version": "4"}), ok({"version": "4"}))
    dash = Dashboard.via_api_proxy(api_server(auth=lambda: {"Authorization": next(tokens)}), "rc-head-svc", "team",
                                   transport=httpx.MockTransport(script))
    dash.version()
    dash.version()
    assert [r.headers["authorization"] for r in script.requests] == ["Bearer first", "Bearer second"]


def test_api_proxy_without_token_sends_no_authorization():
    request = seen_by_server(lambda **o: Dashboard.via_api_proxy(api_server(token=None), "s", "ns", **o))
    assert "authorization" not in request.headers


@pytest.mark.parametrize("code", [401, 403], ids=["401", "403"])
def test_api_proxy_refusal_hints_at_rbac_and_dashboard_url(code):
    script = Script(
        httpx.Response(code, json={"kind": "Status", "message": "services \"rc-head-svc:8265\" is forbidden"})
    )
    dash = Dashboard.via_api_proxy(api_server(), "rc-head-svc", "team", transport=httpx.MockTransport(script))
    with pytest.raises(DashboardError, match=f"→ {code}: services \"rc-head-svc:8265\" is forbidden") as info:
        dash.list_jobs()
    assert "kubectl auth can-i get services/proxy -n team" in info.value.hint
    assert "--dashboard-url" in info.value.hint
    assert len(script.requests) == 1


def test_direct_refusal_hint_names_the_url():
    with pytest.raises(DashboardError) as info:
        Script(text(401, "Unauthorized")).dashboard().version()
    assert BASE in info.value.hint and "--dashboard-url" in info.value.hint


CONFIG = api_server()
FOR_CLUSTER_CASES = {
    "explicit-url-wins": (dict(url="http://127.0.0.1:9999", in_cluster=True, connection=CONFIG),
                          "http://127.0.0.1:9999/api/version"),
    "in-cluster-dns-before-proxy": (dict(in_cluster=True, connection=CONFIG),
                                    "http://rc-head-svc.team.svc:8265/api/version"),
    "api-proxy-otherwise": (dict(connection=CONFIG),
                            "https://127.0.0.1:6443/api/v1/namespaces/team/services/rc-head-svc:8265/proxy/api/version"),
}


@pytest.mark.parametrize(("kwargs", "url"), FOR_CLUSTER_CASES.values(), ids=FOR_CLUSTER_CASES.keys())
def test_for_cluster_preference_order(kwargs, url):
    request = seen_by_server(lambda **o: Dashboard.for_cluster(cluster_name="rc", namespace="team", **kwargs, **o))
    assert str(request.url) == url


def test_for_cluster_with_no_way_in():
    with pytest.raises(DashboardError, match="no way to reach the dashboard of RayCluster rc") as info:
        Dashboard.for_cluster(cluster_name="rc", namespace="team")
    assert "--dashboard-url" in info.value.hint


def test_context_manager_closes_the_transport():
    class Transport(httpx.MockTransport):
        closed = False

        def close(self):
            self.closed = True

    transport = Transport(Script(ok({})))
    with Dashboard(BASE, transport=transport):
        assert not transport.closed
    assert transport.closed


class Renewable:
    """A credential like an exec plugin's: ``refresh(sent)`` after a 401 makes the next call renew it."""

    def __init__(self, *tokens: str):
        self.tokens, self.current = list(tokens), None

    def __call__(self) -> dict[str, str]:
        if self.current is None:
            self.current = {"Authorization": self.tokens.pop(0)}
        return self.current

    def refresh(self, sent) -> bool:
        if dict(sent) == self.current:
            self.current = None
        return True


def test_api_proxy_renews_a_refused_credential_once():
    sent = []
    script = Script(httpx.Response(401, json={"kind": "Status", "message": "Unauthorized"}), ok({"version": "4"}))

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers["authorization"])  # as sent: the retry is the same request, renewed
        return script(request)

    dash = Dashboard.via_api_proxy(api_server(auth=Renewable("Bearer revoked", "Bearer fresh")), "rc-head-svc", "team",
                                   transport=httpx.MockTransport(server))
    assert dash.version() == {"version": "4"}
    assert sent == ["Bearer revoked", "Bearer fresh"]


def test_api_proxy_refused_after_renewal_is_an_error():
    refused = httpx.Response(401, json={"kind": "Status", "message": "Unauthorized"})
    script = Script(refused, refused)
    dash = Dashboard.via_api_proxy(
        api_server(auth=Renewable("Bearer a", "Bearer b", "Bearer c")),
        "rc-head-svc",
        "team",
        transport=httpx.MockTransport(script),
    )
    with pytest.raises(DashboardError, match="401"):
        dash.version()
    assert len(script.requests) == 2
