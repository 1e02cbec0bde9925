import json
from collections.abc import Generator

from google.protobuf import json_format, struct_pb2
from persona.v1 import personas_pb2

from persona_service.kernel.api import (
    ApiError,
    RequestContext,
    ServicerDeps,
    drain,
    error_message,
    message_json,
    nullable_time,
    page_limit,
    struct,
    timestamp,
)
from persona_service.personas.cards import persona_to_card
from persona_service.personas.records import (
    GenerationPreview,
    PersonaEdit,
    PersonaFilters,
    PersonaRecord,
    PipelineProgress,
    VersionRecord,
    VoiceRecord,
)
from persona_service.personas.service import AuditBlocked, PersonaService
from persona_service.personas.step_records import Soul
from persona_service.providers.pricing import PriceTable


def soul_message(soul: Soul) -> personas_pb2.Soul:
    return personas_pb2.Soul(name=soul.name, desire=soul.desire, fear=soul.fear, backstory=soul.backstory,
                             traits=soul.traits, values=soul.values, speaking_style=soul.speaking_style)


def persona(row: PersonaRecord) -> personas_pb2.Persona:
    message = personas_pb2.Persona(
        id=row.id, org_id=row.org_id, workspace_id=row.workspace_id, slug=row.slug,
        display_name=row.display_name, visibility=row.visibility, metadata=struct(row.metadata),
        intent=row.intent, soul=soul_message(row.soul), state=row.state, version=row.version,
        parent_id=row.parent_id or "", root_id=row.root_id, fork_ordinal=row.fork_ordinal,
        flagged_reason=row.flagged_reason, last_run_id=row.last_run_id, created_at=timestamp(row.created_at),
        updated_at=timestamp(row.updated_at), deleted_at=nullable_time(row.deleted_at),
        purge_at=nullable_time(row.purge_at), archived_at=nullable_time(row.archived_at),
    )
    if row.audit_score is not None:
        message.audit_score = row.audit_score
    return message


def persona_json(row: PersonaRecord) -> dict[str, object]:
    return message_json(persona(row))


def pipeline_event(progress: PipelineProgress) -> personas_pb2.PipelineEvent:
    return personas_pb2.PipelineEvent(event=progress.event, run_id=progress.run_id, step=progress.step,
                                      duration_ms=progress.duration_ms)


def voice_profile(voice: VoiceRecord) -> personas_pb2.VoiceProfile:
    return personas_pb2.VoiceProfile(
        persona_id=voice.persona_id, version=voice.version, system_prompt=voice.system_prompt,
        greeting=voice.greeting, sample_dialogues=[personas_pb2.SampleDialogue(user=d.user, persona=d.persona) for d in voice.sample_dialogues],
        style_notes=voice.style_notes, fingerprint_model=voice.fingerprint_model,
        fingerprint_dimensions=len(voice.fingerprint),
    )


def persona_version(version: VersionRecord, voice: VoiceRecord) -> personas_pb2.PersonaVersion:
    return personas_pb2.PersonaVersion(
        persona_id=version.persona_id, version=version.version, kind=version.kind, note=version.note,
        instruction=version.instruction, source_version=version.source_version or 0, run_id=version.run_id,
        soul=soul_message(version.soul), voice=voice_profile(voice), created_at=timestamp(version.created_at),
    )


def generation_preview(preview: GenerationPreview) -> personas_pb2.GenerationPreview:
    remaining = max(0, preview.quota_limit - preview.quota_used)
    return personas_pb2.GenerationPreview(
        model=preview.model, estimated_input_tokens=preview.input_tokens,
        estimated_output_tokens=preview.output_tokens, estimated_cost_usd_micros=preview.cost_usd_micros,
        unpriced=preview.unpriced, steps=[personas_pb2.StepEstimate(step=s.step, input_tokens=s.input_tokens, output_tokens=s.output_tokens)
               for s in preview.steps],
        quota=personas_pb2.GenerationQuotaPreview(
            name="generations_per_month", limit=preview.quota_limit, used=preview.quota_used, would_use=1,
            remaining=remaining, would_exceed=remaining < 1, resets_at=timestamp(preview.resets_at),
        ),
    )


def _value(value: object) -> struct_pb2.Value:
    # Parsed from its JSON text: ParseDict reads a Value from any JSON value, but its stub admits only a dict.
    return json_format.Parse(json.dumps(value), struct_pb2.Value())


def _soul(message: personas_pb2.CreatePersonaRequest) -> Soul | None:
    """The caller's soul, partial (proto3: a field not sent is empty; `Soul.given` is what it sent)."""
    if not message.HasField("soul"):
        return None
    soul = message.soul
    return Soul(soul.name, soul.desire, soul.fear, soul.backstory, tuple(soul.traits), tuple(soul.values),
                soul.speaking_style)


