"""Export for serving: ONNX (onnxruntime) and torch.export give the estimator's outputs.

Models are tiny and fitted once per module; each model is exported once per format. The rows fed
to the exported graphs include missing values everywhere, unseen categories and values of another
type than at fit (numbers as strings, floats for ints, bools for numbers, ...), and they are encoded
both by the library and by a plain-Python encoder that reads only the JSON spec.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fixed_helpers import with_fixed
from sklearn.exceptions import NotFittedError

from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.data import TableEncoder
from tabsparse.export import (
    SPEC_FORMAT,
    SPEC_VERSION,
    entmax15_sorted,
    export_model,
    export_spec,
    serving_module,
    sparsemax_sorted,
    spec_path,
)
from tabsparse.sparsemax import entmax15, sparsemax

SMALL = dict(
    max_epochs=3, n_d=8, n_a=8, n_steps=2, n_independent=1, n_shared=1, random_state=0, device="cpu"
)
NAMES = ["num", "count", "flag", "color", "city", "code", "mixed"]
BATCHES = (1, 7, 1000)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "deployment.md"


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def _fit_frame(n: int, seed: int) -> pd.DataFrame:
    """Training table: float with NaN, int, bool, category (one declared value never seen),
    strings with None, object ints with None, object mix of numbers and strings."""
    rng = np.random.default_rng(seed)
    num = rng.normal(size=n)
    num[rng.random(n) < 0.15] = np.nan
    colors = rng.choice(np.array(["red", "green", "blue", None], dtype=object), n)
    cities = rng.choice(np.array(["paris", "oslo", "7", "lima", None], dtype=object), n)
    codes = rng.choice(np.array([1, 2, 3, 4, None], dtype=object), n)
    mixed = rng.choice(np.array([1, 2.5, "a", "b"], dtype=object), n)
    return pd.DataFrame(
        {
            "num": num,
            "count": rng.integers(0, 10, n),
            "flag": rng.random(n) < 0.4,
            "color": pd.Categorical(colors, categories=["red", "green", "blue", "violet"]),
            "city": pd.Series(cities, dtype=object),
            "code": pd.Series(codes, dtype=object),
            "mixed": pd.Series(mixed, dtype=object),
        }
    )


def _score(X: pd.DataFrame) -> np.ndarray:
    color = X["color"].astype(object).map({"red": 1.0, "green": -1.0}).fillna(0.0)
    return np.asarray(X["num"].fillna(0.5) + 0.2 * X["count"] + color, dtype=np.float64)


def _python_value(v: Any) -> Any:
    """A cell as the plain JSON-like value a serving system would receive."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


TRICKY_ROWS: list[dict[str, Any]] = [
    dict.fromkeys(NAMES),  # everything missing
    {  # unseen categories of every kind
        "num": 1e6,
        "count": -3,
        "flag": False,
        "color": "purple",
        "city": "atlantis",
        "code": 99,
        "mixed": "zzz",
    },
    {  # other types than at fit: strings for numbers, floats for ints
        "num": None,
        "count": 3.0,
        "flag": None,
        "color": "violet",
        "city": 7,
        "code": "2",
        "mixed": 1.0,
    },
    {"num": -0.5, "count": 2, "flag": True, "color": "red", "city": 7.0, "code": 2.0, "mixed": "1"},
    {
        "num": 0.25,
        "count": 1,
        "flag": True,
        "color": None,
        "city": "7",
        "code": True,
        "mixed": True,
    },
    {
        "num": 2.0,
        "count": 0,
        "flag": False,
        "color": "blue",
        "city": None,
        "code": 2.5,
        "mixed": 2.5,
    },
    {
        "num": None,
        "count": 9,
        "flag": True,
        "color": "green",
        "city": "Paris",
        "code": 4,
        "mixed": "a",
    },
]


@pytest.fixture(scope="module")
def train() -> pd.DataFrame:
    return _fit_frame(300, seed=0)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    """1000 raw rows as plain Python values, the tricky ones first."""
    frame = _fit_frame(1000 - len(TRICKY_ROWS), seed=1).astype(object)
    records = [{k: _python_value(v) for k, v in r.items()} for r in frame.to_dict("records")]
    return [*TRICKY_ROWS, *records]


@pytest.fixture(scope="module")
def test_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=NAMES)


