"""Paper files (``benchmarks/papers/p00N.yaml``): a paper's claims, its setting and where
dcnlab's setting differs from it, as data -- numbers and references, never a verdict.

Loading a paper file checks everything a reproduction will rely on before anything runs:
each field's type and value (through the experiment files' own schema code, so errors
read the same: the field's path first, an unknown field's closest known name), and each
reference -- the experiment files exist and load, the scenarios are theirs, schemes and
baselines are schemes of that experiment (scenario), the sweep values of a ``condition``
are the experiment's, and the metric is one the named table produces for the named class
(tables.py).  An error names the file, the claim (index and id) and the field:
``p002.yaml: claims[3] (queue-mean).metric: table network has no metric 'qout'...``.

The papers are the ``p<NNN>.yaml`` files of ``benchmarks/papers/`` (registry.py): the
``dcnlab reproduce`` command offers exactly those.  docs/reproductions.md documents
every field; a test holds that page to the dataclasses below.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import schema
from ..schema import SpecFileError, from_mapping, join
from ..spec import ExperimentSpec, load_specs
from . import registry, tables
from .errors import PaperError
from .registry import BENCHMARKS, PAPER_ID, paper_ids

__all__ = ["BENCHMARKS", "PAPER_ID", "paper_ids"]  # the registry's, for callers of papers

CLAIM_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

RATIO, DIFFERENCE = "ratio", "difference"
LOWER, HIGHER = "lower", "higher"
PER_SEED, PER_FLOW = "seed", "flow"
STATUSES = ("listed", "fixed", "measured")
# Words of a verdict: a claim says what the paper says, never how it fared here.
VERDICT_WORDS = re.compile(r"\b(reproduced|reproduces|inconclusive|verdict)\b", re.I)
# The YAML name of a field whose Python name cannot be it (``class`` is a keyword).
YAML_NAMES = {"cls": "class"}


@dataclass(frozen=True)
class Setting:
    """The paper's own setting, as the paper states it."""

    platform: str  # simulator or testbed, e.g. "ns-3.18 simulation"
    rates: str  # link rates and delays
    run_length: str
    repetitions: str = "not stated"


@dataclass(frozen=True)
class ExperimentRef:
    """An experiment file of benchmarks/experiments/ that ``dcnlab reproduce`` runs."""

    file: str
    scenarios: list[str] | None = None  # None: every scenario of the file
    # the seeds the reproduction runs, in place of the file's (every scenario it runs);
    # None: the file's.  The experiment file stays quick for dcnlab run; the paper file
    # says what deciding its claims took.
    seeds: list[int] | None = None


@dataclass(frozen=True)
class Claim:
    """One headline or figure claim and the comparison that measures it."""

    id: str
    says: str
    source: str
    experiment: str
    table: str = schema.field(choices=tuple(tables.TABLES))
    metric: str = schema.field()
    scheme: str = schema.field()
    # None (null): the paper states the direction only; the verdict is then at most
    # "direction" (verdict.py)
    paper_value: float | None = schema.field()
    direction: str = schema.field(choices=(LOWER, HIGHER))
    scenario: str | None = None
    cls: str = schema.field(tables.ALL, choices=tables.CLASSES)
    # None until loaded: the experiment's baseline
    baseline: str | None = None
    # None until loaded: every sweep value of the experiment; then {sweep name: [values]}
    condition: dict[str, Any] | None = None
    compare: str = schema.field(RATIO, choices=(RATIO, DIFFERENCE))
    per: str = schema.field(PER_SEED, choices=(PER_SEED, PER_FLOW))
    paper_setting: str | None = None
    # the baseline's values come from this scenario of the same experiment file (the
    # paper compares two workloads, 10 and 20 short flows say); None: the claim's own
    baseline_scenario: str | None = None

    @property
    def baseline_where(self) -> str | None:
        """The scenario the baseline's values come from."""
        return self.baseline_scenario or self.scenario

    @property
    def sweep(self) -> str:
        """The sweep's name (``senders``, ``load``, ...), once loaded."""
        return next(iter(self.condition or {"load": []}))

    @property
    def values(self) -> list[float]:
        """The sweep values this claim is judged at, once loaded (one verdict each)."""
        return list(next(iter((self.condition or {"load": []}).values())))


