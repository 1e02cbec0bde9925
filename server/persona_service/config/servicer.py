import json

from google.protobuf import json_format, struct_pb2
from persona.v1 import config_pb2

from persona_service.config.service import RATE_LIMIT_PREFIX, ConfigService, Effective
from persona_service.kernel.api import RequestContext, ServicerDeps, load, nullable_time, page_limit


def config_item(item: Effective) -> config_pb2.ConfigItem:
    # Parsed from its JSON text: ParseDict reads a Value from any JSON value, but its stub admits only a dict.
    value = json_format.Parse(json.dumps(item.value), struct_pb2.Value())
    return config_pb2.ConfigItem(
        key=item.spec.key, value=value, source=item.source, settable_at=list(item.spec.levels), type=item.spec.type,
        allowed_values=list(item.spec.allowed), updated_at=nullable_time(item.updated_at),
    )


class ConfigServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.override_ceiling = load().limit_override_ceiling

    def ListConfigItems(self, request: config_pb2.ListConfigItemsRequest,
                        ctx: RequestContext) -> config_pb2.ListConfigItemsResponse:
        items, cursor = ConfigService(ctx.work, self.deps.cursors).page(
            ctx.caller, request.prefix, page_limit(request), request.cursor)
        return config_pb2.ListConfigItemsResponse(items=[config_item(i) for i in items], next_cursor=cursor)

    def GetConfigItem(self, request: config_pb2.GetConfigItemRequest,
                      ctx: RequestContext) -> config_pb2.ConfigItem:
        return config_item(ConfigService(ctx.work).get(ctx.caller, request.key, request.persona_id))

    def UpdateConfigItem(self, request: config_pb2.UpdateConfigItemRequest,
                         ctx: RequestContext) -> config_pb2.ConfigItem:
        value = json_format.MessageToDict(request.value)
        item = ConfigService(ctx.work).update(ctx.caller, request.key, value, request.level, request.persona_id,
                                              override_ceiling=self.override_ceiling)
        self._invalidate_limits(ctx, request.key)
        return config_item(item)

    def DeleteConfigItem(self, request: config_pb2.DeleteConfigItemRequest,
                         ctx: RequestContext) -> config_pb2.ConfigItem:
        item = ConfigService(ctx.work).delete(ctx.caller, request.key, request.level, request.persona_id)
        self._invalidate_limits(ctx, request.key)
        return config_item(item)

    def _invalidate_limits(self, ctx: RequestContext, key: str) -> None:
        if key.startswith(RATE_LIMIT_PREFIX):
            org_id = ctx.caller.org_id
            ctx.after_commit.append(lambda: self.deps.invalidate(f"limits:{org_id}"))
