from persona.v1 import usage_pb2

from persona_service.chat.records import UsageRow
from persona_service.chat.usage import UsageService
from persona_service.kernel.api import RequestContext, ServicerDeps, iso


def usage_bucket(row: UsageRow) -> usage_pb2.UsageBucket:
    return usage_pb2.UsageBucket(key=row.key, input_tokens=row.input_tokens, output_tokens=row.output_tokens,
                                 cost_usd_micros=row.cost_usd_micros, generations=row.generations,
                                 unpriced_generations=row.unpriced_generations)


class UsageServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def GetUsage(self, request: usage_pb2.GetUsageRequest, ctx: RequestContext) -> usage_pb2.Usage:
        report = UsageService(ctx.work).usage(ctx.caller, request.start, request.end, request.group_by,
                                              request.persona_id, request.key_id)
        return usage_pb2.Usage(start=iso(report.start), end=iso(report.end), group_by=report.group_by,
                               buckets=[usage_bucket(row) for row in report.buckets], totals=usage_bucket(report.totals))
