"""The `decision.score` executor: score a candidate against a job and decide advance or reject.

Owns the scoring rule (weighted skill overlap plus experience ratio, compared to a
threshold). Must not call providers or read anything beyond its inputs.

Inputs: `candidate` and `job` (rows or step results; names configurable with `candidateInput`
and `jobInput`), or one input holding both, such as a `rag.merge` result of those sources.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._results import step_result, unwrap_result

SCORE_DIGITS = 4


class ScoreConfig(StepConfig):
    threshold: float = Field(default=0.6, ge=0.0, le=1.0)
    skills_weight: float = Field(default=0.7, ge=0.0)
    years_weight: float = Field(default=0.3, ge=0.0)
    candidate_input: str = "candidate"
    job_input: str = "job"


class DecisionScoreExecutor:
    """`data`: `score` in [0, 1], `decision` ("advance" | "reject") and human-readable `reasons`."""

    step_key = "decision.score"
    config_model = ScoreConfig
    description = "Score a candidate against a job (skills, experience) and decide advance or reject."

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(ScoreConfig, invocation)
        candidate, job = _candidate_and_job(invocation, config.candidate_input, config.job_input)
        skills = _skill_set(candidate.get("skills"))
        required = _skill_set(job.get("requiredSkills"))
        matched, missing = sorted(skills & required), sorted(required - skills)
        skill_ratio = len(matched) / len(required) if required else 1.0
        years, min_years = _number(candidate.get("yearsExperience")), _number(job.get("minYears"))
        years_ratio = min(years / min_years, 1.0) if min_years > 0 else 1.0
        total_weight = config.skills_weight + config.years_weight
        if total_weight <= 0:
            raise StepFailure("decision.score needs a positive skillsWeight + yearsWeight", code="permanent")
        score = round(
            (config.skills_weight * skill_ratio + config.years_weight * years_ratio) / total_weight,
            SCORE_DIGITS,
        )
        decision = "advance" if score >= config.threshold else "reject"
        comparison = ">=" if decision == "advance" else "<"
        reasons = [
            f"matched skills: {', '.join(matched) or 'none'}",
            f"missing skills: {', '.join(missing) or 'none'}",
            f"experience: {years:g} years against {min_years:g} required",
            f"score {score:.{SCORE_DIGITS}f} {comparison} threshold {config.threshold:g}",
        ]
        return step_result(
            {"score": score, "decision": decision, "reasons": reasons, "threshold": config.threshold}
        )


def _candidate_and_job(
    invocation: StepInvocation, candidate_name: str, job_name: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    inputs = {name: unwrap_result(value) for name, value in invocation.inputs.items()}
    if candidate_name not in inputs or job_name not in inputs:
        for name in sorted(inputs):
            value = inputs[name]
            if isinstance(value, dict) and candidate_name in value and job_name in value:
                inputs = {
                    candidate_name: unwrap_result(value[candidate_name]),
                    job_name: unwrap_result(value[job_name]),
                }
                break
    candidate, job = inputs.get(candidate_name), inputs.get(job_name)
    if not isinstance(candidate, dict) or not isinstance(job, dict):
        raise StepFailure(
            f"decision step {invocation.step_name!r} needs {candidate_name!r} and {job_name!r} objects "
            "in its inputs",
            code="permanent",
        )
    return candidate, job


def _skill_set(value: Any) -> set[str]:
    if not isinstance(value, list):
        return set()
    return {str(skill).strip().lower() for skill in value if str(skill).strip()}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
