"""How a run delivers its driver: the submitter, the code source, the code path and whether
``run`` waits for the driver. Pure: reads the loaded infra only.

``launch.runMode`` (``run --mode``) is a preset of (submitter, code source, wait), as upstream's:

    interactive = (dashboard, upload, wait)       batch = (exec, image, no wait)

An explicit ``submit.submitter`` / ``launch.codeSource`` (set in any infra layer, or by the
``--submitter`` / ``--code-source`` flags, which are infra overrides) wins over the preset, and
``--wait`` / ``--no-wait`` given on the command line wins over its wait. (Upstream lets the
preset overwrite the infra's own keys; here an explicit key is never overwritten.)
``submit.submitter: portForward`` is upstream's name for the dashboard submitter (it reached
the dashboard through a port-forward; nrl-k8s goes through the API server's service proxy).

Submitter and wait act in ``run --raycluster`` (KubeRay submits a RayJob's driver); the code
source and path act in both flows: ``upload`` packages the code (``--raycluster``) or leaves
the driver in the image's working directory (``--rayjob``); ``image`` / ``lustre`` start the
driver in ``launch.codePath`` (when set).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from nrl_k8s.errors import ConfigError

SUBMITTERS = ("dashboard", "exec")
SUBMITTER_ALIASES = {"portForward": "dashboard"}
CODE_SOURCES = ("upload", "image", "lustre")
DEFAULT_TMP_DIR = "/tmp"


@dataclass(frozen=True)
class Preset:
    submitter: str
    code_source: str
    wait: bool


RUN_MODES = {"interactive": Preset("dashboard", "upload", True), "batch": Preset("exec", "image", False)}
DEFAULT = RUN_MODES["interactive"]


def _preset(infra: dict) -> Preset:
    return RUN_MODES.get((infra.get("launch") or {}).get("runMode") or "", DEFAULT)


def submitter(infra: dict) -> str:
    """``dashboard`` or ``exec``: ``submit.submitter`` (portForward = dashboard), else the run mode's."""
    given = (infra.get("submit") or {}).get("submitter")
    return SUBMITTER_ALIASES.get(given, given) if given else _preset(infra).submitter


def code_source(infra: dict) -> str:
    """``launch.codeSource`` (``workspace.kind`` rayUpload / lustre set it when unset), else the run mode's."""
    return (infra.get("launch") or {}).get("codeSource") or _preset(infra).code_source


def code_path(infra: dict) -> str | None:
    """Where the driver starts: ``launch.codePath`` when the code is in the image or on Lustre."""
    return (infra.get("launch") or {}).get("codePath") if code_source(infra) != "upload" else None


def waits(infra: dict, flag: bool | None) -> bool:
    """Whether ``run --raycluster`` follows the driver: ``--wait/--no-wait`` when given, else the run mode's."""
    return flag if flag is not None else _preset(infra).wait


def exec_tmp_dir(infra: dict) -> str:
    """``submit.execTmpDir`` (default /tmp): where the exec submitter keeps a run's files on the head pod."""
    return (infra.get("submit") or {}).get("execTmpDir") or DEFAULT_TMP_DIR


def flag_overrides(*, mode: str | None = None, submitter: str | None = None, code_source: str | None = None,
                   code_path: str | None = None) -> list[str]:
    """The infra overrides the ``run`` flags stand for (``--mode`` = ``launch.runMode``, ...), each
    value checked first so a bad one is named by its flag."""
    tokens = []
    for flag, key, value, choices in (
        ("--mode", "launch.runMode", mode, tuple(RUN_MODES)),
        ("--submitter", "submit.submitter", submitter, SUBMITTERS + tuple(SUBMITTER_ALIASES)),
        ("--code-source", "launch.codeSource", code_source, CODE_SOURCES),
    ):
        if value is None:
            continue
        if value not in choices:
            raise ConfigError(f"{flag} {value!r} is not one of {', '.join(choices)}", hint=f"e.g. {flag} {choices[0]}")
        tokens.append(f"++infra.{key}={value}")
    if code_path is not None:
        if not code_path.strip():
            raise ConfigError("--code-path is empty", hint="pass the directory the driver starts in, e.g. /opt/nemo-rl")
        tokens.append(f"++infra.launch.codePath={json.dumps(code_path)}")  # a JSON string is a YAML string
    return tokens
