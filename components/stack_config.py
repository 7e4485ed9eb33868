"""Reads the `numa-kubelets:*` stack configuration and hands it to the core for validation."""

from __future__ import annotations

import os
from pathlib import Path

import pulumi
from pulumi.runtime import config as runtime_config
from pydantic import SecretStr

from numa_kubelets.config import NAMESPACE, ConfigError, Problem, StackConfig, decode_pulumi_values, load_config
from numa_kubelets.placement import check_demo
from numa_kubelets.plan import Plan, build_plan


def raw_namespace_values() -> dict[str, str]:
    """Every `numa-kubelets:` key the stack sets, unknown ones included, so typos are reported."""
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = NAMESPACE + ":"
    return {key[len(prefix) :]: value for key, value in sorted(merged.items()) if key.startswith(prefix)}


def read_stack() -> tuple[StackConfig, Plan]:
    """The validated configuration and its plan; an invalid one stops the program before any resource."""
    try:
        config = load_config(decode_pulumi_values(raw_namespace_values()))
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
