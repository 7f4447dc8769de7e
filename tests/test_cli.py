"""The ``tabsparse`` command line, called in-process through ``main([...])``."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tabsparse
from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.cli import CliError, infer_task, main, parse_value, read_table

TINY = ["max_epochs=2", "n_d=4", "n_a=4", "n_steps=2", "random_state=0"]
N_ROWS = 160


def make_frame(n: int = N_ROWS, seed: int = 0) -> pd.DataFrame:
    """Mixed columns: numeric with NaN, small integers, a categorical with NaN, two targets."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = rng.integers(0, 5, size=n)
    c = rng.choice(["red", "green", "blue"], size=n).astype(object)
    a[::9] = np.nan
    c[::13] = None
    label = np.where((np.nan_to_num(a) + (c == "red")) > 0.3, "yes", "no")
    amount = 2.0 * np.nan_to_num(a) + 0.5 * b + rng.normal(scale=0.1, size=n)
    return pd.DataFrame({"a": a, "b": b, "c": c, "label": label, "amount": amount})


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """``main`` on string arguments; returns the exit status, stdout and stderr."""
    rc = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def assert_one_line_error(rc: int, err: str, *fragments: str) -> None:
    assert rc != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tabsparse: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli")
    make_frame().to_csv(path / "train.csv", index=False)
    make_frame(n=40, seed=1).to_csv(path / "new.csv", index=False)
    return path


@pytest.fixture(scope="module")
def model_io():  # type: ignore[no-untyped-def]
    pytest.importorskip("tabsparse.io")
    return tabsparse  # load and save as the package re-exports them


@pytest.fixture(scope="module")
def classifier_file(workdir: Path, model_io) -> Path:  # type: ignore[no-untyped-def]
    out = workdir / "clf.model"
    argv = ["fit", str(workdir / "train.csv"), "--target", "label", "--drop", "amount"]
    assert main([*argv, "-o", str(out), "--param", *TINY]) == 0
    return out


@pytest.fixture(scope="module")
def regressor_file(workdir: Path, model_io) -> Path:  # type: ignore[no-untyped-def]
    out = workdir / "reg.model"
    argv = ["fit", str(workdir / "train.csv"), "-t", "amount", "--drop", "label", "-o", str(out)]
    for item in TINY:
        argv += ["-p", item]
    assert main(argv) == 0
    return out


# ---- happy paths ------------------------------------------------------------------------------


def test_fit_writes_a_classifier(classifier_file: Path, model_io) -> None:  # type: ignore[no-untyped-def]
    model = model_io.load(classifier_file)
    assert isinstance(model, TabNetClassifier)
    assert model.classes_.tolist() == ["no", "yes"]
    assert model.feature_names_in_.tolist() == ["a", "b", "c"]
    assert model.max_epochs == 2 and model.n_d == 4 and model.random_state == 0
    assert model.n_iter_ == 2
    assert model.callbacks is None


def test_fit_auto_picks_regression_for_a_float_target(regressor_file: Path, model_io) -> None:  # type: ignore[no-untyped-def]
    model = model_io.load(regressor_file)
    assert isinstance(model, TabNetRegressor)
    assert model.feature_names_in_.tolist() == ["a", "b", "c"]


