"""Config loading: recipe + infra files, `defaults:` chains, overrides, interpolation, schema."""

from .files import load_yaml_file
from .kubeconfig import current_namespace
from .loader import LoadedConfig, load_config

__all__ = ["LoadedConfig", "current_namespace", "load_config", "load_yaml_file"]