@dataclass(frozen=True)
class Deviation:
    """Where dcnlab's setting differs from the paper's, and why."""

    what: str
    paper: str
    here: str
    reason: str
    status: str = schema.field("listed", choices=STATUSES)
    measured: str | None = None  # status measured: what was measured


@dataclass(frozen=True)
class Unmeasured:
    """A claim of the paper that dcnlab does not judge, and why (no number, no baseline,
    a condition not run...): listed so that the document accounts for every claim."""

    id: str
    says: str
    source: str
    why: str


@dataclass(frozen=True)
class Paper:
    paper: str
    title: str
    setting: Setting
    experiments: list[ExperimentRef]
    claims: list[Claim]
    unmeasured: list[Unmeasured] = schema.field([])
    deviations: list[Deviation] = schema.field([])
    # not in the file: the specs of every experiment (scenario) the paper runs, by
    # (file, scenario or None), in the order they run
    specs: dict[tuple[str, str | None], ExperimentSpec] = field(
        default_factory=dict, init=False, compare=False, repr=False)

    def spec(self, claim: Claim) -> ExperimentSpec:
        return self.specs[(claim.experiment, claim.scenario)]

    def scenarios(self, file: str) -> list[str | None]:
        """The scenarios of experiment ``file`` the paper runs ([None]: it has none)."""
        return [scenario for (f, scenario) in self.specs if f == file]


# ---------------------------------------------------------------------------- by id


def paper_path(paper_id: str, directory: Path | None = None) -> Path:
    base = registry.PAPERS_DIR if directory is None else directory
    if paper_id not in paper_ids(base):
        known = ", ".join(paper_ids(base)) or "none"
        raise PaperError(base, "", f"no paper {paper_id!r} (papers: {known})")
    return base / f"{paper_id}.yaml"


def load(paper_id: str, directory: Path | None = None,
         experiments: Path | None = None) -> Paper:
    """The validated paper ``paper_id`` of the papers directory."""
    return load_file(paper_path(paper_id, directory), experiments)


# ---------------------------------------------------------------------------- loading


def load_file(path: Path, experiments: Path | None = None) -> Paper:
    """Read and validate a paper file; ``experiments``: where its experiment files are
    (benchmarks/experiments/).  Raises PaperError naming the file, claim and field."""
    try:
        data = schema.read_yaml(path)
    except ValueError as exc:
        raise PaperError(path, "", str(exc)) from None
    return parse(data, path, registry.EXPERIMENTS_DIR if experiments is None else experiments)


def _yaml_names(text: str) -> str:
    for name, yaml_name in YAML_NAMES.items():
        text = re.sub(rf"\b{name}\b", yaml_name, text)
    return text


def _mapped(cls: type, data: Any, where: str) -> Any:
    """from_mapping with the YAML names of fields (``class`` for ``cls``)."""
    if isinstance(data, dict):
        for name, yaml_name in YAML_NAMES.items():
            if name in data:  # the Python name is no name in the file
                raise SpecFileError(join(where, name), f"unknown field (did you mean "
                                    f"{yaml_name!r}?)")
            if yaml_name in data:
                data = {(name if k == yaml_name else k): v for k, v in data.items()}
    try:
        return from_mapping(cls, data, where)
    except SpecFileError as exc:
        raise SpecFileError(_yaml_names(exc.field),
                            _yaml_names(str(exc).removeprefix(f"{exc.field}: "))) from None