def test_predict_matches_the_model_loaded_in_python(
    capsys: pytest.CaptureFixture[str], workdir: Path, classifier_file: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    out = workdir / "pred.csv"
    rc, stdout, err = run(capsys, "predict", classifier_file, workdir / "new.csv", "-o", out)
    assert (rc, stdout, err) == (0, "", "")
    written = pd.read_csv(out)
    assert written.columns.tolist() == ["prediction"]
    new = pd.read_csv(workdir / "new.csv")
    expected = model_io.load(classifier_file).predict(new[["a", "b", "c"]])
    assert written["prediction"].tolist() == expected.tolist()


def test_predict_proba_has_one_column_per_class(
    capsys: pytest.CaptureFixture[str], workdir: Path, classifier_file: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    out = workdir / "proba.csv"
    rc, _, err = run(capsys, "predict", classifier_file, workdir / "new.csv", "-o", out, "--proba")
    assert rc == 0, err
    written = pd.read_csv(out)
    assert written.columns.tolist() == ["no", "yes"]
    new = pd.read_csv(workdir / "new.csv")
    expected = model_io.load(classifier_file).predict_proba(new[["a", "b", "c"]])
    np.testing.assert_allclose(written.to_numpy(), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(written.sum(axis=1), 1.0)


def test_predict_regression_and_gzip_input(
    capsys: pytest.CaptureFixture[str], workdir: Path, regressor_file: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    gz = workdir / "new.csv.gz"
    make_frame(n=40, seed=1).to_csv(gz, index=False, compression="gzip")
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    plain, zipped = workdir / "reg_plain.csv", workdir / "reg_gz.csv"
    assert run(capsys, "predict", regressor_file, workdir / "new.csv", "-o", plain)[0] == 0
    assert run(capsys, "predict", regressor_file, gz, "-o", zipped)[0] == 0
    a, b = pd.read_csv(plain), pd.read_csv(zipped)
    assert a.shape == (40, 1) and a.columns.tolist() == ["prediction"]
    pd.testing.assert_frame_equal(a, b)
    new = pd.read_csv(workdir / "new.csv")
    expected = model_io.load(regressor_file).predict(new[["a", "b", "c"]])
    np.testing.assert_allclose(a["prediction"], expected, rtol=1e-12)


def test_explain_writes_importances_and_a_plot(
    capsys: pytest.CaptureFixture[str], workdir: Path, classifier_file: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    out, png = workdir / "imp.csv", workdir / "masks.png"
    rc, _, err = run(
        capsys,
        "explain",
        classifier_file,
        workdir / "new.csv",
        "-o",
        out,
        "--plot",
        png,
        "--rows",
        5,
    )
    assert rc == 0, err
    written = pd.read_csv(out)
    assert written.columns.tolist() == ["a", "b", "c"]
    assert written.shape == (40, 3)
    np.testing.assert_allclose(written.sum(axis=1), 1.0, atol=1e-5)
    new = pd.read_csv(workdir / "new.csv")
    expected = model_io.load(classifier_file).explain(new[["a", "b", "c"]]).importances
    np.testing.assert_allclose(written.to_numpy(), expected, rtol=1e-6, atol=1e-7)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_info_text_and_json(
    capsys: pytest.CaptureFixture[str], classifier_file: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    rc, text, err = run(capsys, "info", classifier_file)
    assert rc == 0 and err == ""
    assert "TabNetClassifier" in text
    assert "categorical (3 categories)" in text
    assert "2 epoch(s)" in text and "max_epochs = 2" in text
    rc, text, _ = run(capsys, "info", classifier_file, "--json")
    assert rc == 0
    info = json.loads(text)
    assert info["estimator"] == "TabNetClassifier"
    assert info["classes"] == ["no", "yes"]
    assert [(c["name"], c["kind"], c["n_categories"]) for c in info["columns"]] == [
        ("a", "numeric", 0),
        ("b", "numeric", 0),
        ("c", "categorical", 3),
    ]
    assert info["training"]["epochs"] == 2 and info["training"]["best_epoch"] == 1
    assert info["parameters"]["n_d"] == 4
    assert sum(info["feature_importances"].values()) == pytest.approx(1.0, abs=1e-5)


def test_verbose_fit_shows_progress_on_stderr(
    capsys: pytest.CaptureFixture[str], workdir: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    out = workdir / "verbose.model"
    rc, stdout, err = run(
        capsys, "fit", workdir / "train.csv", "-t", "label", "-o", out, "-v", "-p", *TINY
    )
    assert rc == 0 and stdout == ""
    assert "loss=" in err and "2/2" in err
    assert "wrote" in err
    assert model_io.load(out).callbacks is None


# ---- pure helpers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "task"),
    [
        (["x", "y", "x"], "classification"),
        ([True, False, True], "classification"),
        ([0, 1, 2, 1], "classification"),
        ([0.0, 1.0, 1.0], "classification"),
        (list(range(50)), "regression"),
        ([0.5, 1.25, 3.0], "regression"),
        ([float(v) for v in range(21)], "regression"),
    ],
)
def test_infer_task(values: list[object], task: str) -> None:
    assert infer_task(pd.Series(values)) == task


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", 3),
        ("0.5", 0.5),
        ("1e-3", 1e-3),
        ("true", True),
        ("False", False),
        ("None", None),
        ("null", None),
        ("[1, 2]", [1, 2]),
        ('[["a", "b"]]', [["a", "b"]]),
        ('{"yes": 2}', {"yes": 2}),
        ('"007"', "007"),
        ("cosine", "cosine"),
    ],
)
def test_parse_value(text: str, value: object) -> None:
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_semicolon_and_tab_separated_files(
    capsys: pytest.CaptureFixture[str], workdir: Path, classifier_file: Path
) -> None:
    comma = workdir / "sep_comma.csv"
    assert run(capsys, "predict", classifier_file, workdir / "new.csv", "-o", comma)[0] == 0
    new = make_frame(n=40, seed=1)
    new.to_csv(workdir / "new_semi.csv", sep=";", index=False)
    new.to_csv(workdir / "new_tab.csv.gz", sep="\t", index=False)
    pd.testing.assert_frame_equal(read_table(str(workdir / "new_semi.csv")), new)
    for data, extra in [
        ("new_semi.csv", []),  # sniffed from the header line
        ("new_semi.csv", ["--sep", ";"]),
        ("new_tab.csv.gz", []),
        ("new_tab.csv.gz", ["--sep", "tab"]),
    ]:
        out = workdir / "sep_other.csv"
        rc, _, err = run(capsys, "predict", classifier_file, workdir / data, "-o", out, *extra)
        assert rc == 0, (data, extra, err)
        pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(comma))
    # a separator given explicitly is used as given: ';' data read with ',' has no column 'a'
    rc, _, err = run(
        capsys, "predict", classifier_file, workdir / "new_semi.csv", "-o", out, "--sep", ","
    )
    assert_one_line_error(rc, err, "column(s) the model needs", "'a'")
    rc, _, err = run(
        capsys, "predict", classifier_file, workdir / "new.csv", "-o", out, "--sep", ";;"
    )
    assert rc == 2 and "expected one character" in err


def test_header_only_file_gives_an_empty_output(
    capsys: pytest.CaptureFixture[str], workdir: Path, classifier_file: Path, regressor_file: Path
) -> None:
    header_only = workdir / "header_only.csv"
    make_frame(n=40, seed=1).iloc[:0].to_csv(header_only, index=False)
    assert header_only.read_text().strip() == "a,b,c,label,amount"
    for model, extra, columns in [
        (classifier_file, [], ["prediction"]),
        (classifier_file, ["--proba"], ["no", "yes"]),
        (regressor_file, [], ["prediction"]),
    ]:
        out = workdir / "empty_pred.csv"
        rc, stdout, err = run(capsys, "predict", model, header_only, "-o", out, *extra)
        assert (rc, stdout, err) == (0, "", ""), err
        assert out.read_text().splitlines() == [",".join(columns)]
        full = workdir / "full_pred.csv"
        assert run(capsys, "predict", model, workdir / "new.csv", "-o", full, *extra)[0] == 0
        assert pd.read_csv(full).columns.tolist() == columns  # the same columns as with rows
    out = workdir / "empty_explain.csv"
    rc, _, err = run(capsys, "explain", classifier_file, header_only, "-o", out)
    assert (rc, err) == (0, "")
    assert out.read_text().splitlines() == ["a,b,c"]


def test_version_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.strip() == f"tabsparse {tabsparse.__version__}"


def test_python_dash_m_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tabsparse", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"tabsparse {tabsparse.__version__}"


# ---- errors: one line on stderr, non-zero status, no traceback -----------------------------------


def test_missing_data_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = run(capsys, "fit", tmp_path / "nope.csv", "-t", "y", "-o", tmp_path / "m")
    assert_one_line_error(rc, err, "not found", "nope.csv")


def test_missing_target_lists_the_columns(
    capsys: pytest.CaptureFixture[str], workdir: Path
) -> None:
    rc, _, err = run(capsys, "fit", workdir / "train.csv", "-t", "lable", "-o", workdir / "m")
    assert_one_line_error(rc, err, "'lable'", "available columns: a, b, c, label, amount")
    assert "did you mean 'label'" in err


def test_missing_drop_column(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    argv = ["fit", workdir / "train.csv", "-t", "label", "--drop", "zzz", "-o", workdir / "m"]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "'zzz'", "available columns")


def test_unknown_parameter_suggests_close_names(
    capsys: pytest.CaptureFixture[str], workdir: Path
) -> None:
    argv = ["fit", workdir / "train.csv", "-t", "label", "-o", workdir / "m", "-p", "max_epoch=3"]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "unknown parameter 'max_epoch'", "'max_epochs'")


def test_unknown_parameter_without_close_match_lists_all(
    capsys: pytest.CaptureFixture[str], workdir: Path
) -> None:
    argv = ["fit", workdir / "train.csv", "-t", "label", "-o", workdir / "m", "-p", "zzzz=1"]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "'zzzz'", "n_steps", "learning_rate")


def test_class_weight_is_not_a_regressor_parameter(
    capsys: pytest.CaptureFixture[str], workdir: Path
) -> None:
    argv = ["fit", workdir / "train.csv", "-t", "amount", "-o", workdir / "m"]
    rc, _, err = run(capsys, *argv, "-p", "class_weight=balanced")
    assert_one_line_error(rc, err, "'class_weight'", "TabNetRegressor")


@pytest.mark.parametrize(
    ("param", "fragment"),
    [
        ("n_d=abc", "'n_d'"),
        ("n_d=0", "'n_d'"),
        ("early_stopping=sometimes", "'early_stopping'"),
        ("lr_schedule=cosine", "'lr_schedule'"),
        ("grouped_features=[[0, 1]", "not valid JSON"),
        ("max_epochs", "NAME=VALUE"),
        ("callbacks=[]", "'callbacks'"),
    ],
)
def test_bad_parameter_value(
    capsys: pytest.CaptureFixture[str], workdir: Path, param: str, fragment: str
) -> None:
    argv = ["fit", workdir / "train.csv", "-t", "label", "-o", workdir / "m", "-p", param]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, fragment)
    assert not (workdir / "m").exists()


