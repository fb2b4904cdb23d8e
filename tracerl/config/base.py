"""What every params section model shares: the `Section` base (unknown keys forbidden, no
silent coercion, frozen), the common number types and the "did you mean" hint."""

from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def did_you_mean(name: str, choices: Any) -> str:
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