def _card(message: personas_pb2.CharacterCard) -> dict[str, object]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


class PersonaServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.prices = PriceTable.from_env()

    def _service(self, ctx: RequestContext) -> PersonaService:
        # A streamed call's generation is the durable run it is (its `X-Run-Id`), saved step by step in it.
        return PersonaService(ctx.work, self.deps.provider_for(ctx), cursors=self.deps.cursors, run=ctx.run)

    def _create(self, ctx: RequestContext,
                request: personas_pb2.CreatePersonaRequest) -> Generator[PipelineProgress, None, PersonaRecord]:
        return self._service(ctx).create(
            ctx.caller, intent=request.intent, slug=request.slug, visibility=request.visibility,
            metadata=json_format.MessageToDict(request.metadata) if request.HasField("metadata") else None,
            display_name=request.display_name, soul=_soul(request),
        )

    def CreatePersona(self, request: personas_pb2.CreatePersonaRequest,
                      ctx: RequestContext) -> personas_pb2.Persona:
        return persona(drain(self._create(ctx, request)))

    def StreamCreatePersona(self, request: personas_pb2.CreatePersonaRequest, ctx: RequestContext
                            ) -> Generator[personas_pb2.PipelineEvent, None, personas_pb2.PipelineEvent]:
        operation = self._create(ctx, request)
        try:
            while True:
                try:
                    progress = next(operation)
                except StopIteration as done:
                    # The result frame: sent once the persona is committed (kernel.transport.pipeline).
                    return personas_pb2.PipelineEvent(event="persona", run_id=done.value.last_run_id,
                                                      persona=persona(done.value))
                yield pipeline_event(progress)
        except ApiError as err:
            # In-band, because an HTTP/1.1 stream cannot change its status any more.
            yield personas_pb2.PipelineEvent(event="error", error=error_message(err))
            raise

    def GetPersona(self, request: personas_pb2.GetPersonaRequest,
                   ctx: RequestContext) -> personas_pb2.Persona:
        return persona(self._service(ctx).get(ctx.caller, request.id))

    def ListPersonas(self, request: personas_pb2.ListPersonasRequest,
                     ctx: RequestContext) -> personas_pb2.ListPersonasResponse:
        filters = PersonaFilters(state=request.state, visibility=request.visibility, root_id=request.root_id,
                                 show_deleted=request.show_deleted)
        rows, cursor = self._service(ctx).list(ctx.caller, filters, page_limit(request), request.cursor,
                                               request.order_by, request.q)
        return personas_pb2.ListPersonasResponse(items=[persona(r) for r in rows], next_cursor=cursor)

    def UpdatePersona(self, request: personas_pb2.UpdatePersonaRequest,
                      ctx: RequestContext) -> personas_pb2.Persona:
        edit = PersonaEdit(
            slug=request.slug if request.HasField("slug") else None,
            display_name=request.display_name if request.HasField("display_name") else None,
            visibility=request.visibility if request.HasField("visibility") else None,
            metadata=json_format.MessageToDict(request.metadata) if request.HasField("metadata") else None)
        return persona(self._service(ctx).update(ctx.caller, request.id, edit))

    def DeletePersona(self, request: personas_pb2.DeletePersonaRequest,
                      ctx: RequestContext) -> personas_pb2.Persona:
        return persona(self._service(ctx).delete(ctx.caller, request.id))

    def RestorePersona(self, request: personas_pb2.RestorePersonaRequest,
                       ctx: RequestContext) -> personas_pb2.Persona:
        return persona(self._service(ctx).restore(ctx.caller, request.id))

    def ArchivePersona(self, request: personas_pb2.ArchivePersonaRequest,
                       ctx: RequestContext) -> personas_pb2.Persona:
        return persona(self._service(ctx).archive(ctx.caller, request.id))

    def RefinePersona(self, request: personas_pb2.RefinePersonaRequest,
                      ctx: RequestContext) -> personas_pb2.Persona:
        return persona(drain(self._service(ctx).refine(ctx.caller, request.id, request.instruction, request.note)))

    def ForkPersona(self, request: personas_pb2.ForkPersonaRequest,
                    ctx: RequestContext) -> personas_pb2.Persona:
        operation = self._service(ctx).fork(
            ctx.caller, request.id, instruction=request.instruction, slug=request.slug, note=request.note
        )
        made = drain(operation)
        ctx.created_id = made.id  # the audit entry names the parent (the request's id): this names the fork
        return persona(made)

    def RegeneratePersona(self, request: personas_pb2.RegeneratePersonaRequest,
                          ctx: RequestContext) -> personas_pb2.Persona:
        return persona(drain(self._service(ctx).regenerate(ctx.caller, request.id, request.from_step)))

    def AuditPersona(self, request: personas_pb2.AuditPersonaRequest,
                     ctx: RequestContext) -> personas_pb2.AuditPersonaResponse:
        try:
            result = self._service(ctx).audit(ctx.caller, request.id)
        except AuditBlocked as err:
            if err.result is not None:
                err.details["persona"] = persona_json(err.result.persona)
            raise
        return personas_pb2.AuditPersonaResponse(
            persona=persona(result.persona), score=result.score, threshold=result.threshold,
            provocation_passed=result.provocation_passed, passed=result.passed, notes=result.notes,
        )

    def GetPersonaLineage(self, request: personas_pb2.GetPersonaLineageRequest,
                          ctx: RequestContext) -> personas_pb2.PersonaLineage:
        lineage = self._service(ctx).lineage(ctx.caller, request.id)

        def node(row: PersonaRecord) -> personas_pb2.LineageNode:
            return personas_pb2.LineageNode(
                persona_id=row.id, slug=row.slug, state=row.state, version=row.version,
                fork_ordinal=row.fork_ordinal, fork_note=row.fork_note,
                versions=[
                    personas_pb2.LineageVersion(
                        version=v.version, kind=v.kind, note=v.note, instruction=v.instruction,
                        created_at=timestamp(v.created_at),
                    )
                    for v in lineage.versions.get(row.id, [])
                ],
                children=[node(child) for child in lineage.children.get(row.id, [])],
            )

        return personas_pb2.PersonaLineage(root=node(lineage.root), size=lineage.size)

    def GetVoiceProfile(self, request: personas_pb2.GetVoiceProfileRequest,
                        ctx: RequestContext) -> personas_pb2.VoiceProfile:
        return voice_profile(self._service(ctx).voice(ctx.caller, request.id))

    def ExportPersonaCard(self, request: personas_pb2.ExportPersonaCardRequest,
                          ctx: RequestContext) -> personas_pb2.CharacterCard:
        service = self._service(ctx)
        row = service.get(ctx.caller, request.id)
        voice = service.voice(ctx.caller, request.id)
        card = persona_to_card(row, voice, service.history(row.id))
        return json_format.ParseDict(card, personas_pb2.CharacterCard())

    def ImportPersonaCard(self, request: personas_pb2.ImportPersonaCardRequest,
                          ctx: RequestContext) -> personas_pb2.Persona:
        return persona(self._service(ctx).import_card(ctx.caller, _card(request.card)))

    def PreviewPersona(self, request: personas_pb2.CreatePersonaRequest,
                       ctx: RequestContext) -> personas_pb2.GenerationPreview:
        quota = self.deps.quota(ctx.caller, "generations_per_month", ctx.work)
        used = self.deps.generations_used(ctx.caller, ctx.work)
        preview = self._service(ctx).preview(request.intent, _soul(request), quota, used, self.prices)
        return generation_preview(preview)

    def ListPersonaVersions(self, request: personas_pb2.ListPersonaVersionsRequest,
                            ctx: RequestContext) -> personas_pb2.ListPersonaVersionsResponse:
        service = self._service(ctx)
        rows, cursor = service.versions(ctx.caller, request.id, page_limit(request), request.cursor)
        current_voice = service.voice(ctx.caller, request.id)
        return personas_pb2.ListPersonaVersionsResponse(
            items=[persona_version(v, v.voice_record(current_voice)) for v in rows], next_cursor=cursor)

    def GetPersonaVersion(self, request: personas_pb2.GetPersonaVersionRequest,
                          ctx: RequestContext) -> personas_pb2.PersonaVersion:
        return persona_version(*self._service(ctx).version(ctx.caller, request.persona_id, request.version))

    def DiffPersonaVersions(self, request: personas_pb2.DiffPersonaVersionsRequest,
                            ctx: RequestContext) -> personas_pb2.PersonaVersionDiff:
        changes = self._service(ctx).diff(ctx.caller, request.id, request.from_version, request.to_version)
        return personas_pb2.PersonaVersionDiff(
            persona_id=request.id, from_version=request.from_version, to_version=request.to_version,
            changes=[personas_pb2.FieldChange(field=c.field, before=_value(c.before), after=_value(c.after))
                     for c in changes],
        )

    def RollbackPersona(self, request: personas_pb2.RollbackPersonaRequest,
                        ctx: RequestContext) -> personas_pb2.Persona:
        return persona(self._service(ctx).rollback(ctx.caller, request.id, request.version, request.note))
