"""Check that the carried wheels plus the GPU image cover what serve-bench and Keras need there.

    python3 benchmarks/gpu/requires.py .whl keras==3.15.1

Starts from serve-bench's own dependencies (pyproject.toml, less TensorFlow and its serving API, which the
GPU machines do not get) and the extra roots named on the command line, then follows every Requires-Dist
(markers evaluated for CPython 3.12 on Linux x86-64, extras left out) through the wheels in the folder.
Each requirement must be met by a carried wheel or be a package the image holds (image-packages.txt); a
version the image's pip list gives is checked too. Prints one line per requirement; exits 1 when one is
unmet or when two wheels carry one distribution (a wheel nothing here needs is only noted: others may carry
theirs in the same folder). A version the image holds that a specifier rejects is printed as a warning:
`pip install --no-deps` does not check it there.
"""

from __future__ import annotations

import re
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version
except ImportError:  # pip vendors it
    from pip._vendor.packaging.markers import default_environment
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[assignment]
    from pip._vendor.packaging.version import Version  # type: ignore[assignment]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# Not on the GPU machines: the served model runs on Keras/JAX there.
LEFT_OUT = {"tensorflow", "tensorflow-serving-api"}
# The image's versions that its pip-list row in the device tool's KINDS.md gives.
IMAGE_VERSIONS = {"jax": "0.11.2", "jaxlib": "0.11.2", "numpy": "2.5.2", "onnxruntime": "1.30.0", "onnx": "1.23.1"}
# The host: CPython 3.12 on Linux x86-64.
ENVIRONMENT = {
    **default_environment(),
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "extra": "",
}


def image_names() -> set[str]:
    text = (HERE / "image-packages.txt").read_text()
    return {canonicalize_name(line) for line in text.splitlines() if line.strip() and not line.startswith("#")}


def wheel_metadata(path: Path) -> tuple[str, str, list[str]]:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        meta = Parser().parsestr(z.read(name).decode())
    return canonicalize_name(meta["Name"]), meta["Version"], meta.get_all("Requires-Dist") or []


def applies(requirement: Requirement) -> bool:
    return requirement.marker is None or requirement.marker.evaluate(ENVIRONMENT)  # type: ignore[arg-type]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print((__doc__ or "").strip(), file=sys.stdout if len(argv) >= 2 else sys.stderr)
        return 0 if len(argv) >= 2 else 2
    folder = Path(argv[1])
    roots = [Requirement(r) for r in argv[2:]]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    roots = [
        *(Requirement(r) for r in project["dependencies"] if canonicalize_name(Requirement(r).name) not in LEFT_OUT),
        *roots,
    ]
    carried: dict[str, tuple[str, list[str], str]] = {}
    problems: list[str] = []
    for path in sorted(folder.glob("*.whl")):
        name, version, requires = wheel_metadata(path)
        if name in carried:
            problems.append(f"two wheels of {name}: {carried[name][2]} and {path.name} (pip refuses both)")
        carried[name] = (version, requires, path.name)
    image = image_names()

    seen: set[str] = set()
    queue: list[tuple[str, Requirement]] = [("serve-bench", r) for r in roots]
    while queue:
        wanted_by, requirement = queue.pop(0)
        if not applies(requirement):
            continue
        name = canonicalize_name(requirement.name)
        if name in carried:
            version = carried[name][0]
            ok = requirement.specifier.contains(Version(version), prereleases=True)
            where = f"carried {version}" + ("" if ok else f"  ** does not meet {requirement.specifier}")
            if not ok:
                problems.append(f"{wanted_by} needs {requirement}, the wheel is {version}")
            if name not in seen:
                queue.extend((name, Requirement(r)) for r in carried[name][1])
        elif name in image:
            known = IMAGE_VERSIONS.get(name)
            where = f"image {known or '(version not listed)'}"
            if known and not requirement.specifier.contains(Version(known), prereleases=True):
                where += f"  ** warning: {requirement.specifier} excludes it (not enforced with --no-deps)"
        else:
            where = "** MISSING: neither carried nor in the image"
            problems.append(f"{wanted_by} needs {requirement}: missing")
        seen.add(name)
        print(f"  {wanted_by:>14} -> {requirement!s:<28} {where}")
    for name in sorted(set(carried) - seen):
        print(f"  note: {carried[name][2]} is in {folder} but neither serve-bench nor Keras needs it")
    for problem in problems:
        print(f"requires.py: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
