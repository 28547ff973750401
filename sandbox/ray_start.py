"""``ray start`` as the sandbox's Ray heads run it: Ray's own command, without a Ray Client server.

A KubeRay head also serves Ray Client on port 10001. Nothing of nrl-k8s uses Ray Client, and its
server is a Python process of its own on every head: ~1.2 CPU-seconds to start, about 15 % of a
head's start-up. ``ray start`` starts it whenever Ray Client's dependency imports (grpc, which the
rest of Ray needs too) and refuses port 0, so here that dependency check answers "not installed".
"""

from __future__ import annotations

import sys

from ray.scripts import scripts


def _no_ray_client() -> ImportError:
    return ImportError("the sandbox's Ray heads serve no Ray Client")


if __name__ == "__main__":
    scripts.get_ray_client_dependency_error = _no_ray_client
    sys.exit(scripts.main())
