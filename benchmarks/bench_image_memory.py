"""Peak memory to decode the worst images Hearth's limits allow, each in a fresh process.

For each case a file is written first (in its own process), then a new process imports
everything, notes its RSS, decodes the file with ``load_image`` and reports its peak RSS
(``ru_maxrss``); the difference is what the image cost. Target: under 300 MB above the
baseline. Results: benchmarks/results/image_memory.json.

    python -m benchmarks.bench_image_memory
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "image_memory.json"
TARGET_MB = 300

# name -> (mode, width, height, format): the largest decoded sizes the limits allow
CASES = {
    "40 MP RGBA PNG with transparency": ("RGBA", 8000, 5000, "PNG"),
    "40 MP RGB JPEG, 16384 px wide": ("RGB", 16384, 2441, "JPEG"),
    "40 MP palette PNG": ("P", 8000, 5000, "PNG"),
    "16-bit grey PNG, 40 MP": ("I;16", 8000, 5000, "PNG"),
    "aspect 32:1, 16384 x 512 RGB PNG": ("RGB", 16384, 512, "PNG"),
}

_WRITE = """
import sys
from PIL import Image
mode, w, h, fmt, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
base = Image.linear_gradient("L").resize((w, h))
if mode == "RGBA":
    image = Image.merge("RGBA", (base, base.transpose(Image.Transpose.FLIP_LEFT_RIGHT), base, base))
elif mode == "P":
    image = base.convert("P")
elif mode == "I;16":
    image = base.convert("I").point(lambda v: v * 256).convert("I;16")
else:
    image = Image.merge("RGB", (base, base, base))
image.save(path, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
"""

_MEASURE = """
import json, resource, sys, time
from engine.multimodal import load_image
import PIL.PngImagePlugin, PIL.JpegImagePlugin
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6
before = rss_mb()
t = time.perf_counter()
image = load_image(sys.argv[1])
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
print(json.dumps({"baseline_mb": before, "peak_mb": peak, "above_baseline_mb": peak - before,
                  "seconds": seconds, "decoded": [image.width, image.height]}))
"""


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (mode, width, height, fmt) in CASES.items():
            path = Path(tmp) / f"case.{fmt.lower()}"
            subprocess.run(
                [sys.executable, "-c", _WRITE, mode, str(width), str(height), fmt, str(path)], check=True
            )
            done = subprocess.run(
                [sys.executable, "-c", _MEASURE, str(path)],
                capture_output=True,
                text=True,
                cwd=REPO,
                check=True,
            )
            row = {"case": name, "file_bytes": path.stat().st_size, **json.loads(done.stdout)}
            rows.append(row)
            print(
                f"{name}: {row['above_baseline_mb']:.0f} MB above baseline, {row['seconds']:.2f} s, "
                f"decoded to {row['decoded'][0]}x{row['decoded'][1]}"
            )
    worst = max(r["above_baseline_mb"] for r in rows)
    RESULTS.write_text(
        json.dumps(
            {
                "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "target_mb": TARGET_MB,
                "worst_mb": worst,
                "cases": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"worst: {worst:.0f} MB above baseline (target {TARGET_MB})")
    return 0 if worst < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
