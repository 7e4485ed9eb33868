"""The plan renderer for pull-request review (numa_kubelets.review) and the PR workflow file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from numa_kubelets import review
from numa_kubelets.config import ConfigError
from tests.unit.builders import origin_host

PROJECT_DIR = Path(__file__).resolve().parents[2]
DEV_STACK = PROJECT_DIR / "Pulumi.dev.yaml"
EXAMPLE_STACK = PROJECT_DIR / "Pulumi.example-cluster.yaml"
WORKFLOW = PROJECT_DIR / ".github" / "workflows" / "pull-request.yml"
TOKEN = "abcdef.0123456789abcdef"
CIPHERTEXT = "v1:c2VjcmV0LWNpcGhlcnRleHQtb2YtdGhlLXRva2Vu"


def tree(root: Path) -> dict[str, bytes]:
    """Every file below root (the manifest included), by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def directories(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()}


def render(stack_file: Path, out: Path, *extra: str) -> int:
    return review.main(["render", str(stack_file), "--out", str(out), *extra])


def write_stack(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path


def example_document() -> dict:
    return yaml.safe_load(EXAMPLE_STACK.read_text())


# ---------------------------------------------------------------- determinism and diffs


def test_dev_render_is_byte_identical_across_runs(tmp_path):
    assert render(DEV_STACK, tmp_path / "a") == 0
    assert render(DEV_STACK, tmp_path / "b") == 0
    first = tree(tmp_path / "a")
    assert first == tree(tmp_path / "b")
    assert render(DEV_STACK, tmp_path / "a") == 0  # again, over its own output
    assert tree(tmp_path / "a") == first
    expected = {
        "summary.md",
        "numa-a/index.md",
        "numa-a/scripts/numa-a-preflight.apply.sh",
        "numa-a/scripts/numa-a-host-services.apply.sh",
        "numa-a/scripts/numa-a-host-services.delete.sh",
        "numa-a/scripts/numa-a-numa1-kubelet.delete.sh",
        "numa-a/files/etc/systemd/system/numa0.slice",
        "numa-a/files/etc/systemd/system/system.slice.d/50-numa-kubelets.conf",
        "numa-a/files/etc/systemd/system/kubelet@numa1.service",
        "numa-a/files/etc/numa-kubelets/numa1/kubelet-config.yaml",
    }
    assert expected <= set(first)
    assert "numa-a/scripts/numa-a-preflight.delete.sh" not in first  # the preflight has no delete
    assert not any("timestamp" in name for name in first)


def test_summary_lists_every_kubelet(tmp_path):
    files = review.render_stack(yaml.safe_load(DEV_STACK.read_text()))
    summary = files["summary.md"]
    assert "| numa-a | 0 | 1-3 | 0 | 10250 | 10248 | off | numa-a-numa0 | numa0.slice |" in summary
    assert "| numa-a | 1 | 5-7 | 1 | 10350 | 10348 | off | numa-a-numa1 | numa1.slice |" in summary
    assert "numa-type=blue" in summary
    assert "standalone" in summary


def test_one_port_change_changes_only_that_kubelets_files(tmp_path):
    text = DEV_STACK.read_text()
    changed_text = text.replace("        - numaNode: 1\n", "        - numaNode: 1\n          port: 10450\n", 1)
    assert changed_text != text
    changed_stack = tmp_path / "Pulumi.dev.yaml"
    changed_stack.write_text(changed_text)
    assert render(DEV_STACK, tmp_path / "before") == 0
    assert render(changed_stack, tmp_path / "after") == 0
    before, after = tree(tmp_path / "before"), tree(tmp_path / "after")
    differing = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    assert differing == {
        "summary.md",
        "numa-a/files/etc/numa-kubelets/numa1/kubelet-config.yaml",
        "numa-a/scripts/numa-a-numa1-kubelet.apply.sh",
    }
    assert b"port: 10450" in after["numa-a/files/etc/numa-kubelets/numa1/kubelet-config.yaml"]


# ---------------------------------------------------------------- secrets


def secret_stack(tmp_path: Path, *, plaintext_token: bool) -> Path:
    document = example_document()
    config = document["config"]
    config["numa-kubelets:bootstrapToken"] = TOKEN if plaintext_token else {"secure": CIPHERTEXT}
    config["numa-kubelets:sshPrivateKey"] = {"secure": CIPHERTEXT + "-key"}
    config["numa-kubelets:kubeconfig"] = {"secure": CIPHERTEXT + "-kubeconfig"}
    return write_stack(tmp_path / "Pulumi.secret.yaml", config)


def test_no_secret_value_in_any_output_file(tmp_path):
    out = tmp_path / "out"
    assert render(secret_stack(tmp_path, plaintext_token=False), out) == 0
    files = tree(out)
    forbidden = [TOKEN, CIPHERTEXT, "v1:", *review._STAND_INS.values()]
    for path, content in files.items():
        for value in forbidden:
            assert value.encode() not in content, f"{value!r} in {path}"
    kubeconfig = yaml.safe_load(files["numa-a/files/etc/numa-kubelets/numa0/bootstrap-kubeconfig"])
    assert kubeconfig["users"][0]["user"]["token"] == "<secret: numa-kubelets:bootstrapToken>"
    assert "numa-a/files/etc/numa-kubelets/numa1/bootstrap-kubeconfig" in files
    assert "numa-b/files/etc/numa-kubelets/numa0/bootstrap-kubeconfig" in files


def test_a_secret_in_plain_text_is_refused_as_pulumi_up_refuses_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert render(secret_stack(tmp_path, plaintext_token=True), out) != 0
    error = capsys.readouterr().err
    assert "bootstrapToken: is a secret but is set in plain text" in error
    assert "pulumi config set --secret numa-kubelets:bootstrapToken" in error
    assert TOKEN not in error
    assert not out.exists()
    document = example_document()
    document["config"]["numa-kubelets:bootstrapToken"] = TOKEN
    # Set as a secret elsewhere (--assume-secret) does not make the file's plain value a secret.
    with pytest.raises(ConfigError, match="bootstrapToken: is a secret but is set in plain text"):
        review.plan_from_stack(document, assume_secrets=("bootstrapToken",))


def test_encrypted_values_count_as_present_but_unknown():
    document = {"config": {"numa-kubelets:bootstrapToken": {"secure": CIPHERTEXT}, "numa-kubelets:hosts": []}}
    values = review.stack_values(document)
    assert values.secure == ("bootstrapToken",)
    assert values.values["bootstrapToken"] == "aaaaaa.aaaaaaaaaaaaaaaa"  # valid for validation, never written


def test_without_a_bootstrap_token_the_kubeconfigs_carry_the_managed_one(tmp_path):
    assert render(EXAMPLE_STACK, tmp_path / "without") == 0
    kubeconfig = tree(tmp_path / "without")["numa-a/files/etc/numa-kubelets/numa0/bootstrap-kubeconfig"]
    assert review.MANAGED_TOKEN_PLACEHOLDER.encode() in kubeconfig
    kubelet_config = tree(tmp_path / "without")["numa-a/files/etc/numa-kubelets/numa0/kubelet-config.yaml"]
    assert yaml.safe_load(kubelet_config)["clusterDNS"] == [review.KUBE_DNS_PLACEHOLDER]
    node = yaml.safe_load(tree(tmp_path / "without")["cluster/nodes/numa-a-numa1.yaml"])
    assert node["labels"] == {"numa-type": "blue", "numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": "1"}
    assert node["registersWith"]["labels"] == {"numa-kubelets.io/host": "numa-a", "numa-kubelets.io/numa-node": "1"}
    assert node["whenTheKubeletLeaves"] == "cordon, drain (at most 300s), delete"


def test_a_secret_set_outside_the_file_can_be_assumed(tmp_path):
    assert render(EXAMPLE_STACK, tmp_path / "with", "--assume-secret", "bootstrapToken") == 0
    files = tree(tmp_path / "with")
    assert "demo/pods/numa-demo-numa-a-numa0.yaml" in files
    assert "numa-b/scripts/numa-demo-numa-b-numa1-probe.apply.sh" in files


# ---------------------------------------------------------------- the stack file


def test_stack_file_keys_and_namespaces():
    document = {
        "config": {
            "hosts": [origin_host(name="h", address="192.0.2.1", numaNodes=[{"id": 0, "cpus": "0-3"}])],
            "numa-kubelets:kubeletPath": "/opt/bin/kubelet",
            "kubernetes:context": "elsewhere",
            "pulumi:tags": {"a": "b"},
        }
    }
    values = review.stack_values(document).values
    assert set(values) == {"hosts", "kubeletPath"}  # unnamespaced keys are the project's
    assert values["hosts"].startswith("[{")  # objects reach the program as JSON, as from the CLI
    _config, plan = review.plan_from_stack(document)
    assert plan.kubelet_path == "/opt/bin/kubelet"


def test_invalid_config_exits_nonzero_with_every_problem(tmp_path, capsys):
    document = yaml.safe_load(DEV_STACK.read_text())
    hosts = document["config"]["numa-kubelets:hosts"]
    hosts[0]["numaNodes"][1]["cpus"] = "4-x"
    hosts[0]["kubelts"] = []
    out = tmp_path / "out"
    assert render(write_stack(tmp_path / "Pulumi.bad.yaml", document["config"]), out) == 1
    error = capsys.readouterr().err
    assert "hosts[0].numaNodes[1].cpus" in error
    assert "hosts[0].kubelts: unknown key" in error
    assert not out.exists()
    with pytest.raises(ConfigError):
        review.render_stack(document)


def test_unreadable_stack_file_exits_nonzero(tmp_path, capsys):
    assert render(tmp_path / "Pulumi.missing.yaml", tmp_path / "out") == 2
    (tmp_path / "Pulumi.list.yaml").write_text("- a\n- b\n")
    assert render(tmp_path / "Pulumi.list.yaml", tmp_path / "out") == 1


# ---------------------------------------------------------------- the output directory


def test_stale_files_are_removed(tmp_path):
    document = example_document()
    config = document["config"]
    config["numa-kubelets:bootstrapToken"] = {"secure": CIPHERTEXT}
    out = tmp_path / "out"
    assert render(write_stack(tmp_path / "Pulumi.s.yaml", config), out) == 0
    (out / "numa-a" / "notes.txt").write_text("a reviewer's own file\n")
    before = tree(out)
    assert "numa-b/index.md" in before and "numa-a/files/etc/numa-kubelets/numa1/containerd.toml" in before

    # numa-b leaves the fleet; numa-a keeps only its NUMA node 0 kubelet.
    config["numa-kubelets:hosts"] = [config["numa-kubelets:hosts"][0]]
    config["numa-kubelets:hosts"][0]["kubelets"] = config["numa-kubelets:hosts"][0]["kubelets"][:1]
    assert render(write_stack(tmp_path / "Pulumi.s.yaml", config), out) == 0
    after = tree(out)
    assert not any(path.startswith("numa-b/") for path in after)
    assert not any("numa1" in path for path in after)
    assert "numa-b" not in directories(out)
    assert "numa-a/files/etc/numa-kubelets/numa1" not in directories(out)
    assert after["numa-a/notes.txt"] == b"a reviewer's own file\n"  # not ours: left alone
    expected = review.render_stack(document)
    assert set(after) == set(expected) | {review.MANIFEST, "numa-a/notes.txt"}
    assert (out / review.MANIFEST).read_text().splitlines() == sorted(expected)


def test_refuses_a_directory_it_does_not_own(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep\n")
    assert render(DEV_STACK, out) == 2
    assert "refusing" in capsys.readouterr().err
    assert tree(out) == {"precious.txt": b"keep\n"}


# ---------------------------------------------------------------- the same scripts as the program


def _program_commands(stack_config: dict, preview: bool = False) -> dict:
    from tests.program.harness import run_program

    run = run_program(stack_config, preview=preview)
    return {c.name: c.inputs for c in run.commands()}


def _review_commands(document: dict) -> dict:
    config, plan = review.plan_from_stack(document)
    pods = review.placement.demo_pods(config, plan)
    return {c.name: (host, c) for host in plan.hosts for c in review.host_commands(host, plan, pods)}


def test_dev_scripts_are_what_the_program_sends(tmp_path):
    document = yaml.safe_load(DEV_STACK.read_text())
    config = {key.removeprefix("numa-kubelets:"): value for key, value in document["config"].items()}
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nc3RhbmQtaW4=\n-----END OPENSSH PRIVATE KEY-----\n")
    config["sshPrivateKeyPath"] = str(key)
    program = _program_commands(config)
    reviewed = _review_commands(document)
    assert set(program) == set(reviewed)
    files = review.render_stack(document)
    for name, inputs in program.items():
        host, command = reviewed[name]
        assert inputs["create"] == command.scripts.apply and "update" not in inputs
        assert inputs.get("delete") == (command.scripts.delete if command.with_delete else None)
        assert inputs.get("stdin") == command.scripts.stdin
        shown = files[f"{host.name}/scripts/{name}.apply.sh"]
        if command.scripts.stdin is None:
            assert shown == command.scripts.apply  # root: verbatim
        else:  # the preflight: `/bin/sh -s` reads it
            assert shown == f"# (review) sent on stdin to `/bin/sh -s`\n{command.scripts.stdin}"


def test_cluster_scripts_and_stdin_are_what_the_program_sends():
    document = example_document()
    # The program reads clusterDNS from the cluster when it is not set; a review cannot.
    document["config"]["numa-kubelets:cluster"]["dns"] = "10.96.0.10"
    config = {key.removeprefix("numa-kubelets:"): value for key, value in document["config"].items()}
    config["bootstrapToken"] = TOKEN
    program = _program_commands(config, preview=True)  # the demo's verdict needs a live cluster
    document["config"]["numa-kubelets:bootstrapToken"] = {"secure": CIPHERTEXT}
    reviewed = _review_commands(document)
    assert set(program) == set(reviewed)
    assert any(name.endswith("-probe") for name in program)
    files = review.render_stack(document)
    for name, inputs in program.items():
        host, command = reviewed[name]
        assert inputs["create"] == command.scripts.apply
        if command.stdin_file is not None:
            placeholder = review.secret_placeholder("bootstrapToken")
            assert inputs["stdin"] == command.stdin_file.content.replace(f"'{placeholder}'", TOKEN)
        # numa-b's user is not root: the review shows the script inside the sudo wrapper.
        shown = files[f"{host.name}/scripts/{name}.apply.sh"]
        if command.scripts.stdin is not None:  # the preflight: its command line reads it
            assert inputs["stdin"] == command.scripts.stdin
            by = "" if host.user == "root" else f" by SSH user {host.user}"
            assert shown == f"# (review) sent on stdin to `{command.scripts.apply}`{by}\n{command.scripts.stdin}"
        elif host.user == "root":
            assert shown == command.scripts.apply
        else:
            assert review.scripts.run_as(host.user, shown.split("\n", 1)[1]) == command.scripts.apply


# ---------------------------------------------------------------- the pull-request workflow


def test_pull_request_workflow_is_well_formed():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers
    jobs = workflow["jobs"]
    assert {"test", "plan", "preview"} <= set(jobs)
    for job in jobs.values():
        assert job["runs-on"] and job["steps"]
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), step

    def steps_using(job: str, action: str) -> list[dict]:
        return [s for s in jobs[job]["steps"] if s.get("uses", "").startswith(action)]

    assert any("pytest tests/unit tests/program" in s.get("run", "") for s in jobs["test"]["steps"])
    assert steps_using("test", "actions/setup-python@")

    stacks = [entry["stack"] for entry in jobs["plan"]["strategy"]["matrix"]["include"]]
    assert any("numa_kubelets.review render" in s.get("run", "") for s in jobs["plan"]["steps"])
    assert steps_using("plan", "actions/upload-artifact@")

    preview_stacks = jobs["preview"]["strategy"]["matrix"]["stack"]
    assert set(stacks) == set(preview_stacks) == {"dev", "example-cluster"}
    for stack in preview_stacks:
        assert (PROJECT_DIR / f"Pulumi.{stack}.yaml").is_file()
    (pulumi_step,) = steps_using("preview", "pulumi/actions@v7")
    assert pulumi_step["with"]["command"] == "preview"
    assert pulumi_step["with"]["diff"] is True
    assert pulumi_step["with"]["comment-on-pr"] is True
    assert pulumi_step["with"]["stack-name"] == "${{ matrix.stack }}"
    assert pulumi_step["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    assert workflow["permissions"]["pull-requests"] == "write"
    assert "get.pulumi.com" not in WORKFLOW.read_text()  # the action installs its CLI itself
