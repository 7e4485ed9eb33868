"""featureGates against the kubelet's own rules (numa_kubelets/feature_gates.py), on a small table
shaped like `kubelet-schema feature-gates` output; the real table is checked against the real
kubelet in tests/realcluster/test_kubelet_schema.py."""

from __future__ import annotations

from numa_kubelets import feature_gates as fg
from numa_kubelets.kubelet_config import SUPPORTED_KUBELET_VERSIONS

TABLE = fg.parse_table(
    {
        "release": "1.37",
        "gates": {
            "AllAlpha": [{"version": "0.0", "default": False, "preRelease": "ALPHA"}],
            "AllBeta": [{"version": "0.0", "default": False, "preRelease": "BETA"}],
            "Graduated": [
                {"version": "1.30", "default": False, "preRelease": "ALPHA"},
                {"version": "1.32", "default": True, "preRelease": "BETA"},
                {"version": "1.35", "default": True, "lockToDefault": True, "preRelease": ""},
            ],
            "NewInBeta": [{"version": "1.36", "default": True, "preRelease": "BETA"}],
            "Alpha": [{"version": "1.33", "default": False, "preRelease": "ALPHA"}],
            "NeedsAlpha": [{"version": "1.34", "default": False, "preRelease": "BETA"}],
            "LaterDefault": [
                {"version": "1.37", "default": False, "preRelease": "BETA"},
                {"version": "1.37", "default": True, "preRelease": "BETA", "minCompatibilityVersion": "1.37"},
            ],
        },
        "dependencies": {"NeedsAlpha": ["Alpha"]},
    }
)
PATH = "kubeletConfig.featureGates"


def messages(gates, version="1.37"):
    return [str(p) for p in fg.gate_problems(gates, PATH, version, TABLE)]


def test_an_unknown_gate_is_refused_for_the_release_the_table_comes_from():
    assert messages({"NoSuchGate": True}) == [
        f"{PATH}.NoSuchGate: kubelet 1.37 (kubeletVersion) has no such feature gate; it would not start"
    ]


def test_an_unknown_gate_passes_for_an_older_kubelet_which_may_still_have_it():
    assert messages({"NoSuchGate": True}, "1.35") == []


def test_a_gate_locked_to_its_default_may_be_set_only_to_it():
    assert messages({"Graduated": True}) == []
    assert messages({"Graduated": False}) == [
        f"{PATH}.Graduated: locked to true in kubelet 1.37 (GA); the kubelet refuses to set it otherwise"
    ]


def test_each_version_is_judged_by_its_own_spec():
    # Beta in 1.34, not locked yet: either value.
    assert messages({"Graduated": False}, "1.34") == []
    assert messages({"NewInBeta": False}, "1.35") == [
        f"{PATH}.NewInBeta: kubelet 1.35 (kubeletVersion) has no such feature gate yet (it appears in 1.36)"
    ]
    assert messages({"NewInBeta": False}, "1.36") == []


def test_versions_before_the_tables_emulation_window_are_not_judged():
    assert fg.checked("1.34", TABLE) and not fg.checked("1.33", TABLE)
    assert messages({"NewInBeta": False, "NoSuchGate": True}, "1.33") == []


def test_a_gate_the_kubelet_cannot_see_yet_is_pre_alpha():
    pre_alpha = fg.parse_table(
        {
            "release": "1.37",
            "gates": {"Future": [{"version": "1.38", "default": False, "preRelease": "ALPHA"}]},
            "dependencies": {},
        }
    )
    assert [str(p) for p in fg.gate_problems({"Future": True}, PATH, "1.37", pre_alpha)] == [
        f"{PATH}.Future: kubelet 1.37 (kubeletVersion) has no such feature gate yet (it appears in 1.38)"
    ]


def test_the_spec_that_needs_a_newer_minimum_compatibility_version_is_skipped():
    # A 1.37 kubelet's minimum compatibility version is 1.36: LaterDefault stays off by default.
    assert fg.spec_at(TABLE.gates["LaterDefault"], (1, 37)).default is False
    assert fg.effective_gates({}, (1, 37), TABLE)["LaterDefault"] is False


def dependency_messages(gates):
    return [str(p) for p in fg.dependency_problems(gates, PATH, "1.37", TABLE)]


def test_an_enabled_gate_needs_its_dependencies_enabled():
    assert dependency_messages({"NeedsAlpha": True}) == [
        f"{PATH}: NeedsAlpha is enabled in kubelet 1.37, but it needs Alpha, which this configuration leaves disabled"
    ]
    assert dependency_messages({"NeedsAlpha": True, "Alpha": True}) == []
    assert dependency_messages({"NeedsAlpha": False}) == []


def test_all_alpha_enables_every_alpha_gate_not_set_otherwise():
    assert dependency_messages({"NeedsAlpha": True, "AllAlpha": True}) == []
    assert dependency_messages({"NeedsAlpha": True, "AllAlpha": True, "Alpha": False}) != []
    assert fg.effective_gates({"AllBeta": True, "NewInBeta": False}, (1, 37), TABLE)["NewInBeta"] is False


def test_the_real_table_is_the_newest_supported_release():
    table = fg.kubelet_table()
    assert fg._text(table.release) == SUPPORTED_KUBELET_VERSIONS[-1]
    assert {fg.ALL_ALPHA, fg.ALL_BETA} <= set(table.gates)