def test_parameter_given_twice(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    argv = ["fit", workdir / "train.csv", "-t", "label", "-o", workdir / "m"]
    rc, _, err = run(capsys, *argv, "-p", "n_d=4", "-p", "n_d=8")
    assert_one_line_error(rc, err, "'n_d'", "more than once")


def test_missing_target_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    frame = make_frame(n=30)
    frame.loc[[2, 5], "label"] = None
    frame.to_csv(tmp_path / "holes.csv", index=False)
    rc, _, err = run(capsys, "fit", tmp_path / "holes.csv", "-t", "label", "-o", tmp_path / "m")
    assert_one_line_error(rc, err, "2 missing value(s)")


def test_regression_on_a_text_target(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    argv = ["fit", workdir / "train.csv", "-t", "label", "--task", "regression"]
    rc, _, err = run(capsys, *argv, "-o", workdir / "m")
    assert_one_line_error(rc, err, "numeric target")


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("empty.csv", b"", "is empty"),
        ("binary.csv", bytes(range(128, 256)) * 4, "not a text CSV"),
        ("ragged.csv", b"a,b\n1,2\n3,4,5,6\n", "Expected 2 fields"),
    ],
)
def test_unreadable_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, content: bytes, fragment: str
) -> None:
    (tmp_path / name).write_bytes(content)
    rc, _, err = run(capsys, "fit", tmp_path / name, "-t", "a", "-o", tmp_path / "m")
    assert_one_line_error(rc, err, fragment)


