"""The base model and field types of every wire model (shared/wire.py and the modules it gathers)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.ids import ID_PATTERN, PAYLOAD_PATH_PATTERN, SHA256_PATTERN

Id = Annotated[str, Field(pattern=ID_PATTERN)]  # each field says who issues it
RequestId = Annotated[str, Field(pattern=ID_PATTERN, description=(
    "client-generated id of this request; a retry with the same id gets the first reply and changes nothing"))]
PayloadPath = Annotated[str, Field(pattern=PAYLOAD_PATH_PATTERN, description="path relative to the store root")]
Sha256 = Annotated[str, Field(pattern=SHA256_PATTERN, description="lower-case hex sha256 of the file")]
Count = Annotated[int, Field(ge=0, le=2**53)]
# Returns are bounded so means and std-devs over them stay finite (1e308 + 1e308 would be inf).
Return = Annotated[float, Field(ge=-1e12, le=1e12, description="undiscounted episode return")]
WorkerKind = Literal["collector", "learner", "evaluator"]
FlatIndex = Annotated[int, Field(ge=0, le=2**31 - 1)]
EntryId = Annotated[int, Field(ge=0, le=2**62, description="unique id of a buffer item (never reused)")]
RunState = Literal["running", "solved", "budget_exhausted", "stopped", "failed"]


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)