@pytest.fixture(scope="module")
def models(train: pd.DataFrame) -> dict[str, Any]:
    score = _score(train)
    y_binary = (score > np.median(score)).astype(int)
    y_multi = np.array(["low", "mid", "high"], dtype=object)[
        np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    ]
    y_reg = 100.0 + 25.0 * score
    return {
        # the paper's per-row first mask (an initial transformer) and the default shared one
        "binary": with_fixed(TabNetClassifier(**SMALL), first_mask="per_row").fit(train, y_binary),
        "multiclass": TabNetClassifier(**SMALL).fit(train, y_multi),
        "regression": with_fixed(TabNetRegressor(**SMALL), first_mask="shared").fit(train, y_reg),
    }


# Which exports are made (each costs seconds): every format is tested with and without masks.
PLAN = {
    "binary": {"onnx": False, "torch": True},
    "multiclass": {"onnx": True, "torch": False},
    "regression": {"onnx": True, "torch": False},
}


@pytest.fixture(scope="module")
def exports(models: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Lazily exported files: ``exports[(name, format)]`` -> (model path, masks flag)."""
    folder = tmp_path_factory.mktemp("export")

    class Lazy(dict):  # type: ignore[type-arg]
        def __missing__(self, key: tuple[str, str]) -> tuple[Path, bool]:
            name, fmt = key
            masks = PLAN[name][fmt]
            suffix = ".onnx" if fmt == "onnx" else ".pt2"
            path = export_model(models[name], folder / f"{name}{suffix}", fmt, masks=masks)
            self[key] = (path, masks)
            return self[key]

    return Lazy()


@pytest.fixture(scope="module")
def programs(exports: dict[str, Any]) -> dict[str, Any]:
    """Lazily loaded torch.export programs: ``programs[name]`` -> callable module."""

    class Lazy(dict):  # type: ignore[type-arg]
        def __missing__(self, name: str) -> Any:
            self[name] = torch.export.load(str(exports[(name, "torch")][0])).module()
            return self[name]

    return Lazy()


def _ort_session(path: Path) -> Any:
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _reference(est: Any, X: pd.DataFrame, masks: bool) -> list[np.ndarray]:
    """What the exported graph must return, from the estimator's own methods."""
    if isinstance(est, TabNetClassifier):
        first = est.predict_proba(X)
    else:
        first = est.predict(X).reshape(len(X), -1)
    if not masks:
        return [first]
    explanation = est.explain(X)
    return [first, explanation.masks, explanation.importances]


def _check_outputs(est: Any, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    if isinstance(est, TabNetRegressor):
        assert got[0].dtype == np.float64
        atol = 1e-5 * float(np.max(est.target_scale_))
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=atol)
    else:
        assert got[0].dtype == np.float32
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-5)
        np.testing.assert_allclose(got[0].sum(axis=1), 1.0, atol=1e-5)
    for g, w in zip(got[1:], want[1:], strict=True):
        assert g.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5)


# --------------------------------------------------------------------------------------------
# A consumer's encoder, written from the spec alone (no tabsparse imports in here)
# --------------------------------------------------------------------------------------------


