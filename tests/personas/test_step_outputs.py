"""The pipeline's typed step outputs (issue 47): each record writes back exactly the JSON its step rows and a
durable run's checkpoints have always stored, so rows and checkpoints saved before the records still load and
a reused step's row is the same."""

import json
from dataclasses import fields

import pytest
from persona_service.personas.step_records import (
    STEPS,
    Audit,
    Fingerprint,
    IntentCheck,
    Soul,
    StepDone,
    StepOutputs,
    Voice,
    decode,
    encode,
)

# The shapes stored before the records (generation_steps.output, a checkpoint's `output`), key order included.
STORED = {
    "moderate_intent": {"flagged": False},
    "draft_soul": {"name": "Ada", "desire": "To map every ferry route twice", "fear": "", "backstory": "",
                   "traits": ["calm"], "values": [], "speaking_style": ""},
    "write_voice": {"system_prompt": "You are Ada.", "greeting": "Ahoy",
                    "sample_dialogues": [{"user": "Hi", "persona": "Ahoy there"}], "style_notes": "brief"},
    "audit": {"score": 0.82, "notes": "consistent"},
    "fingerprint": {"vector": [0.125, -0.5, 1.0], "model": "local-embedding"},
}


@pytest.mark.parametrize("step", STEPS)
def test_stored_json_round_trips_byte_for_byte(step):
    assert json.dumps(encode(decode(step, STORED[step]))) == json.dumps(STORED[step])


def test_an_imported_personas_audit_has_no_score():
    assert Audit.from_json({"score": None, "notes": "imported"}) == Audit(None, "imported")
    assert encode(Audit(None, "imported")) == {"score": None, "notes": "imported"}


def test_outputs_from_step_rows_are_records():
    outputs = StepOutputs.from_json({**STORED, "write_voice": None, "unknown": {"x": 1}})
    assert outputs.moderate_intent == IntentCheck(flagged=False)
    assert outputs.write_voice is None  # (None: absent)
    assert outputs.audit == Audit(0.82, "consistent")
    assert outputs.fingerprint == Fingerprint([0.125, -0.5, 1.0], "local-embedding")
    assert outputs.draft_soul == Soul("Ada", "To map every ferry route twice", traits=("calm",))


def test_the_fields_are_the_steps_in_order_and_a_step_takes_only_its_record():
    assert tuple(f.name for f in fields(StepOutputs)) == STEPS
    with pytest.raises(TypeError):
        StepOutputs().with_output("audit", Voice("You are Ada."))
    with pytest.raises(KeyError):
        StepOutputs().with_output("polish", IntentCheck())


def test_a_checkpoint_saved_before_the_records_loads():
    saved = {"output": STORED["audit"], "duration_ms": 12, "attempts": 2}  # a durable run's `step.audit`
    done = StepDone.from_json("audit", saved)
    assert done == StepDone(Audit(0.82, "consistent"), 12, 2)
    assert json.dumps(done.to_json()) == json.dumps(saved)
