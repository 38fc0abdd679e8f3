"""``dcnlab reproduce`` and ``dcnlab report --reproduction``, in memory: the engine's
run_experiment is replaced by one that writes what a real run would (with the engine's
writers, reproduction_results.py), so the order of the experiments, --resume, the
outputs and the exit statuses are checked without a network."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from reproduction_results import EXPERIMENTS, FIXTURE, PAPERS, use_fixture, write_results
from reproduction_results import write_spec_results as write_spec

from dcnlab import cli
from dcnlab.benchmarks.engine import runner as engine
from dcnlab.benchmarks.engine.reproduction import document, papers
from dcnlab.benchmarks.engine.results import read_json
from dcnlab.benchmarks.engine.spec import load_specs


class FakeRun:
    """run_experiment's stand-in: records each call and writes its results."""

    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail  # the experiment file that stops early

    def __call__(self, spec_path: Any, out_dir: Any = None, progress: bool = True,
                 resume: bool = False, scenarios: list[str] | None = None,
                 seeds: list[int] | None = None, cluster: str | None = None) -> None:
        self.calls.append({"file": Path(spec_path), "out": Path(out_dir), "resume": resume,
                           "scenarios": scenarios, "progress": progress, "seeds": seeds,
                           "cluster": cluster})
        for spec in engine.select_scenarios(load_specs(spec_path), scenarios):
            spec = replace(spec, seeds=seeds) if seeds is not None else spec
            where = Path(out_dir) / spec.scenario if spec.scenario else Path(out_dir)
            if Path(spec_path).name == self.fail:
                write_spec(where, spec, status="failed", schemes=["base"])
                raise engine.ExperimentError("experiment stopped early: a network failed")
            if resume and (where / "flows.csv").exists():
                (where / "flows.csv").unlink()  # as resuming rewrites what it keeps
                (where / "network.csv").unlink()
            write_spec(where, spec)


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRun:
    use_fixture(monkeypatch)
    run = FakeRun()
    monkeypatch.setattr(engine, "run_experiment", run)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    return run


def _main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_reproduce_runs_the_papers_experiments_in_order_and_writes_three_files(
        fake: FakeRun, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "p900"
    code, stdout, err = _main(["reproduce", "p900", "--out", str(out), "--quiet"], capsys)
    assert code == cli.EXIT_OK, err
    assert [(c["file"], c["out"], c["scenarios"], c["resume"], c["progress"])
            for c in fake.calls] == [
        (EXPERIMENTS / "tiny.yaml", out / "tiny", None, False, False),
        (EXPERIMENTS / "tiny_sizes.yaml", out / "tiny_sizes", ["short", "long"], False,
         False)]
    assert sorted(p.name for p in out.iterdir()) == [
        "REPRODUCTION.md", "claims.png", "reproduction.json", "tiny", "tiny_sizes"]
    summary = read_json(out / "reproduction.json")
    assert summary == read_json(FIXTURE / "p900.json")  # the same results: the same numbers
    paper = papers.load_file(PAPERS / "p900.yaml", EXPERIMENTS)
    assert (out / "REPRODUCTION.md").read_text() == document.render(paper, summary)
    assert (out / "claims.png").stat().st_size > 0
    lines = stdout.splitlines()
    assert lines[0] == ("fast-queue (senders = 2): reproduced, measured 0.368 [0.287, 0.472] "
                        "against the paper's 0.4 (lower)")
    assert ("slow-fewer-drops (senders = 2): inconclusive, measured 1.00 [-3.97, 5.97] "
            "against the paper's -5 (lower); needed to decide: 18") in lines
    assert ("fast-queue-direction (senders = 2): direction, measured 0.368 [0.287, 0.472] "
            "against the paper's no value (lower)") in lines
    assert lines[-1] == f"dcnlab: {out / 'REPRODUCTION.md'}"
    assert f"  {out / 'claims.png'}" in lines


def test_reproduce_refuses_an_output_directory_with_results(
        fake: FakeRun, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = write_results(tmp_path / "p900")
    code, _, err = _main(["reproduce", "p900", "--out", str(out)], capsys)
    assert code == cli.EXIT_FAILED
    assert f"{out / 'tiny'} already holds results (flows.csv)" in err
    assert f"--resume {out}" in err and fake.calls == []


def test_resume_runs_only_what_is_not_complete(
        fake: FakeRun, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = write_results(tmp_path / "p900")
    meta = out / "tiny_sizes" / "long" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "status": "interrupted"}))
    (out / "REPRODUCTION.md").write_text("stale")
    code, _, err = _main(["reproduce", "p900", "--resume", str(out)], capsys)
    assert code == cli.EXIT_OK, err
    # tiny is complete and left alone; tiny_sizes continues, from the file it began with
    assert [(c["file"], c["out"], c["scenarios"], c["resume"]) for c in fake.calls] == [
        (EXPERIMENTS / "tiny_sizes.yaml", out / "tiny_sizes", ["short", "long"], True)]
    assert (out / "REPRODUCTION.md").read_text().startswith("# p900: ")


