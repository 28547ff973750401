"""``ray start`` as the sandbox's Ray heads run it: Ray's own command, without a Ray Client server
and without the dashboard pages of what the sandbox cannot have.

A KubeRay head also serves Ray Client on port 10001. Nothing of nrl-k8s uses Ray Client, and its
server is a Python process of its own on every head: ~1.2 CPU-seconds to start, about 15 % of a
head's start-up. ``ray start`` starts it whenever Ray Client's dependency imports (grpc, which the
rest of Ray needs too) and refuses port 0, so here that dependency check answers "not installed".

Ray's dashboard runs each of its modules as a process of its own and health-checks each one every
second. Three of them serve pages that are empty here: Ray Serve's and Ray Train's (neither runs in
the sandbox) and the metrics page (it needs Prometheus and Grafana, which do not run here either;
its module renders Grafana's dashboards as it starts). A head loads the others. ``ray start`` cannot
choose the modules, so the dashboard's command is given ``--modules-to-load``: an idle head uses
~2.7 CPU-seconds a minute instead of ~3.3, and its start ~0.4 less.

The dashboard and its agent import every dashboard module, whatever the platform. One of them,
platform events on Kubernetes, imports the ``kubernetes`` client when it is installed (it is, in
the venv the sandbox's heads run from), and with it google-auth and requests: ~0.5 CPU-seconds of
the agent's ~2.3 by py-spy, ~0.1 of the dashboard's. That module does nothing off a Kubernetes
pod (no ``KUBERNETES_SERVICE_HOST``), which a sandbox head is, so these two processes run through
``without_kubernetes.py``. Job drivers and Ray's workers keep the client.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from ray._private import ray_constants, services
from ray.scripts import scripts

#: Ray 2.60's dashboard modules (requirements.lock pins Ray; a name Ray does not have stops the
#: dashboard, and with it the head) but MetricsHead, ServeHead and TrainHead.
DASHBOARD_MODULES = (
    "UsageStatsHead", "PlatformEventsHead",  # in the dashboard's own process
    "DataHead", "EventHead", "JobHead", "NodeHead", "ReportHead", "StateHead", "TaskEventsHead",
)  # fmt: skip


def _no_ray_client() -> ImportError:
    return ImportError("the sandbox's Ray heads serve no Ray Client")


_start_ray_process = services.start_ray_process


#: How the dashboard's and its agent's scripts are run instead of ``python [-u] SCRIPT``.
WITHOUT_KUBERNETES = ("-m", "nrl_k8s_sandbox.without_kubernetes")
_AGENT = "--dashboard_agent_command="


def _without_kubernetes(command: list[str], script: str) -> list[str]:
    """``command`` (``python [-u] ... SCRIPT ARGS``) with SCRIPT run by ``WITHOUT_KUBERNETES``."""
    at = next(i for i, arg in enumerate(command) if arg.endswith(script))
    return [*command[:at], *WITHOUT_KUBERNETES, *command[at:]]


def _start(command: list[str], process_type: str, *args, **kwargs):
    if process_type == ray_constants.PROCESS_TYPE_DASHBOARD:
        command = [*_without_kubernetes(command, "dashboard.py"), f"--modules-to-load={','.join(DASHBOARD_MODULES)}"]
    elif process_type == ray_constants.PROCESS_TYPE_RAYLET:  # the raylet starts the agent: its command is an argument
        command = [_AGENT + subprocess.list2cmdline(_without_kubernetes(shlex.split(arg[len(_AGENT):]), "agent.py"))
                   if arg.startswith(_AGENT) else arg for arg in command]
    return _start_ray_process(command, process_type, *args, **kwargs)


if __name__ == "__main__":
    scripts.get_ray_client_dependency_error = _no_ray_client
    services.start_ray_process = _start
    sys.exit(scripts.main())
