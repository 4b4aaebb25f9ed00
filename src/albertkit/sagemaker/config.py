"""SageMakerConfig: everything a SageMaker training job needs (owned by the SageMaker issue)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SageMakerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    role_arn: str | None = None
    instance_type: str = "ml.p4d.24xlarge"
    instance_count: int = 1