def test_seeds_the_paper_file_adds_run_on_resume_and_only_there(
        fake: FakeRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """A paper file that gives an experiment more seeds than an earlier reproduction ran:
    --resume continues that experiment with them (the engine keeps the recorded runs),
    and leaves complete ones alone."""
    own = tmp_path / "papers"
    own.mkdir()
    text = (PAPERS / "p900.yaml").read_text().replace(
        "  - file: tiny.yaml\n", "  - file: tiny.yaml\n    seeds: [1, 2, 3]\n")
    assert "seeds: [1, 2, 3]" in text
    (own / "p900.yaml").write_text(text)
    use_fixture(monkeypatch, own)
    out = write_results(tmp_path / "p900")
    shutil.rmtree(out / "tiny")
    (spec,) = load_specs(EXPERIMENTS / "tiny.yaml")
    write_spec(out / "tiny", replace(spec, seeds=[1, 2]))  # an earlier run of two seeds
    code, _, err = _main(["reproduce", "p900", "--resume", str(out)], capsys)
    assert code == cli.EXIT_OK, err
    assert [(c["file"], c["out"], c["resume"], c["seeds"]) for c in fake.calls] == [
        (EXPERIMENTS / "tiny.yaml", out / "tiny", True, [1, 2, 3])]
    assert read_json(out / "tiny" / "meta.json")["spec"]["seeds"] == [1, 2, 3]
    assert read_json(out / "reproduction.json")["series"] == \
        read_json(FIXTURE / "p900.json")["series"]
    fake.calls.clear()
    code, _, err = _main(["reproduce", "p900", "--resume", str(out)], capsys)
    assert code == cli.EXIT_OK, err
    assert fake.calls == []  # every seed there now


def test_resume_of_a_complete_reproduction_needs_no_root(
        fake: FakeRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    out = write_results(tmp_path / "p900")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, stdout, err = _main(["reproduce", "p900", "--resume", str(out)], capsys)
    assert code == cli.EXIT_OK, err
    assert fake.calls == [] and (out / "REPRODUCTION.md").is_file()
    # with something left to run, root is asked for before anything runs
    meta = out / "tiny" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "status": "failed"}))
    code, _, err = _main(["reproduce", "p900", "--resume", str(out)], capsys)
    assert code == cli.EXIT_USAGE and "needs root" in err and fake.calls == []


def test_a_fresh_reproduction_needs_root(fake: FakeRun, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, _, err = _main(["reproduce", "p900", "--out", str(tmp_path / "x")], capsys)
    assert code == cli.EXIT_USAGE and "needs root" in err
    assert fake.calls == [] and not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "p999"], "argument PAPER: invalid choice: 'p999'"),
    (["reproduce", "p900", "--resume", "{tmp}/nothing"],
     "--resume {tmp}/nothing: no such directory"),
    (["reproduce", "p900", "--resume", "{tmp}"],
     "--resume {tmp}: it holds none of p900's experiments (tiny, tiny_sizes): not a "
     "reproduction of p900"),
    (["reproduce", "p900", "--resume", "{tmp}", "--out", "{tmp}/x"],
     "--resume DIR continues the reproduction in DIR; give no --out with it"),
    (["report", "{tmp}", "--reproduction", "p999"], "argument --reproduction: invalid "
                                                    "choice: 'p999'"),
    (["report", "{tmp}/nothing", "--reproduction", "p900"], "{tmp}/nothing is not a "
                                                            "directory"),
])
def test_usage_errors(fake: FakeRun, tmp_path: Path, capsys: pytest.CaptureFixture,
                      argv: list[str], message: str) -> None:
    code, _, err = _main([a.format(tmp=tmp_path) for a in argv], capsys)
    assert code == cli.EXIT_USAGE
    assert message.format(tmp=tmp_path) in err, err
    assert fake.calls == []


