"""The API's schemas as TypedDicts (JSON member names, every member optional),
and the events of the streams: `from persona_sdk.types import Persona`."""

from ._generated import *  # noqa: F403
from ._streaming import ChatMessageEvent as ChatMessageEvent
from ._streaming import PipelineEvent as PipelineEvent