def parse(data: Any, path: Path, experiments: Path) -> Paper:
    """Validate a paper mapping (as read from ``path``)."""
    if not isinstance(data, dict):
        raise PaperError(path, "", "a paper file is a YAML mapping of fields")
    claims_raw = data.get("claims")
    try:
        # claims and experiments are checked below, each with the experiment files
        top = _mapped(Paper, {**data, "claims": [], "experiments": []}, "")
        refs = _experiments(data.get("experiments"))
    except SpecFileError as exc:
        raise PaperError(path, exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None
    if top.paper != path.stem:
        raise PaperError(path, "paper", f"{top.paper!r} is not the file's name "
                         f"({path.stem}): a paper's id is its file's name")
    specs = _load_experiments(refs, path, experiments)
    if claims_raw is None:
        raise PaperError(path, "claims", "required field is missing")
    if not isinstance(claims_raw, list) or not claims_raw:
        raise PaperError(path, "claims", "needs a list of at least one claim")
    claims: list[Claim] = []
    for i, item in enumerate(claims_raw):
        claim_id = item.get("id") if isinstance(item, dict) else None
        label = f"claims[{i}]" + (f" ({claim_id})" if claim_id else "")
        try:
            claim = _mapped(Claim, item, label)
            claims.append(_resolve(claim, label, refs, specs, claims))
        except SpecFileError as exc:
            raise PaperError(path, exc.field, str(exc).removeprefix(f"{exc.field}: ")) \
                from None
    for i, other in enumerate(top.unmeasured):
        where = join(join("unmeasured", i), "id")
        if not CLAIM_ID.fullmatch(other.id):
            raise PaperError(path, where, f"{other.id!r}: lower-case letters, digits and "
                             "single '-' between them")
        if other.id in [c.id for c in claims] + [u.id for u in top.unmeasured[:i]]:
            raise PaperError(path, where, f"{other.id!r} is used twice (claims and "
                             "unmeasured claims share their ids)")
    for i, deviation in enumerate(top.deviations):
        where = join("deviations", i)
        if deviation.status == "measured" and not deviation.measured:
            raise PaperError(path, join(where, "measured"), "status measured needs what "
                             "was measured (numbers)")
        if deviation.status != "measured" and deviation.measured:
            raise PaperError(path, join(where, "status"), "a deviation with a measured "
                             "value has status measured")
    paper = replace(top, experiments=refs, claims=claims)
    paper.specs.update(specs)
    return paper


def _experiments(value: Any) -> list[ExperimentRef]:
    if value is None:
        raise SpecFileError("experiments", "required field is missing")
    if not isinstance(value, list) or not value:
        raise SpecFileError("experiments", "needs a list of at least one experiment file "
                            "({file: NAME.yaml})")
    refs = []
    for i, item in enumerate(value):
        where = join("experiments", i)
        ref = from_mapping(ExperimentRef, {"file": item} if isinstance(item, str) else item,
                           where)
        if ref.file in (r.file for r in refs):
            raise SpecFileError(join(where, "file"), f"{ref.file} is listed twice; list it "
                                "once with every scenario it needs")
        if ref.seeds is not None and (not ref.seeds or len(set(ref.seeds)) != len(ref.seeds)):
            raise SpecFileError(join(where, "seeds"), "needs at least one seed, each once")
        refs.append(ref)
    return refs


def _load_experiments(refs: list[ExperimentRef], path: Path, experiments: Path
                      ) -> dict[tuple[str, str | None], ExperimentSpec]:
    """Every listed experiment file, loaded and checked as ``dcnlab run`` checks it:
    {(file, scenario or None): spec} of the scenarios the paper runs."""
    out = {}
    for i, ref in enumerate(refs):
        where = join("experiments", i)
        source = experiments / ref.file
        if Path(ref.file).name != ref.file or not source.is_file():
            known = ", ".join(sorted(p.name for p in experiments.glob("*.yaml")))
            raise PaperError(path, join(where, "file"), f"no experiment file {ref.file!r} "
                             f"in {experiments} (there are: {known})")
        try:
            specs = load_specs(source)
        except SpecFileError as exc:
            raise PaperError(path, join(where, "file"), f"{ref.file}: {exc}") from None
        names = [s.scenario for s in specs if s.scenario]
        if ref.scenarios is not None:
            if not names:
                raise PaperError(path, join(where, "scenarios"), f"{ref.file} has no "
                                 "scenarios")
            for j, name in enumerate(ref.scenarios):
                if name not in names:
                    raise PaperError(path, join(join(where, "scenarios"), j),
                                     f"{ref.file} has no scenario {name!r} (it has: "
                                     f"{', '.join(names)})")
        for spec in specs:
            if ref.scenarios is None or spec.scenario in ref.scenarios:
                out[(ref.file, spec.scenario)] = spec
    return out


def _resolve(claim: Claim, where: str, refs: list[ExperimentRef],
             specs: dict[tuple[str, str | None], ExperimentSpec],
             earlier: list[Claim]) -> Claim:
    """The claim checked against its experiment, with its baseline and condition filled
    in; raises SpecFileError naming the field."""
    if not CLAIM_ID.fullmatch(claim.id):
        raise SpecFileError(join(where, "id"), f"{claim.id!r}: lower-case letters, digits "
                            "and single '-' between them")
    if claim.id in (c.id for c in earlier):
        raise SpecFileError(join(where, "id"), f"{claim.id!r} is used twice")
    for name in ("says", "paper_setting"):
        text = getattr(claim, name) or ""
        found = VERDICT_WORDS.search(text)
        if found:
            raise SpecFileError(join(where, name), f"{found.group(0)!r}: a claim says what "
                                "the paper says; verdicts are computed, never written")
    files = [r.file for r in refs]
    if claim.experiment not in files:
        raise SpecFileError(join(where, "experiment"), f"{claim.experiment!r} is not among "
                            f"the paper's experiments ({', '.join(files)})")
    scenarios = [s for (f, s) in specs if f == claim.experiment and s]
    if claim.scenario is None and scenarios:
        raise SpecFileError(join(where, "scenario"), f"{claim.experiment} has scenarios: "
                            f"name one ({', '.join(scenarios)})")
    if claim.scenario is not None and claim.scenario not in scenarios:
        raise SpecFileError(join(where, "scenario"), f"{claim.scenario!r} is not a scenario "
                            f"the paper runs of {claim.experiment} "
                            f"({', '.join(scenarios) or 'it has none'})")
    spec = specs[(claim.experiment, claim.scenario)]
    other = _baseline_spec(claim, where, specs, scenarios)
    baseline = other.baseline if claim.baseline is None else claim.baseline
    for key, name, of in (("scheme", claim.scheme, spec), ("baseline", baseline, other)):
        names = [s.name for s in of.schemes]
        if name not in names:
            label = _label(claim) if of is spec else (f"{claim.experiment} scenario "
                                                      f"{claim.baseline_scenario}")
            raise SpecFileError(join(where, key), f"{name!r} is not a scheme of "
                                f"{label} ({', '.join(names)})")
    if claim.scheme == baseline and other is spec:
        raise SpecFileError(join(where, "baseline"), f"{baseline!r} is the scheme itself")
    fault = tables.check(claim.table, claim.metric, claim.cls, spec)
    if fault is not None:
        raise SpecFileError(join(where, _yaml_names(fault[0])), fault[1])
    paired = claim.table == tables.PAIRED
    if paired != (claim.per == PER_FLOW):
        raise SpecFileError(join(where, "per"), "per-flow intervals are those of the paired "
                            "table: table paired goes with per: flow, and per: flow with "
                            "table paired")
    if paired and claim.compare != RATIO:
        raise SpecFileError(join(where, "compare"), "the paired table holds per-flow "
                            "ratios: compare: ratio")
    _check_value(claim, where)
    condition = _condition(claim, spec, where)
    if other is not spec:
        missing = [v for v in next(iter(condition.values()))
                   if tables.value_key(v) not in {tables.value_key(x) for x in other.loads}]
        if other.sweep != spec.sweep or missing:
            raise SpecFileError(join(where, "baseline_scenario"), f"{claim.baseline_scenario} "
                                f"does not run {spec.sweep} = "
                                f"{', '.join(tables.value_text(v) for v in missing)}: the "
                                "baseline is compared at the claim's sweep values")
    return replace(claim, baseline=baseline, condition=condition)


def _baseline_spec(claim: Claim, where: str,
                   specs: dict[tuple[str, str | None], ExperimentSpec],
                   scenarios: list[str | None]) -> ExperimentSpec:
    """The spec the baseline's values come from: the claim's own, or its
    ``baseline_scenario``'s (checked: another scenario the paper runs, compared per
    seed; flows of two workloads cannot be paired one by one)."""
    if claim.baseline_scenario is None:
        return specs[(claim.experiment, claim.scenario)]
    here = join(where, "baseline_scenario")
    if claim.baseline_scenario == claim.scenario:
        raise SpecFileError(here, f"{claim.baseline_scenario!r} is the claim's own "
                            "scenario: leave baseline_scenario out")
    if claim.baseline_scenario not in scenarios:
        raise SpecFileError(here, f"{claim.baseline_scenario!r} is not a scenario the paper "
                            f"runs of {claim.experiment} "
                            f"({', '.join(s for s in scenarios if s) or 'it has none'})")
    if claim.per != PER_SEED:
        raise SpecFileError(join(where, "per"), "a baseline from another scenario is "
                            "compared per seed (per-flow pairs need the same flows)")
    return specs[(claim.experiment, claim.baseline_scenario)]


def _label(claim: Claim) -> str:
    return claim.experiment + (f" scenario {claim.scenario}" if claim.scenario else "")


def _check_value(claim: Claim, where: str) -> None:
    """The paper's value, if it states one, must lie on the side of no change its
    direction says."""
    p = claim.paper_value
    if p is None:
        return
    if not math.isfinite(p):
        raise SpecFileError(join(where, "paper_value"), "must be a finite number")
    if claim.compare == RATIO and p <= 0:
        raise SpecFileError(join(where, "paper_value"), f"a ratio is positive, got {p:g}")
    no_change = 1.0 if claim.compare == RATIO else 0.0
    if (p < no_change) != (claim.direction == LOWER) or p == no_change:
        side = "below" if claim.direction == LOWER else "above"
        raise SpecFileError(join(where, "paper_value"), f"{p:g} is not {side} {no_change:g} "
                            f"(no change for a {claim.compare}), as direction "
                            f"{claim.direction} says")


def _condition(claim: Claim, spec: ExperimentSpec, where: str) -> dict[str, list[float]]:
    """{sweep name: [values]}: the condition's values, checked against the experiment's
    sweep values, or all of them.  The key may be the sweep's name or ``load`` (the
    column every results file calls it)."""
    sweep = spec.sweep
    if claim.condition is None:
        return {sweep: list(spec.loads)}
    cond = join(where, "condition")
    if len(claim.condition) != 1:
        raise SpecFileError(cond, f"one key, the sweep ({sweep}), with a value or a list")
    key, value = next(iter(claim.condition.items()))
    if key not in (sweep, "load"):
        raise SpecFileError(join(cond, key), f"{_label(claim)} sweeps {sweep}, not {key}")
    values = value if isinstance(value, list) else [value]
    out: list[float] = []
    for i, v in enumerate(values):
        here = join(join(cond, key), i) if isinstance(value, list) else join(cond, key)
        number = schema.convert(v, float, here)
        match = [x for x in spec.loads if tables.value_key(x) == tables.value_key(number)]
        if not match:
            raise SpecFileError(here, f"{tables.value_text(number)} is not a sweep value of "
                                f"{_label(claim)} "
                                f"({', '.join(tables.value_text(x) for x in spec.loads)})")
        if match[0] in out:
            raise SpecFileError(here, f"{tables.value_text(number)} appears twice")
        out.append(match[0])
    if not out:
        raise SpecFileError(join(cond, key), "needs at least one value")
    return {sweep: out}


def field_names(cls: type) -> list[str]:
    """A section's field names as a paper file writes them (``class``, not ``cls``)."""
    return [YAML_NAMES.get(f.name, f.name) for f in dataclasses.fields(cls) if f.init]