def spec_encoder(spec: dict[str, Any]) -> Any:
    """Return ``encode(rows) -> (numeric, codes)`` following the spec's documented rules."""
    missing = spec["categorical"]["codes"]["missing"]
    unseen = spec["categorical"]["codes"]["unseen"]
    offset = spec["categorical"]["codes"]["offset"]
    f32_max = float(np.finfo(np.float32).max)
    by_name = spec["columns_matched_by"] == "name"

    def is_missing(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    def number_text(x: float) -> str:
        if isinstance(x, int) or (x.is_integer() and abs(x) < 2.0**63):
            return str(int(x))
        return repr(float(x))

    def make_lookup(col: dict[str, Any]) -> Any:
        bools: dict[bool, int] = {}
        numbers: dict[float, int] = {}
        strings: dict[str, int] = {}
        for k, (value, kind) in enumerate(zip(col["vocabulary"], col["types"], strict=True)):
            table: dict[Any, int] = {"bool": bools, "str": strings}.get(kind, numbers)
            table[value] = k + offset

        def number(x: float) -> int:
            if numbers:
                return numbers.get(x, unseen)  # 1.0 and 1 are the same dict key
            if bools:
                return (
                    bools.get(True, unseen)
                    if x == 1
                    else bools.get(False, unseen)
                    if x == 0
                    else unseen
                )
            if strings:
                return strings.get(number_text(x), unseen)
            return unseen

        def lookup(v: Any) -> int:
            if is_missing(v):
                return missing
            if isinstance(v, bool):
                if bools:
                    return bools.get(v, unseen)
                return numbers.get(int(v), unseen) if numbers else unseen
            if isinstance(v, (int, float)):
                if math.isinf(v):
                    raise ValueError(f"infinite value in column {col['name']!r}")
                return number(v)
            if isinstance(v, str):
                if strings:
                    return strings.get(v, unseen)
                if numbers and not bools:
                    try:
                        x = float(v)
                    except ValueError:
                        return unseen
                    return number(x) if math.isfinite(x) else unseen
            return unseen

        return lookup

    numeric_cols = spec["numeric"]["columns"]
    categorical_cols = spec["categorical"]["columns"]
    lookups = [make_lookup(c) for c in categorical_cols]

    def to_number(v: Any, name: str) -> float:
        if is_missing(v):
            return math.nan
        x = float(v)  # bools -> 0.0 / 1.0, numeric strings parsed
        if math.isinf(x) or abs(x) > f32_max:
            raise ValueError(f"value {v!r} of column {name!r} is out of the float32 range")
        return x

    def encode(rows: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        numeric = np.empty((len(rows), len(numeric_cols)), dtype=np.float32)
        codes = np.empty((len(rows), len(categorical_cols)), dtype=np.int64)
        for i, row in enumerate(rows):

            def get(col: dict[str, Any], row: Any = row) -> Any:
                return row[col["name"]] if by_name else row[col["position"]]

            for j, col in enumerate(numeric_cols):
                numeric[i, j] = to_number(get(col), col["name"])
            for j, (col, lookup) in enumerate(zip(categorical_cols, lookups, strict=True)):
                codes[i, j] = lookup(get(col))
        return numeric, codes

    return encode


# --------------------------------------------------------------------------------------------
# Branch-free sparsemax / entmax
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [(5, 1), (9, 4), (300, 7), (20000, 8), (300, 300)],  # sort, search and wide library paths
)
@pytest.mark.parametrize("kind", ["sparsemax", "entmax"])
def test_sorted_mask_functions_equal_library(shape: tuple[int, int], kind: str) -> None:
    gen = torch.Generator().manual_seed(shape[0] * 1000 + shape[1])
    x = torch.randn(shape, generator=gen) * 3.0
    n, d = shape
    x[: n // 4] = torch.round(x[: n // 4])  # many ties
    x[n // 4 : n // 2, : d // 2] = 0.0  # zeroed scores, as a zero prior makes them
    x[-1] = 1.0  # a row of equal scores
    ours = sparsemax_sorted(x) if kind == "sparsemax" else entmax15_sorted(x)
    lib = sparsemax(x, dim=-1) if kind == "sparsemax" else entmax15(x, dim=-1)
    torch.testing.assert_close(ours, lib, rtol=0, atol=2e-6)
    torch.testing.assert_close(ours.sum(dim=-1), torch.ones(n), rtol=0, atol=1e-5)
    differ = (ours > 0) != (lib > 0)  # supports agree except on rounding-level boundary values
    assert bool((ours[differ] < 1e-6).all()) and bool((lib[differ] < 1e-6).all())


# --------------------------------------------------------------------------------------------
# Exported models give the estimator's outputs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PLAN))
def test_onnxruntime_matches_estimator(
    name: str, models: dict[str, Any], exports: dict[str, Any], test_frame: pd.DataFrame
) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    est = models[name]
    path, masks = exports[(name, "onnx")]
    session = _ort_session(path)
    assert [i.name for i in session.get_inputs()] == ["numeric", "codes"]
    for batch in BATCHES:
        X = test_frame.iloc[:batch]
        enc = est.encoder_.transform(X)
        got = session.run(None, {"numeric": enc.numeric, "codes": enc.codes})
        _check_outputs(est, got, _reference(est, X, masks))


@pytest.mark.parametrize("name", list(PLAN))
def test_torch_export_matches_estimator(
    name: str,
    models: dict[str, Any],
    exports: dict[str, Any],
    programs: dict[str, Any],
    test_frame: pd.DataFrame,
) -> None:
    est = models[name]
    masks = exports[(name, "torch")][1]
    module = programs[name]
    for batch in BATCHES:
        X = test_frame.iloc[:batch]
        enc = est.encoder_.transform(X)
        with torch.no_grad():
            out = module(torch.from_numpy(enc.numeric), torch.from_numpy(enc.codes))
        got = [t.numpy() for t in out] if masks else [out.numpy()]
        _check_outputs(est, got, _reference(est, X, masks))


def test_out_of_range_codes_are_unseen(models: dict[str, Any], programs: dict[str, Any]) -> None:
    est = models["binary"]
    module = programs["binary"]
    n_cat = len(est.encoder_.categorical_columns)
    numeric = torch.zeros((3, len(est.encoder_.numeric_columns)))
    codes = torch.tensor([[1] * n_cat, [99] * n_cat, [-4] * n_cat], dtype=torch.int64)
    # one row per call: within a batch, identical rows may round differently in the last bit
    # (the matrix kernels treat row blocks differently), across calls they take the same path
    first, *others = [module(numeric[i : i + 1], codes[i : i + 1])[0] for i in range(3)]
    for probabilities in others:
        torch.testing.assert_close(probabilities, first, rtol=0, atol=0)


def test_numeric_only_entmax_and_codes_only_models_torch(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    X_num = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
    X_num.loc[::5, "a"] = np.nan
    X_cat = pd.DataFrame(
        {"c": rng.choice(["u", "v", "w"], 200), "d": rng.choice(np.array(["x", None]), 200)}
    )
    y = (rng.random(200) < 0.5).astype(int)
    tiny = {**SMALL, "max_epochs": 2}
    reg = with_fixed(TabNetRegressor(**tiny), mask_type="entmax").fit(X_num, y * 1.0)
    clf = TabNetClassifier(**tiny).fit(X_cat, y)

    p = export_model(reg, tmp_path / "num.pt2", "torch", masks=True)
    assert [i["name"] for i in json.loads(spec_path(p).read_text())["inputs"]] == ["numeric"]
    module = torch.export.load(str(p)).module()
    enc = reg.encoder_.transform(X_num)
    got = [t.numpy() for t in module(torch.from_numpy(enc.numeric))]
    _check_outputs(reg, got, _reference(reg, X_num, True))

    p = export_model(clf, tmp_path / "cat.pt2", "torch")
    assert [i["name"] for i in json.loads(spec_path(p).read_text())["inputs"]] == ["codes"]
    enc = clf.encoder_.transform(X_cat)
    got = [torch.export.load(str(p)).module()(torch.from_numpy(enc.codes)).numpy()]
    _check_outputs(clf, got, _reference(clf, X_cat, False))


def test_serving_module_leaves_estimator_alone(models: dict[str, Any]) -> None:
    est = models["binary"]
    before = {k: v.clone() for k, v in est.network_.state_dict().items()}
    module = serving_module(est, masks=True)
    assert not module.training
    assert module.network is not est.network_  # type: ignore[union-attr]
    assert type(est.network_.encoder.attention[0]).__name__ == "AttentiveTransformer"
    for k, v in est.network_.state_dict().items():
        assert torch.equal(v, before[k])


# --------------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------------


def test_spec_round_trips_and_describes_the_model(
    models: dict[str, Any], exports: dict[str, Any], test_frame: pd.DataFrame
) -> None:
    for name, est in models.items():
        path, masks = exports[(name, "torch")]
        assert spec_path(path) == path.with_name(path.name + ".json")
        spec = json.loads(spec_path(path).read_text(encoding="utf-8"))
        assert json.loads(json.dumps(spec)) == spec
        assert spec["format"] == SPEC_FORMAT and spec["format_version"] == SPEC_VERSION
        assert spec["model_file"] == path.name and spec["model_format"] == "torch"
        assert spec["feature_names"] == NAMES and spec["columns_matched_by"] == "name"
        assert [c["name"] for c in spec["numeric"]["columns"]] == ["num", "count", "flag"]
        assert [c["name"] for c in spec["categorical"]["columns"]] == [
            "color",
            "city",
            "code",
            "mixed",
        ]
        assert spec["categorical"]["codes"] == {"missing": 0, "unseen": 1, "offset": 2}
        color = spec["categorical"]["columns"][0]
        assert color["vocabulary"] == ["blue", "green", "red", "violet"]
        assert color["cardinality"] == 6 and color["holds"] == ["str"]
        mixed = spec["categorical"]["columns"][3]
        assert mixed["vocabulary"] == [1, 2.5, "a", "b"]
        assert mixed["types"] == ["int", "float", "str", "str"]
        assert [i["name"] for i in spec["inputs"]] == ["numeric", "codes"]
        assert spec["inputs"][0]["dtype"] == "float32" and spec["inputs"][1]["dtype"] == "int64"
        outputs = [o["name"] for o in spec["outputs"]]
        first = "predictions" if name == "regression" else "probabilities"
        assert outputs == ([first, "masks", "importances"] if masks else [first])
        if name == "regression":
            assert spec["task"] == "regression" and spec["classes"] is None
            assert spec["target"]["ndim"] == 1 and spec["target"]["n_outputs"] == 1
        else:
            assert spec["task"] == "classification"
            assert spec["classes"] == est.classes_.tolist()
        # the embedded encoder state rebuilds an identical encoder
        again = TableEncoder.from_dict(spec["encoder"]).transform(test_frame)
        want = est.encoder_.transform(test_frame)
        np.testing.assert_array_equal(again.numeric, want.numeric)
        np.testing.assert_array_equal(again.codes, want.codes)
    assert export_spec(models["binary"], format="onnx")["model_format"] == "onnx"


def test_spec_encoder_reproduces_library_encoding(
    models: dict[str, Any], rows: list[dict[str, Any]], test_frame: pd.DataFrame
) -> None:
    est = models["multiclass"]
    spec = json.loads(json.dumps(export_spec(est)))
    numeric, codes = spec_encoder(spec)(rows)
    want = est.encoder_.transform(test_frame)
    np.testing.assert_array_equal(numeric, want.numeric)
    np.testing.assert_array_equal(codes, want.codes)
    # the tricky rows really exercise the rules: unseen, missing and converted values
    assert (codes[0] == 0).all() and np.isnan(numeric[0]).all()
    assert (codes[1] == 1).all()
    vocab = {c["name"]: c["vocabulary"] for c in spec["categorical"]["columns"]}
    j_code, j_city = 2, 1
    assert codes[2, j_code] == vocab["code"].index(2) + 2  # "2" parsed for a number vocabulary
    assert codes[2, j_city] == vocab["city"].index("7") + 2  # 7 as text for a string vocabulary
    # positional rows (a model fitted without column names) work the same way
    positional = dict(spec, columns_matched_by="position")
    _, codes2 = spec_encoder(positional)([[r[k] for k in NAMES] for r in rows[:20]])
    np.testing.assert_array_equal(codes2, codes[:20])


def test_spec_encoder_end_to_end_with_onnxruntime(
    models: dict[str, Any],
    exports: dict[str, Any],
    rows: list[dict[str, Any]],
    test_frame: pd.DataFrame,
) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    est = models["binary"]
    path, _ = exports[("binary", "onnx")]
    spec = json.loads(spec_path(path).read_text(encoding="utf-8"))
    numeric, codes = spec_encoder(spec)(rows)
    (probabilities,) = _ort_session(path).run(
        ["probabilities"], {"numeric": numeric, "codes": codes}
    )
    np.testing.assert_allclose(probabilities, est.predict_proba(test_frame), rtol=0, atol=1e-5)
    labels = np.asarray(spec["classes"])[probabilities.argmax(axis=1)]
    agree = (labels == est.predict(test_frame)).mean()
    assert agree > 0.99  # exact ties aside, the same decisions


def test_docs_encoder_matches(models: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    source = next(b for b in blocks if "def make_encoder" in b)
    namespace: dict[str, Any] = {}
    exec(compile(source, str(DOCS), "exec"), namespace)
    spec = json.loads(json.dumps(export_spec(models["regression"])))
    numeric, codes = namespace["make_encoder"](spec)(rows)
    want_numeric, want_codes = spec_encoder(spec)(rows)
    np.testing.assert_array_equal(numeric, want_numeric)
    np.testing.assert_array_equal(codes, want_codes)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_errors(models: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    est = models["binary"]
    with pytest.raises(ValueError, match="format must be one of"):
        export_model(est, tmp_path / "m.bin", "tflite")  # type: ignore[arg-type]
    with pytest.raises(NotFittedError):
        export_model(TabNetClassifier(), tmp_path / "m.pt2", "torch")
    with pytest.raises(TypeError, match="TabNetClassifier or TabNetRegressor"):
        export_model(object(), tmp_path / "m.pt2", "torch")
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # import onnxscript -> ImportError
    with pytest.raises(ImportError, match=r"tabsparse\[export\]") as info:
        export_model(est, tmp_path / "m.onnx", "onnx")
    assert "onnxscript" in str(info.value)
    assert not (tmp_path / "m.onnx").exists() and not spec_path(tmp_path / "m.onnx").exists()
