"""Benchmark: staging the code package of a generated 50 MB source tree, cold vs warm vs one file changed.

    .venv/bin/python bench/package.py [--runs 5] [--mb 50]

- cold: no digest cache (every file hashed);
- warm: the cache from a previous run, nothing changed (stat only; the zip is never built, as when
  the cluster already has the package);
- one file changed: staged again (a new name), then the zip built as for an upload; its size is
  the bytes an upload sends.
Target: warm staging well under 1 s (<= 0.2 s here). Prints medians and ratios to the cold case.
The tree is source-like text (words from a small vocabulary: deflates ~3-4x like real code),
~25 KB per file in nested folders, modified an hour ago (so its digests may be cached).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from nrl_k8s.ray.package import stage, upload_paths

WARM_TARGET_S = 0.2
FILE_BYTES = 25_000
WORDS = ("self", "def", "return", "import", "tensor", "config", "batch", "if", "else", "for", "in", "None",
         "policy", "logprobs", "rollout", "worker", "ray", "remote", "await", "model", "=", "(", ")", ":", "\n    ")


def generate(root: Path, total_bytes: int) -> list[Path]:
    rng = random.Random(8)
    files = []
    hour_ago = time.time_ns() - 3600 * 10**9
    for index in range(total_bytes // FILE_BYTES):
        path = root / "nemo_rl" / f"pkg{index % 20}" / f"sub{index % 7}" / f"module_{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = " ".join(rng.choices(WORDS, k=FILE_BYTES // 5))[:FILE_BYTES]
        path.write_text(text)
        os.utime(path, ns=(hour_ago, hour_ago))
        files.append(path)
    return files


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrl-k8s-bench-") as tmp:
        root = Path(tmp) / "repo"
        files = generate(root, args.mb * 10**6)
        size = sum(f.stat().st_size for f in files)
        paths = upload_paths(None, root, where="launch.rayUploadPaths")
        recipe = "policy:\n  model_name: bench\n"

        def stage_with(cache: str):
            os.environ["XDG_CACHE_HOME"] = cache
            return stage(root, paths, recipe)

        cold = [timed(lambda: stage_with(tempfile.mkdtemp(dir=tmp)))[0] for _ in range(args.runs)]
        warm_cache = tempfile.mkdtemp(dir=tmp)
        stage_with(warm_cache)
        warm = [timed(lambda: stage_with(warm_cache))[0] for _ in range(args.runs)]
        changed, zipping, names, zip_sizes = [], [], set(), []
        for run in range(args.runs):
            files[len(files) // 2].write_text(f"# edit {run}\n" + "x = 1\n" * 100)
            seconds, package = timed(lambda: stage_with(warm_cache))
            zip_seconds, data = timed(package.zip_bytes)
            changed.append(seconds)
            zipping.append(zip_seconds)
            names.add(package.name)
            zip_sizes.append(len(data))
        assert len(names) == args.runs, "every edit must give a new package name"

    cold_s, warm_s, changed_s = (statistics.median(v) for v in (cold, warm, changed))
    print(f"tree: {len(files)} files, {size / 1e6:.0f} MB; median of {args.runs} runs")
    print(f"{'case':<34} {'median s':>9} {'vs cold':>8}")
    print(f"{'cold (no digest cache)':<34} {cold_s:>9.3f} {1:>7.2f}x")
    verdict = "ok" if warm_s <= WARM_TARGET_S else "SLOW"
    print(
        f"{'warm (unchanged, no zip)':<34} {warm_s:>9.3f} {warm_s / cold_s:>7.2f}x  target {WARM_TARGET_S}s {verdict}"
    )
    print(f"{'one file changed: stage':<34} {changed_s:>9.3f} {changed_s / cold_s:>7.2f}x")
    zip_s = statistics.median(zipping)
    print(f"{'one file changed: build zip':<34} {zip_s:>9.3f} {zip_s / cold_s:>7.2f}x  "
          f"upload {statistics.median(zip_sizes) / 1e6:.1f} MB ({size / statistics.median(zip_sizes):.1f}x smaller)")


if __name__ == "__main__":
    main()
