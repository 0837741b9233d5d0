"""The Docker image's build stage: what it installs (scripts/image_requirements.py) and
what it removes (scripts/slim_venv.sh), each checked on real packages; `make
docker-smoke` then proves the image they make trains and serves."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def _load_image_requirements() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "image_requirements", SCRIPTS / "image_requirements.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


image_requirements = _load_image_requirements()


def test_the_image_installs_every_runtime_requirement_and_its_extras() -> None:
    with_deps, no_deps = image_requirements.split(image_requirements.image_requirements())
    assert {image_requirements._name(r) for r in no_deps} == {"catboost", "shap"}
    installed = {image_requirements._name(r) for r in with_deps + no_deps}
    assert {"fastapi", "scikit-learn", "pyarrow", "psycopg", "boto3", "distributed"} <= installed
    assert {"skl2onnx", "onnxruntime", "xgboost-cpu", "lightgbm", "catboost", "shap"} <= installed
    assert not {"plotly", "graphviz", "numba", "llvmlite"} & installed


def test_catboost_keeps_its_runtime_requirements_but_not_the_plotting_ones() -> None:
    kept = {image_requirements._name(r) for r in image_requirements.kept_dependencies("catboost")}
    assert {"numpy", "pandas", "scipy", "six"} <= kept
    assert not {"plotly", "graphviz"} & kept


def test_shap_keeps_its_runtime_requirements_but_not_numba() -> None:
    kept = {image_requirements._name(r) for r in image_requirements.kept_dependencies("shap")}
    assert {"numpy", "scipy", "scikit-learn", "pandas", "slicer"} <= kept
    assert not {"numba", "llvmlite"} & kept


def test_an_image_without_the_boosting_extra_installs_no_catboost_requirements(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``boosting`` left out of IMAGE_EXTRAS: CatBoost is not installed, so neither are its
    requirements (asking for them would fail where it is not installed)."""
    monkeypatch.setattr(image_requirements, "IMAGE_EXTRAS", ("postgres", "explain"))
    assert image_requirements.main("deps") == 0
    names = {image_requirements._name(r) for r in capsys.readouterr().out.split()}
    assert {"slicer", "numpy"} <= names and "six" not in names


def test_pip_check_passes_only_what_the_image_leaves_out() -> None:
    output = (
        "catboost 1.2.10 requires plotly, which is not installed.\n"
        "catboost 1.2.10 requires graphviz, which is not installed.\n"
        "shap 0.51.0 requires numba, which is not installed.\n"
        "shap 0.51.0 requires llvmlite, which is not installed.\n"
    )
    assert image_requirements.unexpected_problems(output) == []
    assert image_requirements.unexpected_problems("No broken requirements found.\n") == []
    broken = (
        "catboost 1.2.10 requires six, which is not installed.\n"
        "shap 0.51.0 requires slicer, which is not installed.\n"
        "catboost 1.2.10 has requirement numpy<3.0,>=1.16.0, but you have numpy 3.0.0.\n"
    )
    assert image_requirements.unexpected_problems(broken) == broken.splitlines()


