"""Reads the `numa-kubelets:*` stack configuration and hands it to the core for validation."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pulumi
from pulumi.runtime import config as runtime_config
from pydantic import SecretStr

from numa_kubelets.config import NAMESPACE, ConfigError, Problem, StackConfig, load_stack_values
from numa_kubelets.placement import check_demo
from numa_kubelets.plan import Plan, build_plan


def raw_namespace_values() -> dict[str, str]:
    """Every `numa-kubelets:` key the stack sets, unknown ones included, so typos are reported."""
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = NAMESPACE + ":"
    return {key[len(prefix) :]: value for key, value in sorted(merged.items()) if key.startswith(prefix)}


def encrypted_namespace_keys(keys: Iterable[str]) -> set[str]:
    """Those of the `numa-kubelets:` keys that Pulumi holds as secrets (`pulumi config set --secret`).

    The engine names them to the program: the language host hands the list over in
    PULUMI_CONFIG_SECRET_KEYS and `set_all_config` keeps it for `is_config_secret`; an
    Automation API inline program gets it through `set_all_config` alone.
    """
    from_environment = set(runtime_config.get_config_secret_keys_env())
    prefix = NAMESPACE + ":"
    return {key for key in keys if runtime_config.is_config_secret(prefix + key) or prefix + key in from_environment}


def read_stack() -> tuple[StackConfig, Plan]:
    """The validated configuration and its plan; an invalid one, or a secret given in plain text,
    stops the program before any resource."""
    try:
        values = raw_namespace_values()
        config = load_stack_values(values, encrypted_namespace_keys(values))
        plan = build_plan(config)
        check_demo(config, plan)
        return config, plan
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None


def ssh_private_key(config: StackConfig) -> pulumi.Output[str] | None:
    """The key as a secret; None means the SSH agent."""
    if config.ssh_private_key is not None:
        return secret_or_none(config.ssh_private_key)
    if config.ssh_private_key_path is None:
        return None
    path = Path(os.path.expanduser(config.ssh_private_key_path))
    try:
        return pulumi.Output.secret(path.read_text())
    except OSError as error:
        problem = Problem("sshPrivateKeyPath", f"cannot read {str(path)!r}: {error.strerror}")
        raise pulumi.RunError(str(ConfigError([problem]))) from None


def secret_or_none(value: SecretStr | None) -> pulumi.Output[str] | None:
    return pulumi.Output.secret(value.get_secret_value()) if value is not None else None
