"""Removing a build tree must never reach into what is mounted inside it (root only, like the build)."""

import subprocess

from tests.testhost.image import mounts_below, remove_tree


def test_remove_tree_unmounts_instead_of_deleting_through_a_bind_mount(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "device-node-stand-in").write_text("must survive")
    tree = tmp_path / ".build-x" / "rootfs"
    (tree / "dev").mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(outside), str(tree / "dev")], check=True)
    try:
        assert mounts_below(tmp_path / ".build-x") == [str(tree / "dev")]
        remove_tree(tmp_path / ".build-x")
    finally:
        subprocess.run(["umount", str(tree / "dev")], check=False, capture_output=True)
    assert not (tmp_path / ".build-x").exists()
    assert (outside / "device-node-stand-in").read_text() == "must survive"


def test_a_new_image_replaces_older_ones_of_its_suite_and_keeps_the_other_suites(tmp_path):
    from tests.testhost.image import _remove_other_images, recipe_cache_key

    names = ("bookworm-old", "bookworm-new", "trixie-current", ".build-bookworm-crashed", "0123456789abcdef")
    for name in names:
        (tmp_path / name).mkdir()
    _remove_other_images(tmp_path, keep=tmp_path / "bookworm-new", suite="bookworm")
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["bookworm-new", "trixie-current"]
    assert recipe_cache_key("ssh-ed25519 AAAA k", "bookworm") != recipe_cache_key("ssh-ed25519 AAAA k", "trixie")