def test_parquet_without_pyarrow(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    (tmp_path / "data.parquet").write_bytes(b"PAR1")
    rc, _, err = run(capsys, "fit", tmp_path / "data.parquet", "-t", "y", "-o", tmp_path / "m")
    assert_one_line_error(rc, err, "pyarrow", "pip install")


def test_output_directory_missing(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    argv = ["fit", workdir / "train.csv", "-t", "label", "-o", workdir / "no" / "such" / "m"]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "does not exist")


def test_usage_error_is_one_line(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    rc, _, err = run(capsys, "fit", workdir / "train.csv", "-o", workdir / "m")
    assert rc == 2
    assert_one_line_error(rc, err, "--target")
    rc, _, err = run(capsys, "frobnicate")
    assert_one_line_error(rc, err, "frobnicate")


def test_missing_model_file(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    rc, _, err = run(capsys, "info", workdir / "missing.model")
    assert_one_line_error(rc, err, "model file not found")


def test_a_file_that_is_not_a_model(
    capsys: pytest.CaptureFixture[str], workdir: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    for command in (["info"], ["predict"], ["explain"]):
        argv = [*command, workdir / "train.csv"]
        if command != ["info"]:
            argv += [workdir / "new.csv", "-o", workdir / "x.csv"]
        rc, _, err = run(capsys, *argv)
        assert_one_line_error(rc, err, "train.csv")


def test_data_lacking_model_columns(
    capsys: pytest.CaptureFixture[str], workdir: Path, classifier_file: Path
) -> None:
    make_frame(n=10).drop(columns=["c"]).to_csv(workdir / "no_c.csv", index=False)
    argv = ["predict", classifier_file, workdir / "no_c.csv", "-o", workdir / "x.csv"]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "'c'", "the model needs")


def test_proba_needs_a_classifier(
    capsys: pytest.CaptureFixture[str], workdir: Path, regressor_file: Path
) -> None:
    argv = ["predict", regressor_file, workdir / "new.csv", "-o", workdir / "x.csv", "--proba"]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "--proba", "TabNetRegressor")


def test_debug_shows_the_exception(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for argv in (["--debug", "fit"], ["fit", "--debug"]):
        with pytest.raises(CliError, match="not found"):
            main([*argv, str(tmp_path / "nope.csv"), "-t", "y", "-o", str(tmp_path / "m")])


def test_unexpected_errors_are_one_line_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(path: str, sep: str | None = None) -> None:
        raise RuntimeError("something broke\nbadly")

    monkeypatch.setattr("tabsparse.cli._fit.read_table", boom)
    rc, _, err = run(capsys, "fit", tmp_path / "x.csv", "-t", "y", "-o", tmp_path / "m")
    assert_one_line_error(rc, err, "RuntimeError", "something broke badly", "--debug")
    with pytest.raises(RuntimeError):
        main(["--debug", "fit", str(tmp_path / "x.csv"), "-t", "y", "-o", str(tmp_path / "m")])


def test_warnings_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def warn_then_fail(path: str, sep: str | None = None) -> None:
        warnings.warn("careful\nnow", UserWarning, stacklevel=1)
        raise CliError("stop")

    monkeypatch.setattr("tabsparse.cli._fit.read_table", warn_then_fail)
    rc, _, err = run(capsys, "fit", tmp_path / "x.csv", "-t", "y", "-o", tmp_path / "m")
    assert rc == 1
    assert err.splitlines() == ["tabsparse: warning: careful now", "tabsparse: error: stop"]


def test_parquet_fit_and_predict(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    make_frame().to_parquet(tmp_path / "train.parquet")
    make_frame(n=40, seed=1).to_parquet(tmp_path / "new.parquet")
    argv = ["fit", tmp_path / "train.parquet", "--target", "label", "--drop", "amount"]
    rc, _, err = run(capsys, *argv, "-o", tmp_path / "m", "--param", *TINY)
    assert rc == 0, err
    rc, _, err = run(
        capsys, "predict", tmp_path / "m", tmp_path / "new.parquet", "-o", tmp_path / "p.csv"
    )
    assert rc == 0, err
    assert len(pd.read_csv(tmp_path / "p.csv")) == 40


def test_a_pretrainer_file_is_explained_and_described_but_not_predicted(
    capsys: pytest.CaptureFixture[str], workdir: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    from tabsparse import TabNetPretrainer

    frame = make_frame()[["a", "b", "c"]]
    path = workdir / "pretrainer.model"
    model_io.save(TabNetPretrainer(max_epochs=2, n_d=4, n_a=4, random_state=0).fit(frame), path)
    rc, text, err = run(capsys, "info", path)
    assert rc == 0 and err == "" and "TabNetPretrainer" in text
    out = workdir / "pretrainer_explain.csv"
    rc, _, err = run(capsys, "explain", path, workdir / "new.csv", "-o", out)
    assert rc == 0 and err == ""
    assert pd.read_csv(out).columns.tolist() == ["a", "b", "c"]
    rc, _, err = run(capsys, "predict", path, workdir / "new.csv", "-o", workdir / "p.csv")
    assert_one_line_error(rc, err, "TabNetPretrainer", "makes no predictions")


def _explain_with(capsys, workdir: Path, model: Path, flag: str):  # type: ignore[no-untyped-def]
    """``tabsparse explain MODEL new.csv -o FILE flag``: its arguments, the table it wrote and
    the rows it explained."""
    args = ("explain", model, workdir / "new.csv", "-o", workdir / f"{flag[2:]}.csv", flag)
    rc, _, err = run(capsys, *args)
    assert rc == 0, err
    return args, pd.read_csv(args[4]), pd.read_csv(workdir / "new.csv")


def test_explain_selected_writes_the_selectors_probabilities(
    capsys: pytest.CaptureFixture[str], workdir: Path, classifier_file: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    args, written, new = _explain_with(capsys, workdir, classifier_file, "--selected")
    expected = model_io.load(classifier_file).explain(new[["a", "b", "c"]])
    assert written.columns.tolist() == ["a", "b", "c"]
    assert expected.selection_probabilities is not None
    np.testing.assert_allclose(
        written.to_numpy(), expected.selection_probabilities, rtol=1e-6, atol=1e-7
    )
    rc, _, err = run(capsys, *args, "--attributions")
    assert_one_line_error(rc, err, "--selected and --attributions", "choose one")
    rc, _, err = run(capsys, *args, "--plot", workdir / "x.png")
    assert_one_line_error(rc, err, "--plot", "cannot be combined with --selected")
    rc, _, err = run(capsys, *args[:-1], "--effects")
    assert rc == 2 and "unrecognized arguments: --effects" in err


def test_explain_attributions_writes_signed_values_that_add_up(
    capsys: pytest.CaptureFixture[str], workdir: Path, classifier_file: Path, model_io
) -> None:  # type: ignore[no-untyped-def]
    args, written, new = _explain_with(capsys, workdir, classifier_file, "--attributions")
    model = model_io.load(classifier_file)
    new = new[["a", "b", "c"]]
    expected = model.explain(new, attributions=True)
    assert written.columns.tolist() == ["a", "b", "c", "base_value"]
    np.testing.assert_allclose(written[["a", "b", "c"]], expected.attributions, rtol=1e-6)
    proba = model.predict_proba(new)
    np.testing.assert_allclose(
        written.sum(axis=1), np.log(proba[:, 1] / proba[:, 0]), rtol=1e-4, atol=1e-5
    )
    rc, _, err = run(capsys, *args, "--permutations", "8")
    assert rc == 0, err
    sampled = pd.read_csv(args[4])
    np.testing.assert_allclose(
        sampled[["a", "b", "c"]],
        model.explain(new, attributions=True, n_permutations=8).attributions,
        rtol=1e-6,
    )
    rc, _, err = run(capsys, *args, "--permutations", "3")
    assert_one_line_error(rc, err, "--permutations 3", "even number")
    rc, _, err = run(capsys, *args[:-1], "--permutations", "4")
    assert_one_line_error(rc, err, "--permutations", "add --attributions")
    rc, _, err = run(capsys, *args, "--plot", workdir / "x.png")
    assert_one_line_error(rc, err, "--plot", "cannot be combined with --attributions")
