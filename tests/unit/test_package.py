"""The working_dir package: what is staged, what is refused, and that its name follows its content."""

from __future__ import annotations

import io
import json
import os
import stat
import time
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nrl_k8s.errors import ConfigError, NrlK8sError
from nrl_k8s.ray import package as package_mod
from nrl_k8s.ray.package import DEFAULT_UPLOAD_PATHS, RECIPE_FILE, repo_root, stage, upload_paths

WHERE = "launch.rayUploadPaths"
RECIPE = "policy:\n  model_name: tiny\n"
OLD_NS = (time.time_ns() // 1_000_000_000 - 3600) * 1_000_000_000  # an hour ago: past the racy window


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "nrl-k8s" / "package-digests.json"


def make_tree(root: Path, files: dict[str, bytes | str], *, executable: tuple[str, ...] = ()) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        os.utime(path, ns=(OLD_NS, OLD_NS))
    for name in executable:
        (root / name).chmod(0o755)
    return root


def staged(root: Path, paths: list[str] | None = None, recipe: str = RECIPE, **options):
    return stage(root, upload_paths(paths, root, where=WHERE), recipe, **options)


def unzipped(package) -> dict[str, zipfile.ZipInfo]:
    with zipfile.ZipFile(io.BytesIO(package.zip_bytes())) as archive:
        return {info.filename: info for info in archive.infolist()}


# -- what goes in ---------------------------------------------------------------------------------

IGNORE_CASES = {
    "source file": ("pkg/a.py", True),
    "nested data": ("pkg/data/x.json", True),
    "dot dir that is not ignored": ("pkg/.github/workflows/ci.yml", True),
    "name only starting like venv": ("pkg/venv_tools.py", True),
    "pyc in the middle of a name": ("pkg/notes.pyc.txt", True),
    "git dir": ("pkg/.git/config", False),
    "submodule .git file": ("pkg/sub/.git", False),
    "hg dir": ("pkg/.hg/store", False),
    "svn dir": ("pkg/.svn/entries", False),
    "__pycache__": ("pkg/__pycache__/a.cpython-311.pyc", False),
    "stray pyc": ("pkg/b.pyc", False),
    "pytest cache": ("pkg/.pytest_cache/v/cache/lastfailed", False),
    "mypy cache": ("pkg/.mypy_cache/3.11/a.json", False),
    ".venv": ("pkg/.venv/lib/site.py", False),
    "venv": ("pkg/venv/bin/python", False),
    "any dir with pyvenv.cfg": ("pkg/env311/lib/site.py", False),
    "the pyvenv.cfg itself": ("pkg/env311/pyvenv.cfg", False),
    "node_modules": ("pkg/ui/node_modules/left-pad/index.js", False),
}


@pytest.mark.parametrize(("name", "included"), IGNORE_CASES.values(), ids=IGNORE_CASES.keys())
def test_ignore_rules(tmp_path, name, included):
    root = make_tree(
        tmp_path / "repo", {"pkg/keep.py": "x = 1\n", name: "content\n", "pkg/env311/pyvenv.cfg": "home=/x\n"}
    )
    files = staged(root, ["pkg"]).files
    assert (name in files) is included
    assert "pkg/keep.py" in files


def test_the_recipe_is_at_the_root_and_wins_over_a_tree_file(tmp_path):
    root = make_tree(tmp_path / "repo", {RECIPE_FILE: "stale: true\n", "main.py": "print(1)\n"})
    package = staged(root, ["."])
    assert package.files == ("main.py", RECIPE_FILE)
    with zipfile.ZipFile(io.BytesIO(package.zip_bytes())) as archive:
        assert archive.read(RECIPE_FILE).decode() == RECIPE


def test_files_overlapping_paths_and_single_files(tmp_path):
    root = make_tree(tmp_path / "repo", {"pkg/a.py": "a", "pkg/sub/b.py": "b", "README.md": "r"})
    package = staged(root, ["pkg/sub", "README.md", "pkg"])
    assert package.files == ("README.md", RECIPE_FILE, "pkg/a.py", "pkg/sub/b.py")
    assert package.size == 3 + len(RECIPE)


def test_relative_roots_and_paths(tmp_path, monkeypatch, private_cache):
    root = make_tree(tmp_path / "repo", {"pkg/a.py": "a"})
    expected = staged(root, ["pkg"]).name
    monkeypatch.chdir(tmp_path)
    assert stage(Path("repo"), upload_paths(["pkg"], Path("repo"), where=WHERE), RECIPE).name == expected
    assert stage(Path("repo"), [Path("pkg")], RECIPE).name == expected  # relative to the root
    monkeypatch.chdir(root)
    assert stage(Path("."), [root / "pkg"], RECIPE).name == expected
    assert set(json.loads(private_cache.read_text())) == {str(root / "pkg/a.py")}  # cache keys are absolute


def test_symlinks_inside_the_root_are_followed_loops_skipped(tmp_path):
    root = make_tree(tmp_path / "repo", {"pkg/a.py": "a", "shared/util.py": "u"})
    (root / "pkg/util_link.py").symlink_to(root / "shared/util.py")
    (root / "pkg/shared").symlink_to(root / "shared", target_is_directory=True)
    (root / "pkg/loop").symlink_to(root / "pkg", target_is_directory=True)
    (root / "pkg/dangling.py").symlink_to(root / "nowhere.py")
    assert staged(root, ["pkg"]).files == (RECIPE_FILE, "pkg/a.py", "pkg/shared/util.py", "pkg/util_link.py")


# -- defaults and path errors ---------------------------------------------------------------------

def test_defaults_skip_missing_paths(tmp_path):
    root = make_tree(tmp_path / "repo", {
        "nemo_rl/__init__.py": "", "examples/run_grpo.py": "", "3rdparty/Gym-workspace/setup.py": "",
        "3rdparty/Automodel-workspace/setup.py": "", "docs/index.md": "",
    })
    assert upload_paths(None, root, where=WHERE) == [
        root / "nemo_rl",
        root / "examples",
        root / "3rdparty/Gym-workspace",
    ]
    assert staged(root).files == (
        "3rdparty/Gym-workspace/setup.py", "examples/run_grpo.py", "nemo_rl/__init__.py", RECIPE_FILE,
    )


def test_defaults_name_the_nemo_rl_folders():
    assert DEFAULT_UPLOAD_PATHS[:2] == ("nemo_rl", "examples")
    assert {"3rdparty/Gym-workspace", "3rdparty/Megatron-LM-workspace"} <= set(DEFAULT_UPLOAD_PATHS)


def test_no_default_path_at_all_is_an_error(tmp_path):
    root = make_tree(tmp_path / "repo", {"main.py": ""})
    with pytest.raises(ConfigError, match=f"{WHERE} is unset and none of its defaults") as info:
        upload_paths(None, root, where=WHERE)
    assert info.value.exit_code == 2 and "--repo-root" in info.value.hint


PATH_ERRORS = {
    "missing explicit path": (["pkg", "nope"], f"{WHERE}.1: 'nope' does not exist under"),
    "parent escape": (["../outside"], f"{WHERE}.0: '../outside' must be a path relative to"),
    "hidden parent escape": (["pkg/../../outside"], f"{WHERE}.0: 'pkg/../../outside' must be a path relative to"),
    "absolute path": (["/etc"], f"{WHERE}.0: '/etc' must be a path relative to"),
    "symlink outside": (["out"], f"{WHERE}.0: 'out' leads outside the repository root"),
}


@pytest.mark.parametrize(("paths", "message"), PATH_ERRORS.values(), ids=PATH_ERRORS.keys())
def test_path_errors(tmp_path, paths, message):
    make_tree(tmp_path, {"outside/secret.txt": "s"})
    root = make_tree(tmp_path / "repo", {"pkg/a.py": "a"})
    (root / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(ConfigError) as info:
        upload_paths(paths, root, where=WHERE)
    assert info.value.exit_code == 2
    assert info.value.message.startswith(message)


def test_a_symlink_deep_in_the_tree_leading_outside_is_refused(tmp_path):
    make_tree(tmp_path, {"outside/id_rsa": "key"})
    root = make_tree(tmp_path / "repo", {"pkg/a.py": "a"})
    (root / "pkg/key").symlink_to(tmp_path / "outside/id_rsa")
    with pytest.raises(ConfigError, match="pkg/key is a symlink leading outside the repository root") as info:
        staged(root, ["pkg"])
    assert info.value.exit_code == 2


REPO_ROOT_CASES = {
    "git dir two levels up": ("a/b", False),
    "git file (worktree, submodule)": ("a", True),
    "at the top": ("", False),
}


@pytest.mark.parametrize(("below", "as_file"), REPO_ROOT_CASES.values(), ids=REPO_ROOT_CASES.keys())
def test_repo_root_is_the_git_top_level(tmp_path, below, as_file):
    root = tmp_path / "repo"
    (root / below).mkdir(parents=True)
    if as_file:
        (root / ".git").write_text("gitdir: /elsewhere/.git/worktrees/repo\n")
    else:
        (root / ".git").mkdir()
    assert repo_root(cwd=str(root / below)) == root.resolve()


def test_explicit_repo_root_wins(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "other").mkdir()
    assert repo_root(str(tmp_path / "other"), cwd=str(tmp_path)) == (tmp_path / "other").resolve()
    with pytest.raises(ConfigError, match="--repo-root .*: not a directory"):
        repo_root(str(tmp_path / "missing"))


def test_no_git_checkout_is_an_error_hinting_repo_root(tmp_path):
    (tmp_path / "plain").mkdir()
    if any((p / ".git").exists() for p in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary directory is inside a git checkout")
    with pytest.raises(ConfigError, match="not inside a git checkout") as info:
        repo_root(cwd=str(tmp_path / "plain"))
    assert info.value.exit_code == 2 and "--repo-root" in info.value.hint


# -- determinism and content addressing -----------------------------------------------------------

TREE = {"pkg/a.py": "print('a')\n", "pkg/sub/b.py": "print('b')\n", "pkg/run.sh": "#!/bin/sh\necho hi\n"}


def test_the_zip_is_deterministic(tmp_path):
    root = make_tree(tmp_path / "repo", TREE, executable=("pkg/run.sh",))
    first = staged(root, ["pkg"])
    os.utime(root / "pkg/a.py", ns=(OLD_NS + 10**9, OLD_NS + 10**9))  # touched, not changed
    second = staged(root, ["pkg"])
    assert first.name == second.name and first.uri == f"gcs://{first.name}"
    assert first.name.startswith("_ray_pkg_") and first.name.endswith(".zip")
    assert first.zip_bytes() == second.zip_bytes()
    infos = unzipped(first)
    assert list(infos) == sorted(infos) == [RECIPE_FILE, "pkg/a.py", "pkg/run.sh", "pkg/sub/b.py"]
    assert {i.date_time for i in infos.values()} == {(1980, 1, 1, 0, 0, 0)}
    modes = {name: stat.filemode(info.external_attr >> 16) for name, info in infos.items()}
    assert modes == {RECIPE_FILE: "-rw-r--r--", "pkg/a.py": "-rw-r--r--", "pkg/run.sh": "-rwxr-xr-x",
                     "pkg/sub/b.py": "-rw-r--r--"}


def test_same_tree_elsewhere_same_name(tmp_path):
    one = make_tree(tmp_path / "one", TREE)
    two = make_tree(tmp_path / "two", TREE)
    assert staged(one, ["pkg"]).name == staged(two, ["pkg"]).name


CHANGES = {
    "one byte": lambda root: (root / "pkg/a.py").write_text("print('A')\n"),
    "exec bit": lambda root: (root / "pkg/a.py").chmod(0o755),
    "renamed file": lambda root: (root / "pkg/a.py").rename(root / "pkg/c.py"),
    "new empty file": lambda root: (root / "pkg/empty.py").write_text(""),
    "removed file": lambda root: (root / "pkg/sub/b.py").unlink(),
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_a_change_gives_a_new_name(tmp_path, change):
    root = make_tree(tmp_path / "repo", TREE)
    before = staged(root, ["pkg"]).name
    change(root)
    assert staged(root, ["pkg"]).name != before


def test_a_changed_recipe_gives_a_new_name(tmp_path):
    root = make_tree(tmp_path / "repo", TREE)
    assert staged(root, ["pkg"], recipe="a: 1\n").name != staged(root, ["pkg"], recipe="a: 2\n").name


def test_digests_are_cached_privately_and_a_file_changed_before_zipping_is_caught(tmp_path, private_cache):
    root = make_tree(tmp_path / "repo", TREE)
    before = staged(root, ["pkg"])
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o600
    assert set(json.loads(private_cache.read_text())) == {str(root / name) for name in TREE}
    # Same size and mtime: the cached digest is used, so the name does not change (that is the cache);
    # building the zip reads the bytes again and notices they are not what was staged.
    (root / "pkg/a.py").write_text("print('z')\n")
    os.utime(root / "pkg/a.py", ns=(OLD_NS, OLD_NS))
    after = staged(root, ["pkg"])
    assert after.name == before.name
    with pytest.raises(NrlK8sError, match="pkg/a.py changed while the code package was being staged"):
        after.zip_bytes()


CACHE_MISSES = {  # (new content, new mtime): what differs from the cached entry
    "size, same mtime": ("print('a longer line')\n", OLD_NS),
    "mtime, same size": ("print('b')\n", OLD_NS + 10**9),
}


@pytest.mark.parametrize("change", CACHE_MISSES.values(), ids=CACHE_MISSES.keys())
def test_the_digest_cache_is_keyed_by_size_and_mtime(tmp_path, change):
    """A cached digest is used only while a file's size and mtime are unchanged; ``hashed`` counts reads."""
    root = make_tree(tmp_path / "repo", TREE)
    first = staged(root, ["pkg"])
    assert first.hashed == len(TREE)
    assert staged(root, ["pkg"]).hashed == 0
    content, mtime = change
    (root / "pkg/a.py").write_text(content)
    os.utime(root / "pkg/a.py", ns=(mtime, mtime))
    after = staged(root, ["pkg"])
    assert after.hashed == 1 and after.name != first.name
    assert unzipped(after)  # its zip builds: the digest matches the new content


def test_the_zip_is_built_once_whatever_the_threads_asking(tmp_path):
    package = staged(make_tree(tmp_path / "repo", TREE), ["pkg"])
    with ThreadPoolExecutor(max_workers=4) as pool:
        zips = list(pool.map(lambda _: package.zip_bytes(), range(8)))
    assert all(z is zips[0] for z in zips)


def test_recently_modified_files_are_not_cached(tmp_path, private_cache):
    root = make_tree(tmp_path / "repo", TREE)
    (root / "pkg/fresh.py").write_text("x = 1\n")  # mtime now: may still change within its mtime tick
    staged(root, ["pkg"])
    assert str(root / "pkg/fresh.py") not in json.loads(private_cache.read_text())


def test_an_unreadable_cache_is_ignored(tmp_path, private_cache):
    root = make_tree(tmp_path / "repo", TREE)
    private_cache.parent.mkdir(parents=True)
    private_cache.write_text("[not json")
    assert staged(root, ["pkg"]).name == staged(make_tree(tmp_path / "copy", TREE), ["pkg"]).name


# -- the size limit -------------------------------------------------------------------------------

def test_over_the_limit_names_the_five_largest_files(tmp_path):
    sizes = {"data/a.bin": 9000, "data/b.bin": 8000, "data/c.bin": 7000, "data/d.bin": 6000,
             "data/e.bin": 5000, "data/f.bin": 4000, "data/g.bin": 10}
    root = make_tree(tmp_path / "repo", {name: os.urandom(size) for name, size in sizes.items()})
    with pytest.raises(ConfigError) as info:
        staged(root, ["data"], limit=20_000)
    message = info.value.message
    assert info.value.exit_code == 2
    assert "over the 19.5 KiB a Ray dashboard accepts" in message
    listed = message.split("largest files: ")[1].split(", ")
    assert [entry.split(" ")[0] for entry in listed] == [
        "data/a.bin",
        "data/b.bin",
        "data/c.bin",
        "data/d.bin",
        "data/e.bin",
    ]
    assert listed[0] == "data/a.bin (8.8 KiB)"
    assert "rayUploadPaths" in info.value.hint


def test_the_limit_is_on_the_zip_not_the_raw_tree(tmp_path):
    root = make_tree(tmp_path / "repo", {"data/zeros.bin": bytes(200_000)})
    package = staged(root, ["data"], limit=20_000)  # 200 kB of zeros deflate to a few hundred bytes
    assert package.size > 20_000 > len(package.zip_bytes())


def test_source_is_deflated_and_already_compressed_content_stored(tmp_path):
    source = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(5000))
    root = make_tree(tmp_path / "repo", {"pkg/code.py": source, "pkg/weights.bin": os.urandom(300_000),
                                         "pkg/empty.py": ""})
    package = staged(root, ["pkg"])
    infos = unzipped(package)
    methods = {name: info.compress_type for name, info in infos.items()}
    assert methods["pkg/code.py"] == zipfile.ZIP_DEFLATED and methods["pkg/weights.bin"] == zipfile.ZIP_STORED
    assert infos["pkg/code.py"].compress_size < infos["pkg/code.py"].file_size // 4
    with zipfile.ZipFile(io.BytesIO(package.zip_bytes())) as archive:  # both read back intact (CRCs checked)
        assert archive.read("pkg/weights.bin") == (root / "pkg/weights.bin").read_bytes()
        assert archive.read("pkg/code.py").decode() == source and archive.read("pkg/empty.py") == b""


def test_at_the_default_limit_nothing_is_zipped_for_a_small_tree(tmp_path, monkeypatch):
    root = make_tree(tmp_path / "repo", TREE)
    monkeypatch.setattr(package_mod, "_zip", None)  # staging must not need a zip
    package = staged(root, ["pkg"])
    assert package.files and package.name


# -- the zip writer and its cache of deflated entries ---------------------------------------------

def reference_zip(package) -> bytes:
    """What ``zipfile`` writes for the package's files, as the docstring promises."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for entry in package._entries:
            data = entry.read()
            info = zipfile.ZipInfo(entry.arcname, package_mod.ZIP_TIME)
            info.create_system = 3
            info.external_attr = (0o100755 if entry.executable else 0o100644) << 16
            method = zipfile.ZIP_DEFLATED if package_mod._compressible(data) else zipfile.ZIP_STORED
            archive.writestr(info, data, method, package_mod.COMPRESS_LEVEL)
    return buffer.getvalue()


def test_the_zip_is_byte_for_byte_what_zipfile_writes(tmp_path):
    source = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(3000))
    root = make_tree(
        tmp_path / "repo",
        {
            "pkg/code.py": source,
            "pkg/weights.bin": os.urandom(100_000),
            "pkg/empty.py": "",
            "pkg/ünïcode_名前.txt": "x\n",
            "pkg/run.sh": "#!/bin/sh\n",
        },
        executable=("pkg/run.sh",),
    )
    package = staged(root, ["pkg"])
    assert package.zip_bytes() == reference_zip(package)
    assert unzipped(package)["pkg/run.sh"].external_attr >> 16 == 0o100755


def test_past_65535_entries_the_zip64_end_records_match_zipfile():
    names = [f"d{i // 1000}/f{i}" for i in range(65_536)]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            info = zipfile.ZipInfo(name, package_mod.ZIP_TIME)
            info.create_system, info.external_attr = 3, 0o100644 << 16
            archive.writestr(info, b"", zipfile.ZIP_STORED)
    members = [package_mod._Member(name, False, 0, 0, b"", False) for name in names]
    assert package_mod._zip(members) == buffer.getvalue()


def deflated_cache() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "nrl-k8s" / f"deflated-{package_mod.COMPRESS_LEVEL}"


def counting_deflates(monkeypatch) -> list:
    deflated, real = [], zlib.compressobj
    monkeypatch.setattr(zlib, "compressobj", lambda *args: deflated.append(args) or real(*args))
    return deflated


MODULES = {f"pkg/m{i}.py": "".join(f"x{i}_{j} = {j}\n" for j in range(2000)) for i in range(5)}


def test_after_an_edit_only_the_changed_file_is_deflated_again(tmp_path, private_cache, monkeypatch):
    root = make_tree(tmp_path / "repo", {**MODULES, "pkg/blob.bin": os.urandom(70_000)})
    first = staged(root, ["pkg"])
    first.zip_bytes()
    assert [p.name for p in deflated_cache().iterdir()] == [f"{first.name}.pack"]
    (root / "pkg/m0.py").write_text(MODULES["pkg/m0.py"] + "edited = True\n")
    package = staged(root, ["pkg"])
    deflated = counting_deflates(monkeypatch)
    archive = package.zip_bytes()
    monkeypatch.undo()
    assert len(deflated) == 1  # the edited module; the others came from the cache
    assert archive != first.zip_bytes() and archive == reference_zip(package)


def test_the_packs_of_the_last_zips_are_kept(tmp_path, private_cache, monkeypatch):
    root = make_tree(tmp_path / "repo", MODULES)
    names = []
    for version in range(package_mod.PACKS_KEPT + 1):
        (root / "pkg/m0.py").write_text(MODULES["pkg/m0.py"] + f"version = {version}\n")
        package = staged(root, ["pkg"])
        package.zip_bytes()
        names.append(package.name)
    assert sorted(p.name for p in deflated_cache().iterdir()) == sorted(f"{n}.pack" for n in names[1:])


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "garbage", "a directory"])
def test_a_damaged_pack_is_a_miss(tmp_path, private_cache, monkeypatch, damage):
    root = make_tree(tmp_path / "repo", MODULES)
    staged(root, ["pkg"]).zip_bytes()
    [pack] = deflated_cache().iterdir()
    data = pack.read_bytes()
    if damage == "a directory":
        pack.unlink()
        pack.mkdir()
    else:
        pack.write_bytes({"truncated": data[:-7], "flipped": data[:-5] + bytes([data[-5] ^ 1]) + data[-4:],
                          "empty": b"", "garbage": os.urandom(len(data))}[damage])
    package = staged(root, ["pkg"])
    deflated = counting_deflates(monkeypatch)
    archive = package.zip_bytes()
    monkeypatch.undo()
    assert archive == reference_zip(package)
    assert 1 <= len(deflated) <= len(MODULES)  # at least the damaged entry deflated again