def test_a_bad_paper_file_is_a_usage_error_before_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    use_fixture(monkeypatch, tmp_path)
    (tmp_path / "p901.yaml").write_text((PAPERS / "p900.yaml").read_text()
                                        .replace("paper: p900", "paper: p901")
                                        .replace("metric: qout_p95", "metric: qout_p96"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, _, err = _main(["reproduce", "p901"], capsys)
    assert code == cli.EXIT_USAGE
    assert (f"{tmp_path / 'p901.yaml'}: claims[1] (fast-queue-tail).metric: table network "
            "has no metric 'qout_p96' (did you mean 'qout_p95'?)") in err
    assert "needs root" not in err


def test_an_experiment_that_stops_early_fails_the_reproduction(
        fake: FakeRun, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fake.fail = "tiny.yaml"
    out = tmp_path / "p900"
    code, _, err = _main(["reproduce", "p900", "--out", str(out)], capsys)
    assert code == cli.EXIT_FAILED and "a network failed" in err
    assert len(fake.calls) == 1 and not (out / "REPRODUCTION.md").exists()


def test_report_reproduction_regenerates_from_results(
        fake: FakeRun, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = write_results(tmp_path / "p900")
    code, stdout, err = _main(["report", str(out), "--reproduction", "p900"], capsys)
    assert code == cli.EXIT_OK, err
    assert read_json(out / "reproduction.json") == read_json(FIXTURE / "p900.json")
    assert "long-elephants (size = 8388608): reproduced" in stdout
    assert fake.calls == []
    # results that lack what a claim needs: exit 2, naming the claim and the file
    (out / "tiny" / "network.csv").unlink()
    code, _, err = _main(["report", str(out), "--reproduction", "p900"], capsys)
    assert code == cli.EXIT_USAGE
    assert (f"claim fast-queue (network qout_mean, class all): {out / 'tiny' / 'network.csv'}"
            " does not exist") in err


def test_resume_starts_a_scenario_the_experiment_file_gained_from_the_current_file(
        fake: FakeRun, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Results begun when tiny_sizes.yaml had no 'long' scenario (its copy lacks it, the
    file has it now and the paper file wants it): --resume continues the recorded
    scenarios from the copy they began with and starts 'long' from the current file
    (a fresh run into its own directory), instead of failing on a scenario the copy
    does not know."""
    out = write_results(tmp_path / "p900")
    shutil.rmtree(out / "tiny_sizes" / "long")
    for copy in (out / "tiny_sizes").glob("*/spec.yaml"):  # every scenario's copy
        text = copy.read_text()
        start, end = text.index("  long:\n"), text.index("  # the short sizes again")
        copy.write_text(text[:start] + text[end:])  # the file as it was: no 'long'

    code, _, err = _main(["reproduce", "p900", "--resume", str(out)], capsys)
    assert code == cli.EXIT_OK, err
    # 'short' is complete and left alone; 'long' starts afresh from the current file
    assert [(c["file"], c["out"], c["scenarios"], c["resume"]) for c in fake.calls] == [
        (EXPERIMENTS / "tiny_sizes.yaml", out / "tiny_sizes", ["long"], False)]
    assert read_json(out / "reproduction.json")["series"] == \
        read_json(FIXTURE / "p900.json")["series"]


def _runs(path: Path, scenarios: list[str] | None = None) -> int:
    return sum(len(s.schemes) * len(s.seeds) * len(s.loads)
               for s in engine.select_scenarios(load_specs(path), scenarios))


def test_the_reproduction_prints_its_runs_left_and_time_before_it_starts(
        fake: FakeRun, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """One line for the whole paper before the first experiment starts; resuming, the
    runs an experiment recorded are not counted again."""
    out = tmp_path / "p900"
    code, _, err = _main(["reproduce", "p900", "--out", str(out), "--quiet"], capsys)
    assert code == cli.EXIT_OK, err
    total = _runs(EXPERIMENTS / "tiny.yaml") + _runs(EXPERIMENTS / "tiny_sizes.yaml",
                                                     ["short", "long"])
    assert f"dcnlab reproduce p900: {total} run(s) left in 2 experiment file(s); " \
        "estimated time " in err
    # as a real run records them: short complete with every run, long interrupted after
    # 2 of its runs; what is left is long's other runs
    for scenario in ("short", "long"):
        meta_path = out / "tiny_sizes" / scenario / "meta.json"
        (spec,) = engine.select_scenarios(load_specs(EXPERIMENTS / "tiny_sizes.yaml"),
                                          [scenario])
        runs = [{"scheme": sc.name, "seed": seed, "load": float(load)}
                for sc in spec.schemes for seed in spec.seeds for load in spec.loads]
        meta = read_json(meta_path)
        if scenario == "long":
            meta, runs = {**meta, "status": "interrupted"}, runs[:2]
        meta_path.write_text(json.dumps({**meta, "runs": runs}))
    code, _, err = _main(["reproduce", "p900", "--resume", str(out), "--quiet"], capsys)
    assert code == cli.EXIT_OK, err
    left = _runs(EXPERIMENTS / "tiny_sizes.yaml", ["long"]) - 2
    assert f"dcnlab reproduce p900: {left} run(s) left in 1 experiment file(s)" in err