def test_catboost_trains_and_predicts_without_plotly_or_graphviz() -> None:
    """The image installs CatBoost with --no-deps: nothing the service calls may need them."""
    script = """
import sys
from importlib.abc import MetaPathFinder

class LeftOut(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("plotly", "graphviz"):
            raise ImportError(f"{name} is not in the image")
        return None

sys.meta_path.insert(0, LeftOut())
import pandas as pd
from sklearn.datasets import load_iris
from catboost import CatBoostClassifier, CatBoostRegressor

X, y = load_iris(return_X_y=True, as_frame=True)
X = X.assign(kind=pd.Series(["a", "b", "c"] * 50).astype("category"))
model = CatBoostClassifier(
    iterations=20, depth=3, random_seed=0, verbose=False, thread_count=1, cat_features=["kind"],
    allow_writing_files=False,
)
model.fit(X, y)
assert (model.predict(X).ravel() == y).mean() > 0.9
assert model.predict_proba(X).shape == (150, 3)
regressor = CatBoostRegressor(
    iterations=20, random_seed=0, verbose=False, thread_count=1, allow_writing_files=False
)
regressor.fit(X.drop(columns="kind"), X["petal length (cm)"])
assert regressor.predict(X.drop(columns="kind")).shape == (150,)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("plotly", "graphviz")))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_onnx_exports_run_without_onnx_runtimes_model_tools() -> None:
    """The image leaves out onnxruntime.transformers, .quantization and .tools: the ONNX
    export tests pass where importing them fails (skl2onnx's tables and a forest,
    onnxmltools' XGBoost and LightGBM converters; all of them pass so, ~1 min)."""
    script = """
import sys
from importlib.abc import MetaPathFinder

LEFT_OUT = ("onnxruntime.transformers", "onnxruntime.quantization", "onnxruntime.tools")

class LeftOut(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith(LEFT_OUT):
            raise ImportError(f"{name} is not in the image")
        return None

sys.meta_path.insert(0, LeftOut())
import pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/unit/export/",
                    "-k", "graph_takes or imputer or (onnx_converts and (xgboost or lightgbm"
                          " or random_forest))"])
print(any(m.startswith(LEFT_OUT) for m in sys.modules))
sys.exit(code)
"""
    done = _python_script(script)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and done.stdout.strip().splitlines()[-1] == "False"


def _fake_venv(tmp_path: Path) -> Path:
    """A venv's site-packages with real packages copied in (markupsafe: a C extension with
    a symbol table; numpy: extensions and an OpenBLAS that auditwheel's patchelf edited,
    which a plain strip breaks) and the kinds of files the image leaves out or keeps."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    installed = Path(sysconfig.get_paths()["purelib"])
    for package in ("markupsafe", "numpy", "numpy.libs"):
        shutil.copytree(installed / package, site / package)
    # The same libraries grafted into a second package (as scipy.libs holds numpy.libs'
    # libgfortran and libquadmath).
    shutil.copytree(installed / "numpy.libs", site / "other.libs")
    files = {
        "pkg/__init__.py": "",
        "pkg/tests/test_pkg.py": "",
        "pkg/sub/tests/test_sub.py": "",
        "pkg/testing/__init__.py": "",  # a package's testing helpers are imported by others
        "pkg/tests.py": "",  # a module named tests (jinja2.tests) is code
        "pkg/__pycache__/__init__.cpython-311.pyc": "",
        "pkg-1.0.dist-info/METADATA": "Name: pkg\n",
        "pyarrow/include/arrow/api.h": "",
        "pyarrow/lib.pxd": "",
        "pyarrow/libarrow_flight.so.2600": "",
        "pyarrow/_s3fs.cpython-311-x86_64-linux-gnu.so": "",
        "pyarrow/libparquet.so.2600": "",  # Parquet bodies: kept
        "joblib/test/test_memory.py": "",
        "botocore/data/endpoints.json": "{}",
        "botocore/data/s3/2006-03-01/service-2.json.gz": "",
        "botocore/data/sts/2011-06-15/service-2.json.gz": "",
        "botocore/data/ec2/2016-11-15/service-2.json.gz": "",
        "onnxruntime/__init__.py": "",
        "onnxruntime/capi/__init__.py": "",
        "onnxruntime/transformers/__init__.py": "",
        "onnxruntime/quantization/__init__.py": "",
        "onnxruntime/tools/__init__.py": "",
    }
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return site


@pytest.mark.skipif(shutil.which("strip") is None, reason="binutils' strip is not installed")
def test_slim_venv_removes_what_never_runs_and_keeps_what_does(tmp_path: Path) -> None:
    site = _fake_venv(tmp_path)
    (extension,) = (site / "markupsafe").glob("_speedups*.so")
    before = extension.stat().st_size
    done = _slim(tmp_path / "venv")
    assert done.returncode == 0, done.stdout + done.stderr
    left = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}
    assert {"pkg/__init__.py", "pkg/testing/__init__.py", "pkg/tests.py"} <= left
    assert {"pkg-1.0.dist-info/METADATA", "pyarrow/libparquet.so.2600"} <= left
    gone = [
        p for p in left if re.search(r"/tests/|/test/|include/|\.pxd$|\.a$|\.pyc$|flight|s3fs", p)
    ]
    assert gone == []
    assert extension.stat().st_size < before  # its symbol table went
    sections = subprocess.run(
        ["readelf", "-S", str(extension)], capture_output=True, text=True, check=True
    ).stdout
    assert ".dynsym" in sections and ".symtab" not in sections
    # The stripped extension still loads and works (its dynamic symbols are kept).
    check = (
        "import markupsafe._speedups as s, numpy as np; "
        "print(s._escape_inner('<a>'), np.ones((3, 3)) @ np.arange(3.0))"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    loaded = subprocess.run(
        [sys.executable, "-c", check], env=env, capture_output=True, text=True, check=False
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "&lt;a&gt; [3. 3. 3.]"
    assert "bundled test suites" in done.stdout
    assert re.search(r"stripped [1-9]\d* shared libraries, kept [1-9]", done.stdout)
    assert {p.name for p in (site / "onnxruntime").iterdir()} == {"__init__.py", "capi"}
    models = {p.name for p in (site / "botocore" / "data").iterdir()}
    assert models == {"endpoints.json", "s3", "sts"}
    for library in (site / "other.libs").iterdir():  # each a link to numpy.libs' copy
        assert library.is_symlink()
        assert library.resolve() == (site / "numpy.libs" / library.name).resolve()
    assert not any(p.is_symlink() for p in (site / "numpy.libs").iterdir())
    assert not any(p.is_symlink() for p in site.rglob("*.cpython-*.so"))


@pytest.mark.skipif(shutil.which("strip") is None, reason="binutils' strip is not installed")
def test_the_object_store_works_with_the_images_botocore(tmp_path: Path) -> None:
    """The image keeps botocore's models of S3 and the credential chain's services only:
    the S3 store's contract tests pass on such a botocore (the moto server keeps its own)."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    shutil.copytree(Path(sysconfig.get_paths()["purelib"]) / "botocore", site / "botocore")
    done = _slim(tmp_path / "venv")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p.name for p in (site / "botocore" / "data").iterdir() if p.is_dir()} == {
        "s3",
        "sts",
        "sso",
        "sso-oidc",
        "signin",
    }
    script = f"""
import sys
sys.path.insert(0, {str(site)!r})
import botocore, pytest
assert botocore.__file__.startswith({str(site)!r}), botocore.__file__
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-k", "s3",
                      "tests/unit/registry/test_store_contract.py"]))
"""
    tested = _python_script(script)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert re.search(r"\b[1-9]\d* passed", tested.stdout)


def test_the_build_context_lets_in_every_file_the_dockerfile_copies() -> None:
    """.dockerignore is an allow-list: a COPY of a file it leaves out fails the build."""
    allowed = [
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    dockerfile = (ROOT / "Dockerfile").read_text()
    sources = [
        source
        for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, flags=re.MULTILINE)
        for source in line.split()[:-1]
    ]
    assert "scripts/slim_venv.sh" in sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert any(source == a or source.startswith(f"{a}/") for a in allowed), source


def _python_script(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by a fresh interpreter at the repository's root (tests it starts
    see what the script left out of the import system)."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )


def _slim(venv: Path) -> subprocess.CompletedProcess[str]:
    """``scripts/slim_venv.sh`` run on ``venv``, as the image's build stage runs it."""
    return subprocess.run(
        ["bash", str(SCRIPTS / "slim_venv.sh"), str(venv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
