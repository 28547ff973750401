"""`load_config`: a recipe + infra pair (split or bundled) into one validated `LoadedConfig`."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from nrl_k8s import redact
from nrl_k8s.config.safe_yaml import resolve
from nrl_k8s.errors import ConfigError, InfraError

from . import kubeconfig
from .files import Layer, block_layers, file_layers, merge_layers
from .interpolate import interpolate
from .overrides import apply_overrides, label, split_overrides
from .provenance import Provenance
from .schema import validate

INFRA_WRAPPER = "infra"
"""An infra file (user defaults, --infra file, any `defaults:` parent of one) may hold its body
under this key, as the earlier launcher's defaults file does."""

NamespaceSource = str
""""infra" | "in-cluster" | "kube-context" | "default"."""


@dataclass(frozen=True)
class LoadedConfig:
    """A loaded run config.

    `recipe`: after `defaults:` inheritance and recipe overrides, `infra:` removed, its `${...}`
    left as written. `infra`: all layers merged, overrides applied, interpolated, validated,
    defaults and `namespace` filled, every `dynamo.KEY.manifest` an absolute path.
    `infra_path`: the infra file, or the recipe file when the infra is bundled.
    `sources`: every file read, in load order. `provenance`: which layer set each infra key.
    """

    recipe: dict
    infra: dict
    recipe_path: Path
    infra_path: Path
    sources: tuple[Path, ...]
    namespace_source: NamespaceSource
    provenance: Provenance = field(default_factory=Provenance, repr=False, compare=False)

    @contextmanager
    def located(self) -> Iterator[None]:
        """Turn an InfraError raised inside into a ConfigError naming the file (or override) that set the key."""
        try:
            yield
        except InfraError as err:
            raise err.located(self.provenance.source(err.key) or self.infra_path) from None


def load_config(
    recipe: str | Path,
    overrides: Sequence[str] = (),
    infra: str | Path | None = None,
    *,
    context: str | None = None,
    env: Mapping[str, str] | None = None,
) -> LoadedConfig:
    """Load, merge, override, interpolate and validate a recipe + infra pair."""
    env = os.environ if env is None else env
    recipe_overrides, infra_overrides = split_overrides(overrides)
    recipe_path = resolve(recipe)

    recipe_layers = file_layers(recipe_path)
    infra_path, declared = _declared_infra(recipe_path, recipe_layers, infra)
    infra_layers = [*_shipped_defaults(), *_user_defaults(env), *declared]
    sources = _unique([path for path, _ in [*recipe_layers, *infra_layers]])

    provenance = Provenance()
    for path, data in infra_layers:
        provenance.record(data, path)
    for override in infra_overrides:
        provenance.record_override(override.value, label(override.token), override.path)
    merged = apply_overrides(merge_layers(infra_layers), infra_overrides)

    final = validate(interpolate(merged, env, provenance), provenance)
    namespace_source = "infra"
    if not final.get("namespace"):
        final["namespace"], namespace_source = kubeconfig.current_namespace(context, env)
    _absolute_manifests(final, provenance)

    recipe_doc = _drop_scratch(apply_overrides(merge_layers(recipe_layers), recipe_overrides))
    redact.remember([final, recipe_doc])  # its secret values are hidden wherever they show up (a driver's log)
    return LoadedConfig(
        recipe=recipe_doc,
        infra=final,
        recipe_path=recipe_path,
        infra_path=infra_path,
        sources=sources,
        namespace_source=namespace_source,
        provenance=provenance,
    )


def _declared_infra(
    recipe_path: Path, recipe_layers: list[Layer], infra: str | Path | None
) -> tuple[Path, list[Layer]]:
    """The infra file's layers (split) or the recipe's `infra:` blocks (bundled); removes `infra:` from the recipe."""
    bundled = [
        layer
        for path, data in recipe_layers
        if "infra" in data
        for layer in block_layers(data.pop("infra"), path, "infra", wrapper=INFRA_WRAPPER)
    ]
    if infra is None:
        if not bundled:
            raise ConfigError(
                f"{recipe_path}: no infra given", hint="pass --infra INFRA.yaml, or add an 'infra:' block to the recipe"
            )
        return recipe_path, bundled
    infra_path = resolve(infra)
    if bundled:
        raise ConfigError(
            f"{recipe_path}: has an 'infra:' block and --infra {infra_path} was also given",
            hint="use either a bundled 'infra:' block or --infra, not both",
        )
    return infra_path, file_layers(infra_path, wrapper=INFRA_WRAPPER)


def shipped_defaults_path() -> Path:
    """The package-data infra defaults file (lowest layer)."""
    return Path(__file__).resolve().parent.parent / "defaults.yaml"  # importlib.resources costs ~7 ms per command


def user_defaults_path(env: Mapping[str, str]) -> Path | None:
    """`$NRL_K8S_DEFAULTS` (must exist), else `~/.config/nrl-k8s/defaults.yaml` when present."""
    if env.get("NRL_K8S_DEFAULTS"):
        return resolve(env["NRL_K8S_DEFAULTS"])
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    path = home / ".config" / "nrl-k8s" / "defaults.yaml"
    return resolve(path) if path.is_file() else None


def _shipped_defaults() -> list[Layer]:
    return file_layers(shipped_defaults_path(), wrapper=INFRA_WRAPPER)


def _user_defaults(env: Mapping[str, str]) -> list[Layer]:
    path = user_defaults_path(env)
    return [] if path is None else file_layers(path, wrapper=INFRA_WRAPPER)


def _drop_scratch(data: dict) -> dict:
    """Drop top-level `_`-prefixed keys (YAML anchor scratch space)."""
    return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("_"))}


def _unique(paths: list[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(paths))


def _absolute_manifests(infra: dict, provenance: Provenance) -> None:
    """Make each `dynamo.KEY.manifest` absolute: relative to the file that declared it (cwd for overrides)."""
    for key, graph in (infra.get("dynamo") or {}).items():
        if not graph.get("manifest"):
            continue  # an inline spec
        manifest = Path(graph["manifest"]).expanduser()
        if manifest.is_absolute():
            continue
        source = provenance.source(("dynamo", key, "manifest"))
        base = source.parent if isinstance(source, Path) else Path.cwd()
        graph["manifest"] = str(Path(os.path.normpath(base / manifest)))
