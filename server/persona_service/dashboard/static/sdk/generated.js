// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
import { PersonaError } from "./errors.js";
export const API_VERSION = "0.1.0";
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
export class AssetExpiredError extends PersonaError {
}
export class AuditBlockedError extends PersonaError {
}
export class BadRequestError extends PersonaError {
}
export class DriftBlockedError extends PersonaError {
}
export class ForbiddenError extends PersonaError {
}
export class HeadersTooLargeError extends PersonaError {
}
export class IdempotencyConflictError extends PersonaError {
}
export class InternalError extends PersonaError {
}
export class MethodNotAllowedError extends PersonaError {
}
export class ModerationBlockedError extends PersonaError {
}
export class NotFoundError extends PersonaError {
}
export class NotImplementedError extends PersonaError {
}
export class PayloadTooLargeError extends PersonaError {
}
export class PreconditionFailedError extends PersonaError {
}
export class ProviderError extends PersonaError {
}
export class ProviderTimeoutError extends PersonaError {
}
export class QuotaExceededError extends PersonaError {
}
export class RateLimitedError extends PersonaError {
}
export class RequestTimeoutError extends PersonaError {
}
export class ServiceUnavailableError extends PersonaError {
}
export class StateConflictError extends PersonaError {
}
export class UnauthorizedError extends PersonaError {
}
export class UnsupportedMediaTypeError extends PersonaError {
}
export class UpgradeRequiredError extends PersonaError {
}
export class ValidationFailedError extends PersonaError {
}
export const ERROR_CLASSES = {
    asset_expired: AssetExpiredError,
    audit_blocked: AuditBlockedError,
    bad_request: BadRequestError,
    drift_blocked: DriftBlockedError,
    forbidden: ForbiddenError,
    headers_too_large: HeadersTooLargeError,
    idempotency_conflict: IdempotencyConflictError,
    internal_error: InternalError,
    method_not_allowed: MethodNotAllowedError,
    moderation_blocked: ModerationBlockedError,
    not_found: NotFoundError,
    not_implemented: NotImplementedError,
    payload_too_large: PayloadTooLargeError,
    precondition_failed: PreconditionFailedError,
    provider_error: ProviderError,
    provider_timeout: ProviderTimeoutError,
    quota_exceeded: QuotaExceededError,
    rate_limited: RateLimitedError,
    request_timeout: RequestTimeoutError,
    service_unavailable: ServiceUnavailableError,
    state_conflict: StateConflictError,
    unauthorized: UnauthorizedError,
    unsupported_media_type: UnsupportedMediaTypeError,
    upgrade_required: UpgradeRequiredError,
    validation_failed: ValidationFailedError,
};
export const ERROR_STATUS = {
    asset_expired: 410,
    audit_blocked: 409,
    bad_request: 400,
    drift_blocked: 409,
    forbidden: 403,
    headers_too_large: 431,
    idempotency_conflict: 409,
    internal_error: 500,
    method_not_allowed: 405,
    moderation_blocked: 422,
    not_found: 404,
    not_implemented: 501,
    payload_too_large: 413,
    precondition_failed: 412,
    provider_error: 502,
    provider_timeout: 504,
    quota_exceeded: 429,
    rate_limited: 429,
    request_timeout: 408,
    service_unavailable: 503,
    state_conflict: 409,
    unauthorized: 401,
    unsupported_media_type: 415,
    upgrade_required: 426,
    validation_failed: 422,
};
export class AdminResource {
    core;
    constructor(core) {
        this.core = core;
    }
    buildOneDsarExport(body = {}, options) {
        return this.core.request("POST", "/v1/admin/dsar/build-one", { body, options });
    }
    rotateWebhookSecrets(body = {}, options) {
        return this.core.request("POST", "/v1/admin/webhooks/rotate-secrets", { body, options });
    }
}
export class ApiKeysResource {
    core;
    constructor(core) {
        this.core = core;
    }
    create(body, options) {
        return this.core.request("POST", "/v1/keys", { body, options });
    }
    get(id, options) {
        return this.core.request("GET", "/v1/keys/{id}", { path: { id }, options });
    }
    list(params = {}, options) {
        return this.core.request("GET", "/v1/keys", { query: params, options });
    }
    listIter(params = {}, options) {
        return this.core.paginate((p) => this.list(p, options), params);
    }
    revoke(id, body = {}, options) {
        return this.core.request("POST", "/v1/keys/{id}/revoke", { path: { id }, body, options });
    }
}
export class AuditResource {
    core;
    constructor(core) {
        this.core = core;
    }
    listEvents(params = {}, options) {
        return this.core.request("GET", "/v1/audit/events", { query: params, options });
    }
    listEventsIter(params = {}, options) {
        return this.core.paginate((p) => this.listEvents(p, options), params);
    }
}
export class BillingResource {
    core;
    constructor(core) {
        this.core = core;
    }
    cancelSubscription(body = {}, options) {
        return this.core.request("POST", "/v1/billing/subscription/cancel", { body, options });
    }
    changeSubscription(body, options) {
        return this.core.request("POST", "/v1/billing/subscription/change", { body, options });
    }
    getInvoice(id, options) {
        return this.core.request("GET", "/v1/billing/invoices/{id}", { path: { id }, options });
    }
    getInvoicePdf(id, options) {
        return this.core.raw("GET", "/v1/billing/invoices/{id}/pdf", { path: { id }, options, redirect: "manual" });
    }
    getSubscription(options) {
        return this.core.request("GET", "/v1/billing/subscription", { options });
    }
    listInvoices(params = {}, options) {
        return this.core.request("GET", "/v1/billing/invoices", { query: params, options });
    }
    listInvoicesIter(params = {}, options) {
        return this.core.paginate((p) => this.listInvoices(p, options), params);
    }
    receiveStripeEvent(body, options) {
        return this.core.request("POST", "/v1/billing/stripe/webhook", { body, contentType: "*/*", options, auth: false });
    }
    resumeSubscription(body = {}, options) {
        return this.core.request("POST", "/v1/billing/subscription/resume", { body, options });
    }
}
export class ChatResource {
    core;
    constructor(core) {
        this.core = core;
    }
    archiveSession(id, body = {}, options) {
        return this.core.request("POST", "/v1/chat/sessions/{id}/archive", { path: { id }, body, options });
    }
    chooseMessage(sessionId, id, body, options) {
        return this.core.request("POST", "/v1/chat/sessions/{session_id}/messages/{id}/choose", { path: { "session_id": sessionId, id }, body, options });
    }
    createSession(body, options) {
        return this.core.request("POST", "/v1/chat/sessions", { body, options });
    }
    deleteMessage(sessionId, id, options) {
        return this.core.request("DELETE", "/v1/chat/sessions/{session_id}/messages/{id}", { path: { "session_id": sessionId, id }, options });
    }
    endSession(id, body = {}, options) {
        return this.core.request("POST", "/v1/chat/sessions/{id}/end", { path: { id }, body, options });
    }
    getSession(id, options) {
        return this.core.request("GET", "/v1/chat/sessions/{id}", { path: { id }, options });
    }
    listMessages(id, params = {}, options) {
        return this.core.request("GET", "/v1/chat/sessions/{id}/messages", { path: { id }, query: params, options });
    }
    listMessagesIter(id, params = {}, options) {
        return this.core.paginate((p) => this.listMessages(id, p, options), params);
    }
    listSessions(params = {}, options) {
        return this.core.request("GET", "/v1/chat/sessions", { query: params, options });
    }
    listSessionsIter(params = {}, options) {
        return this.core.paginate((p) => this.listSessions(p, options), params);
    }
    previewMessage(id, body, options) {
        return this.core.request("POST", "/v1/chat/sessions/{id}/messages/preview", { path: { id }, body, options });
    }
    regenerateMessage(sessionId, id, body = {}, options) {
        return this.core.request("POST", "/v1/chat/sessions/{session_id}/messages/{id}/regenerate", { path: { "session_id": sessionId, id }, body, options });
    }
    sendMessage(id, body, options) {
        return this.core.request("POST", "/v1/chat/sessions/{id}/messages", { path: { id }, body, options });
    }
    streamMessage(id, body, options) {
        return this.core.stream("chat", "POST", "/v1/chat/sessions/{id}/messages:stream", { path: { id }, body, options });
    }
    updateMessage(sessionId, id, body, options) {
        return this.core.request("PATCH", "/v1/chat/sessions/{session_id}/messages/{id}", { path: { "session_id": sessionId, id }, body, options });
    }
}
export class ConfigResource {
    core;
    constructor(core) {
        this.core = core;
    }
    delete(key, params = {}, options) {
        return this.core.request("DELETE", "/v1/config/{key}", { path: { key }, query: params, options });
    }
    get(key, params = {}, options) {
        return this.core.request("GET", "/v1/config/{key}", { path: { key }, query: params, options });
    }
    list(params = {}, options) {
        return this.core.request("GET", "/v1/config", { query: params, options });
    }
    listIter(params = {}, options) {
        return this.core.paginate((p) => this.list(p, options), params);
    }
    update(key, body, options) {
        return this.core.request("PUT", "/v1/config/{key}", { path: { key }, body, options });
    }
}
export class DashboardResource {
    core;
    constructor(core) {
        this.core = core;
    }
    getAsset(name, options) {
        return this.core.raw("GET", "/dashboard/assets/{name}", { path: { name }, options, auth: false });
    }
    getPage(options) {
        return this.core.raw("GET", "/dashboard", { options, auth: false });
    }
}
export class DocsResource {
    core;
    constructor(core) {
        this.core = core;
    }
    getApiReference(options) {
        return this.core.raw("GET", "/docs", { options, auth: false });
    }
    getOpenApiDocument(options) {
        return this.core.raw("GET", "/v1/openapi.json", { options, auth: false });
    }
}
export class EventsResource {
    core;
    constructor(core) {
        this.core = core;
    }
    get(id, options) {
        return this.core.request("GET", "/v1/events/{id}", { path: { id }, options });
    }
    list(params = {}, options) {
        return this.core.request("GET", "/v1/events", { query: params, options });
    }
    listIter(params = {}, options) {
        return this.core.paginate((p) => this.list(p, options), params);
    }
}
export class FilesResource {
    core;
    constructor(core) {
        this.core = core;
    }
    get(key, params = {}, options) {
        return this.core.raw("GET", "/v1/files/{key=**}", { path: { key }, query: params, options, auth: false });
    }
}
export class MarketplaceResource {
    core;
    constructor(core) {
        this.core = core;
    }
    createListing(body, options) {
        return this.core.request("POST", "/v1/marketplace/listings", { body, options });
    }
    getListing(id, options) {
        return this.core.request("GET", "/v1/marketplace/listings/{id}", { path: { id }, options });
    }
    listListings(params = {}, options) {
        return this.core.request("GET", "/v1/marketplace/listings", { query: params, options });
    }
    listListingsIter(params = {}, options) {
        return this.core.paginate((p) => this.listListings(p, options), params);
    }
    purchaseListing(id, body = {}, options) {
        return this.core.request("POST", "/v1/marketplace/listings/{id}/purchase", { path: { id }, body, options });
    }
    unpublishListing(id, body = {}, options) {
        return this.core.request("POST", "/v1/marketplace/listings/{id}/unpublish", { path: { id }, body, options });
    }
    updateListing(id, body = {}, options) {
        return this.core.request("PATCH", "/v1/marketplace/listings/{id}", { path: { id }, body, options });
    }
}
export class ModerationResource {
    core;
    constructor(core) {
        this.core = core;
    }
    claimReview(id, body = {}, options) {
        return this.core.request("POST", "/v1/admin/moderation/queue/{id}/claim", { path: { id }, body, options });
    }
    listQueue(params = {}, options) {
        return this.core.request("GET", "/v1/admin/moderation/queue", { query: params, options });
    }
    listQueueIter(params = {}, options) {
        return this.core.paginate((p) => this.listQueue(p, options), params);
    }
    resolveReview(id, body, options) {
        return this.core.request("POST", "/v1/admin/moderation/queue/{id}/resolve", { path: { id }, body, options });
    }
}
export class OpenaiResource {
    core;
    constructor(core) {
        this.core = core;
    }
    createChatCompletion(body, options) {
        return this.core.request("POST", "/v1/chat/completions", { body, options });
    }
    getModel(model, options) {
        return this.core.request("GET", "/v1/models/{model}", { path: { model }, options });
    }
    listModels(options) {
        return this.core.request("GET", "/v1/models", { options });
    }
    streamChatCompletion(body, options) {
        return this.core.stream("completion", "POST", "/v1/chat/completions:stream", { body, options });
    }
}
export class OrganizationsResource {
    core;
    constructor(core) {
        this.core = core;
    }
    get(id, options) {
        return this.core.request("GET", "/v1/orgs/{id}", { path: { id }, options });
    }
}
export class PersonasResource {
    core;
    constructor(core) {
        this.core = core;
    }
    archive(id, body = {}, options) {
        return this.core.request("POST", "/v1/personas/{id}/archive", { path: { id }, body, options });
    }
    audit(id, body = {}, options) {
        return this.core.request("POST", "/v1/personas/{id}/audit", { path: { id }, body, options });
    }
    create(body, options) {
        return this.core.request("POST", "/v1/personas", { body, options });
    }
    delete(id, options) {
        return this.core.request("DELETE", "/v1/personas/{id}", { path: { id }, options });
    }
    diffVersions(id, params = {}, options) {
        return this.core.request("GET", "/v1/personas/{id}/diff", { path: { id }, query: params, options });
    }
    exportCard(id, options) {
        return this.core.request("GET", "/v1/personas/{id}/card", { path: { id }, options });
    }
    fork(id, body = {}, options) {
        return this.core.request("POST", "/v1/personas/{id}/fork", { path: { id }, body, options });
    }
    get(id, options) {
        return this.core.request("GET", "/v1/personas/{id}", { path: { id }, options });
    }
    getLineage(id, options) {
        return this.core.request("GET", "/v1/personas/{id}/lineage", { path: { id }, options });
    }
    getVersion(personaId, version, options) {
        return this.core.request("GET", "/v1/personas/{persona_id}/versions/{version}", { path: { "persona_id": personaId, version }, options });
    }
    getVoiceProfile(id, options) {
        return this.core.request("GET", "/v1/personas/{id}/voice", { path: { id }, options });
    }
    importCard(body, options) {
        return this.core.request("POST", "/v1/personas/import", { body, options });
    }
    list(params = {}, options) {
        return this.core.request("GET", "/v1/personas", { query: params, options });
    }
    listIter(params = {}, options) {
        return this.core.paginate((p) => this.list(p, options), params);
    }
    listVersions(id, params = {}, options) {
        return this.core.request("GET", "/v1/personas/{id}/versions", { path: { id }, query: params, options });
    }
    listVersionsIter(id, params = {}, options) {
        return this.core.paginate((p) => this.listVersions(id, p, options), params);
    }
    preview(body, options) {
        return this.core.request("POST", "/v1/personas/preview", { body, options });
    }
    refine(id, body, options) {
        return this.core.request("POST", "/v1/personas/{id}/refine", { path: { id }, body, options });
    }
    regenerate(id, body, options) {
        return this.core.request("POST", "/v1/personas/{id}/regenerate", { path: { id }, body, options });
    }
    restore(id, body = {}, options) {
        return this.core.request("POST", "/v1/personas/{id}/restore", { path: { id }, body, options });
    }
    rollback(id, body, options) {
        return this.core.request("POST", "/v1/personas/{id}/rollback", { path: { id }, body, options });
    }
    streamCreate(body, options) {
        return this.core.stream("persona", "POST", "/v1/personas:stream", { body, options });
    }
    update(id, body = {}, options) {
        return this.core.request("PATCH", "/v1/personas/{id}", { path: { id }, body, options });
    }
}
export class PortraitsResource {
    core;
    constructor(core) {
        this.core = core;
    }
    approve(personaId, id, body = {}, options) {
        return this.core.request("POST", "/v1/personas/{persona_id}/portraits/{id}/approve", { path: { "persona_id": personaId, id }, body, options });
    }
    create(personaId, body = {}, options) {
        return this.core.request("POST", "/v1/personas/{persona_id}/portraits", { path: { "persona_id": personaId }, body, options });
    }
    edit(personaId, id, body, options) {
        return this.core.request("POST", "/v1/personas/{persona_id}/portrait/{id}/edit", { path: { "persona_id": personaId, id }, body, options });
    }
    get(personaId, id, options) {
        return this.core.request("GET", "/v1/personas/{persona_id}/portraits/{id}", { path: { "persona_id": personaId, id }, options });
    }
    list(personaId, params = {}, options) {
        return this.core.request("GET", "/v1/personas/{persona_id}/portraits", { path: { "persona_id": personaId }, query: params, options });
    }
    listIter(personaId, params = {}, options) {
        return this.core.paginate((p) => this.list(personaId, p, options), params);
    }
    reject(personaId, id, body = {}, options) {
        return this.core.request("POST", "/v1/personas/{persona_id}/portraits/{id}/reject", { path: { "persona_id": personaId, id }, body, options });
    }
}
export class PrivacyResource {
    core;
    constructor(core) {
        this.core = core;
    }
    createExport(body = {}, options) {
        return this.core.request("POST", "/v1/privacy/exports", { body, options });
    }
    eraseMyData(options) {
        return this.core.request("DELETE", "/v1/privacy/me", { options });
    }
    listExports(params = {}, options) {
        return this.core.request("GET", "/v1/privacy/exports", { query: params, options });
    }
    listExportsIter(params = {}, options) {
        return this.core.paginate((p) => this.listExports(p, options), params);
    }
}
export class ProbesResource {
    core;
    constructor(core) {
        this.core = core;
    }
    getLiveness(options) {
        return this.core.request("GET", "/healthz", { options, auth: false });
    }
    getMetrics(options) {
        return this.core.raw("GET", "/metrics", { options, auth: false });
    }
    getReadiness(options) {
        return this.core.request("GET", "/readyz", { options, auth: false });
    }
}
export class ScimResource {
    core;
    constructor(core) {
        this.core = core;
    }
    createGroup(body, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/Groups", { body, contentType: "application/scim+json", options });
    }
    createUser(body, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/Users", { body, contentType: "application/scim+json", options });
    }
    deleteGroup(id, options) {
        return this.core.raw("DELETE", "/v1/auth/scim/v2/Groups/{id}", { path: { id }, options });
    }
    deleteUser(id, options) {
        return this.core.raw("DELETE", "/v1/auth/scim/v2/Users/{id}", { path: { id }, options });
    }
    getGroup(id, params = {}, options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/Groups/{id}", { path: { id }, query: params, options });
    }
    getResourceType(id, options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/ResourceTypes/{id}", { path: { id }, options });
    }
    getSchema(id, options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/Schemas/{id}", { path: { id }, options });
    }
    getServiceProviderConfig(options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/ServiceProviderConfig", { options });
    }
    getUser(id, params = {}, options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/Users/{id}", { path: { id }, query: params, options });
    }
    listGroups(params = {}, options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/Groups", { query: params, options });
    }
    listResourceTypes(options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/ResourceTypes", { options });
    }
    listSchemas(options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/Schemas", { options });
    }
    listUsers(params = {}, options) {
        return this.core.raw("GET", "/v1/auth/scim/v2/Users", { query: params, options });
    }
    patchGroup(id, body, options) {
        return this.core.raw("PATCH", "/v1/auth/scim/v2/Groups/{id}", { path: { id }, body, contentType: "application/scim+json", options });
    }
    patchUser(id, body, options) {
        return this.core.raw("PATCH", "/v1/auth/scim/v2/Users/{id}", { path: { id }, body, contentType: "application/scim+json", options });
    }
    rejectDiscoveryWrite(params = {}, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/ServiceProviderConfig", { query: params, options });
    }
    rejectDiscoveryWrite10(id, options) {
        return this.core.raw("PUT", "/v1/auth/scim/v2/ResourceTypes/{id}", { path: { id }, options });
    }
    rejectDiscoveryWrite11(id, options) {
        return this.core.raw("PATCH", "/v1/auth/scim/v2/ResourceTypes/{id}", { path: { id }, options });
    }
    rejectDiscoveryWrite12(id, options) {
        return this.core.raw("DELETE", "/v1/auth/scim/v2/ResourceTypes/{id}", { path: { id }, options });
    }
    rejectDiscoveryWrite13(params = {}, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/Schemas", { query: params, options });
    }
    rejectDiscoveryWrite14(params = {}, options) {
        return this.core.raw("PUT", "/v1/auth/scim/v2/Schemas", { query: params, options });
    }
    rejectDiscoveryWrite15(params = {}, options) {
        return this.core.raw("PATCH", "/v1/auth/scim/v2/Schemas", { query: params, options });
    }
    rejectDiscoveryWrite16(params = {}, options) {
        return this.core.raw("DELETE", "/v1/auth/scim/v2/Schemas", { query: params, options });
    }
    rejectDiscoveryWrite17(id, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/Schemas/{id}", { path: { id }, options });
    }
    rejectDiscoveryWrite18(id, options) {
        return this.core.raw("PUT", "/v1/auth/scim/v2/Schemas/{id}", { path: { id }, options });
    }
    rejectDiscoveryWrite19(id, options) {
        return this.core.raw("PATCH", "/v1/auth/scim/v2/Schemas/{id}", { path: { id }, options });
    }
    rejectDiscoveryWrite2(params = {}, options) {
        return this.core.raw("PUT", "/v1/auth/scim/v2/ServiceProviderConfig", { query: params, options });
    }
    rejectDiscoveryWrite20(id, options) {
        return this.core.raw("DELETE", "/v1/auth/scim/v2/Schemas/{id}", { path: { id }, options });
    }
    rejectDiscoveryWrite3(params = {}, options) {
        return this.core.raw("PATCH", "/v1/auth/scim/v2/ServiceProviderConfig", { query: params, options });
    }
    rejectDiscoveryWrite4(params = {}, options) {
        return this.core.raw("DELETE", "/v1/auth/scim/v2/ServiceProviderConfig", { query: params, options });
    }
    rejectDiscoveryWrite5(params = {}, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/ResourceTypes", { query: params, options });
    }
    rejectDiscoveryWrite6(params = {}, options) {
        return this.core.raw("PUT", "/v1/auth/scim/v2/ResourceTypes", { query: params, options });
    }
    rejectDiscoveryWrite7(params = {}, options) {
        return this.core.raw("PATCH", "/v1/auth/scim/v2/ResourceTypes", { query: params, options });
    }
    rejectDiscoveryWrite8(params = {}, options) {
        return this.core.raw("DELETE", "/v1/auth/scim/v2/ResourceTypes", { query: params, options });
    }
    rejectDiscoveryWrite9(id, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/ResourceTypes/{id}", { path: { id }, options });
    }
    replaceGroup(id, body, options) {
        return this.core.raw("PUT", "/v1/auth/scim/v2/Groups/{id}", { path: { id }, body, contentType: "application/scim+json", options });
    }
    replaceUser(id, body, options) {
        return this.core.raw("PUT", "/v1/auth/scim/v2/Users/{id}", { path: { id }, body, contentType: "application/scim+json", options });
    }
    searchGroups(body, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/Groups/.search", { body, contentType: "application/scim+json", options });
    }
    searchResources(body, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/.search", { body, contentType: "application/scim+json", options });
    }
    searchUsers(body, options) {
        return this.core.raw("POST", "/v1/auth/scim/v2/Users/.search", { body, contentType: "application/scim+json", options });
    }
}
export class ScimTokensResource {
    core;
    constructor(core) {
        this.core = core;
    }
    create(body, options) {
        return this.core.request("POST", "/v1/auth/scim/tokens", { body, options });
    }
    list(params = {}, options) {
        return this.core.request("GET", "/v1/auth/scim/tokens", { query: params, options });
    }
    listIter(params = {}, options) {
        return this.core.paginate((p) => this.list(p, options), params);
    }
    revoke(id, body = {}, options) {
        return this.core.request("POST", "/v1/auth/scim/tokens/{id}/revoke", { path: { id }, body, options });
    }
}
export class UsageResource {
    core;
    constructor(core) {
        this.core = core;
    }
    get(params = {}, options) {
        return this.core.request("GET", "/v1/usage", { query: params, options });
    }
}
export class WebhooksResource {
    core;
    constructor(core) {
        this.core = core;
    }
    create(body, options) {
        return this.core.request("POST", "/v1/webhooks", { body, options });
    }
    delete(id, options) {
        return this.core.request("DELETE", "/v1/webhooks/{id}", { path: { id }, options });
    }
    get(id, options) {
        return this.core.request("GET", "/v1/webhooks/{id}", { path: { id }, options });
    }
    getSecret(id, options) {
        return this.core.request("GET", "/v1/webhooks/{id}/secret", { path: { id }, options });
    }
    list(params = {}, options) {
        return this.core.request("GET", "/v1/webhooks", { query: params, options });
    }
    listIter(params = {}, options) {
        return this.core.paginate((p) => this.list(p, options), params);
    }
    listDeliveries(webhookId, params = {}, options) {
        return this.core.request("GET", "/v1/webhooks/{webhook_id}/deliveries", { path: { "webhook_id": webhookId }, query: params, options });
    }
    listDeliveriesIter(webhookId, params = {}, options) {
        return this.core.paginate((p) => this.listDeliveries(webhookId, p, options), params);
    }
    ping(id, body = {}, options) {
        return this.core.request("POST", "/v1/webhooks/{id}/ping", { path: { id }, body, options });
    }
    replayDelivery(webhookId, id, body = {}, options) {
        return this.core.request("POST", "/v1/webhooks/{webhook_id}/deliveries/{id}/replay", { path: { "webhook_id": webhookId, id }, body, options });
    }
    update(id, body = {}, options) {
        return this.core.request("PATCH", "/v1/webhooks/{id}", { path: { id }, body, options });
    }
}
export function createResources(core) {
    return {
        admin: new AdminResource(core),
        apiKeys: new ApiKeysResource(core),
        audit: new AuditResource(core),
        billing: new BillingResource(core),
        chat: new ChatResource(core),
        config: new ConfigResource(core),
        dashboard: new DashboardResource(core),
        docs: new DocsResource(core),
        events: new EventsResource(core),
        files: new FilesResource(core),
        marketplace: new MarketplaceResource(core),
        moderation: new ModerationResource(core),
        openai: new OpenaiResource(core),
        organizations: new OrganizationsResource(core),
        personas: new PersonasResource(core),
        portraits: new PortraitsResource(core),
        privacy: new PrivacyResource(core),
        probes: new ProbesResource(core),
        scim: new ScimResource(core),
        scimTokens: new ScimTokensResource(core),
        usage: new UsageResource(core),
        webhooks: new WebhooksResource(core),
    };
}
export const OPERATIONS = [
    { operationId: "BuildOneDsarExport", resource: "admin", method: "buildOneDsarExport", httpMethod: "POST", path: "/v1/admin/dsar/build-one", kind: "json" },
    { operationId: "RotateWebhookSecrets", resource: "admin", method: "rotateWebhookSecrets", httpMethod: "POST", path: "/v1/admin/webhooks/rotate-secrets", kind: "json" },
    { operationId: "CreateApiKey", resource: "apiKeys", method: "create", httpMethod: "POST", path: "/v1/keys", kind: "json" },
    { operationId: "GetApiKey", resource: "apiKeys", method: "get", httpMethod: "GET", path: "/v1/keys/{id}", kind: "json" },
    { operationId: "ListApiKeys", resource: "apiKeys", method: "list", httpMethod: "GET", path: "/v1/keys", kind: "json" },
    { operationId: "RevokeApiKey", resource: "apiKeys", method: "revoke", httpMethod: "POST", path: "/v1/keys/{id}/revoke", kind: "json" },
    { operationId: "ListAuditEvents", resource: "audit", method: "listEvents", httpMethod: "GET", path: "/v1/audit/events", kind: "json" },
    { operationId: "CancelSubscription", resource: "billing", method: "cancelSubscription", httpMethod: "POST", path: "/v1/billing/subscription/cancel", kind: "json" },
    { operationId: "ChangeSubscription", resource: "billing", method: "changeSubscription", httpMethod: "POST", path: "/v1/billing/subscription/change", kind: "json" },
    { operationId: "GetInvoice", resource: "billing", method: "getInvoice", httpMethod: "GET", path: "/v1/billing/invoices/{id}", kind: "json" },
    { operationId: "GetInvoicePdf", resource: "billing", method: "getInvoicePdf", httpMethod: "GET", path: "/v1/billing/invoices/{id}/pdf", kind: "raw" },
    { operationId: "GetSubscription", resource: "billing", method: "getSubscription", httpMethod: "GET", path: "/v1/billing/subscription", kind: "json" },
    { operationId: "ListInvoices", resource: "billing", method: "listInvoices", httpMethod: "GET", path: "/v1/billing/invoices", kind: "json" },
    { operationId: "ReceiveStripeEvent", resource: "billing", method: "receiveStripeEvent", httpMethod: "POST", path: "/v1/billing/stripe/webhook", kind: "json" },
    { operationId: "ResumeSubscription", resource: "billing", method: "resumeSubscription", httpMethod: "POST", path: "/v1/billing/subscription/resume", kind: "json" },
    { operationId: "ArchiveChatSession", resource: "chat", method: "archiveSession", httpMethod: "POST", path: "/v1/chat/sessions/{id}/archive", kind: "json" },
    { operationId: "ChooseChatMessage", resource: "chat", method: "chooseMessage", httpMethod: "POST", path: "/v1/chat/sessions/{session_id}/messages/{id}/choose", kind: "json" },
    { operationId: "CreateChatSession", resource: "chat", method: "createSession", httpMethod: "POST", path: "/v1/chat/sessions", kind: "json" },
    { operationId: "DeleteChatMessage", resource: "chat", method: "deleteMessage", httpMethod: "DELETE", path: "/v1/chat/sessions/{session_id}/messages/{id}", kind: "json" },
    { operationId: "EndChatSession", resource: "chat", method: "endSession", httpMethod: "POST", path: "/v1/chat/sessions/{id}/end", kind: "json" },
    { operationId: "GetChatSession", resource: "chat", method: "getSession", httpMethod: "GET", path: "/v1/chat/sessions/{id}", kind: "json" },
    { operationId: "ListChatMessages", resource: "chat", method: "listMessages", httpMethod: "GET", path: "/v1/chat/sessions/{id}/messages", kind: "json" },
    { operationId: "ListChatSessions", resource: "chat", method: "listSessions", httpMethod: "GET", path: "/v1/chat/sessions", kind: "json" },
    { operationId: "PreviewChatMessage", resource: "chat", method: "previewMessage", httpMethod: "POST", path: "/v1/chat/sessions/{id}/messages/preview", kind: "json" },
    { operationId: "RegenerateChatMessage", resource: "chat", method: "regenerateMessage", httpMethod: "POST", path: "/v1/chat/sessions/{session_id}/messages/{id}/regenerate", kind: "json" },
    { operationId: "SendChatMessage", resource: "chat", method: "sendMessage", httpMethod: "POST", path: "/v1/chat/sessions/{id}/messages", kind: "json" },
    { operationId: "StreamChatMessage", resource: "chat", method: "streamMessage", httpMethod: "POST", path: "/v1/chat/sessions/{id}/messages:stream", kind: "stream" },
    { operationId: "UpdateChatMessage", resource: "chat", method: "updateMessage", httpMethod: "PATCH", path: "/v1/chat/sessions/{session_id}/messages/{id}", kind: "json" },
    { operationId: "DeleteConfigItem", resource: "config", method: "delete", httpMethod: "DELETE", path: "/v1/config/{key}", kind: "json" },
    { operationId: "GetConfigItem", resource: "config", method: "get", httpMethod: "GET", path: "/v1/config/{key}", kind: "json" },
    { operationId: "ListConfigItems", resource: "config", method: "list", httpMethod: "GET", path: "/v1/config", kind: "json" },
    { operationId: "UpdateConfigItem", resource: "config", method: "update", httpMethod: "PUT", path: "/v1/config/{key}", kind: "json" },
    { operationId: "GetDashboardAsset", resource: "dashboard", method: "getAsset", httpMethod: "GET", path: "/dashboard/assets/{name}", kind: "raw" },
    { operationId: "GetDashboardPage", resource: "dashboard", method: "getPage", httpMethod: "GET", path: "/dashboard", kind: "raw" },
    { operationId: "GetApiReference", resource: "docs", method: "getApiReference", httpMethod: "GET", path: "/docs", kind: "raw" },
    { operationId: "GetOpenApiDocument", resource: "docs", method: "getOpenApiDocument", httpMethod: "GET", path: "/v1/openapi.json", kind: "raw" },
    { operationId: "GetEvent", resource: "events", method: "get", httpMethod: "GET", path: "/v1/events/{id}", kind: "json" },
    { operationId: "ListEvents", resource: "events", method: "list", httpMethod: "GET", path: "/v1/events", kind: "json" },
    { operationId: "GetFile", resource: "files", method: "get", httpMethod: "GET", path: "/v1/files/{key}", kind: "raw" },
    { operationId: "CreateListing", resource: "marketplace", method: "createListing", httpMethod: "POST", path: "/v1/marketplace/listings", kind: "json" },
    { operationId: "GetListing", resource: "marketplace", method: "getListing", httpMethod: "GET", path: "/v1/marketplace/listings/{id}", kind: "json" },
    { operationId: "ListListings", resource: "marketplace", method: "listListings", httpMethod: "GET", path: "/v1/marketplace/listings", kind: "json" },
    { operationId: "PurchaseListing", resource: "marketplace", method: "purchaseListing", httpMethod: "POST", path: "/v1/marketplace/listings/{id}/purchase", kind: "json" },
    { operationId: "UnpublishListing", resource: "marketplace", method: "unpublishListing", httpMethod: "POST", path: "/v1/marketplace/listings/{id}/unpublish", kind: "json" },
    { operationId: "UpdateListing", resource: "marketplace", method: "updateListing", httpMethod: "PATCH", path: "/v1/marketplace/listings/{id}", kind: "json" },
    { operationId: "ClaimModerationReview", resource: "moderation", method: "claimReview", httpMethod: "POST", path: "/v1/admin/moderation/queue/{id}/claim", kind: "json" },
    { operationId: "ListModerationQueue", resource: "moderation", method: "listQueue", httpMethod: "GET", path: "/v1/admin/moderation/queue", kind: "json" },
    { operationId: "ResolveModerationReview", resource: "moderation", method: "resolveReview", httpMethod: "POST", path: "/v1/admin/moderation/queue/{id}/resolve", kind: "json" },
    { operationId: "CreateChatCompletion", resource: "openai", method: "createChatCompletion", httpMethod: "POST", path: "/v1/chat/completions", kind: "json" },
    { operationId: "GetModel", resource: "openai", method: "getModel", httpMethod: "GET", path: "/v1/models/{model}", kind: "json" },
    { operationId: "ListModels", resource: "openai", method: "listModels", httpMethod: "GET", path: "/v1/models", kind: "json" },
    { operationId: "StreamChatCompletion", resource: "openai", method: "streamChatCompletion", httpMethod: "POST", path: "/v1/chat/completions:stream", kind: "stream" },
    { operationId: "GetOrganization", resource: "organizations", method: "get", httpMethod: "GET", path: "/v1/orgs/{id}", kind: "json" },
    { operationId: "ArchivePersona", resource: "personas", method: "archive", httpMethod: "POST", path: "/v1/personas/{id}/archive", kind: "json" },
    { operationId: "AuditPersona", resource: "personas", method: "audit", httpMethod: "POST", path: "/v1/personas/{id}/audit", kind: "json" },
    { operationId: "CreatePersona", resource: "personas", method: "create", httpMethod: "POST", path: "/v1/personas", kind: "json" },
    { operationId: "DeletePersona", resource: "personas", method: "delete", httpMethod: "DELETE", path: "/v1/personas/{id}", kind: "json" },
    { operationId: "DiffPersonaVersions", resource: "personas", method: "diffVersions", httpMethod: "GET", path: "/v1/personas/{id}/diff", kind: "json" },
    { operationId: "ExportPersonaCard", resource: "personas", method: "exportCard", httpMethod: "GET", path: "/v1/personas/{id}/card", kind: "json" },
    { operationId: "ForkPersona", resource: "personas", method: "fork", httpMethod: "POST", path: "/v1/personas/{id}/fork", kind: "json" },
    { operationId: "GetPersona", resource: "personas", method: "get", httpMethod: "GET", path: "/v1/personas/{id}", kind: "json" },
    { operationId: "GetPersonaLineage", resource: "personas", method: "getLineage", httpMethod: "GET", path: "/v1/personas/{id}/lineage", kind: "json" },
    { operationId: "GetPersonaVersion", resource: "personas", method: "getVersion", httpMethod: "GET", path: "/v1/personas/{persona_id}/versions/{version}", kind: "json" },
    { operationId: "GetVoiceProfile", resource: "personas", method: "getVoiceProfile", httpMethod: "GET", path: "/v1/personas/{id}/voice", kind: "json" },
    { operationId: "ImportPersonaCard", resource: "personas", method: "importCard", httpMethod: "POST", path: "/v1/personas/import", kind: "json" },
    { operationId: "ListPersonas", resource: "personas", method: "list", httpMethod: "GET", path: "/v1/personas", kind: "json" },
    { operationId: "ListPersonaVersions", resource: "personas", method: "listVersions", httpMethod: "GET", path: "/v1/personas/{id}/versions", kind: "json" },
    { operationId: "PreviewPersona", resource: "personas", method: "preview", httpMethod: "POST", path: "/v1/personas/preview", kind: "json" },
    { operationId: "RefinePersona", resource: "personas", method: "refine", httpMethod: "POST", path: "/v1/personas/{id}/refine", kind: "json" },
    { operationId: "RegeneratePersona", resource: "personas", method: "regenerate", httpMethod: "POST", path: "/v1/personas/{id}/regenerate", kind: "json" },
    { operationId: "RestorePersona", resource: "personas", method: "restore", httpMethod: "POST", path: "/v1/personas/{id}/restore", kind: "json" },
    { operationId: "RollbackPersona", resource: "personas", method: "rollback", httpMethod: "POST", path: "/v1/personas/{id}/rollback", kind: "json" },
    { operationId: "StreamCreatePersona", resource: "personas", method: "streamCreate", httpMethod: "POST", path: "/v1/personas:stream", kind: "stream" },
    { operationId: "UpdatePersona", resource: "personas", method: "update", httpMethod: "PATCH", path: "/v1/personas/{id}", kind: "json" },
    { operationId: "ApprovePortrait", resource: "portraits", method: "approve", httpMethod: "POST", path: "/v1/personas/{persona_id}/portraits/{id}/approve", kind: "json" },
    { operationId: "CreatePortrait", resource: "portraits", method: "create", httpMethod: "POST", path: "/v1/personas/{persona_id}/portraits", kind: "json" },
    { operationId: "EditPortrait", resource: "portraits", method: "edit", httpMethod: "POST", path: "/v1/personas/{persona_id}/portrait/{id}/edit", kind: "json" },
    { operationId: "GetPortrait", resource: "portraits", method: "get", httpMethod: "GET", path: "/v1/personas/{persona_id}/portraits/{id}", kind: "json" },
    { operationId: "ListPortraits", resource: "portraits", method: "list", httpMethod: "GET", path: "/v1/personas/{persona_id}/portraits", kind: "json" },
    { operationId: "RejectPortrait", resource: "portraits", method: "reject", httpMethod: "POST", path: "/v1/personas/{persona_id}/portraits/{id}/reject", kind: "json" },
    { operationId: "CreatePrivacyExport", resource: "privacy", method: "createExport", httpMethod: "POST", path: "/v1/privacy/exports", kind: "json" },
    { operationId: "EraseMyData", resource: "privacy", method: "eraseMyData", httpMethod: "DELETE", path: "/v1/privacy/me", kind: "json" },
    { operationId: "ListPrivacyExports", resource: "privacy", method: "listExports", httpMethod: "GET", path: "/v1/privacy/exports", kind: "json" },
    { operationId: "GetLiveness", resource: "probes", method: "getLiveness", httpMethod: "GET", path: "/healthz", kind: "json" },
    { operationId: "GetMetrics", resource: "probes", method: "getMetrics", httpMethod: "GET", path: "/metrics", kind: "raw" },
    { operationId: "GetReadiness", resource: "probes", method: "getReadiness", httpMethod: "GET", path: "/readyz", kind: "json" },
    { operationId: "CreateScimGroup", resource: "scim", method: "createGroup", httpMethod: "POST", path: "/v1/auth/scim/v2/Groups", kind: "raw" },
    { operationId: "CreateScimUser", resource: "scim", method: "createUser", httpMethod: "POST", path: "/v1/auth/scim/v2/Users", kind: "raw" },
    { operationId: "DeleteScimGroup", resource: "scim", method: "deleteGroup", httpMethod: "DELETE", path: "/v1/auth/scim/v2/Groups/{id}", kind: "raw" },
    { operationId: "DeleteScimUser", resource: "scim", method: "deleteUser", httpMethod: "DELETE", path: "/v1/auth/scim/v2/Users/{id}", kind: "raw" },
    { operationId: "GetScimGroup", resource: "scim", method: "getGroup", httpMethod: "GET", path: "/v1/auth/scim/v2/Groups/{id}", kind: "raw" },
    { operationId: "GetResourceType", resource: "scim", method: "getResourceType", httpMethod: "GET", path: "/v1/auth/scim/v2/ResourceTypes/{id}", kind: "raw" },
    { operationId: "GetSchema", resource: "scim", method: "getSchema", httpMethod: "GET", path: "/v1/auth/scim/v2/Schemas/{id}", kind: "raw" },
    { operationId: "GetServiceProviderConfig", resource: "scim", method: "getServiceProviderConfig", httpMethod: "GET", path: "/v1/auth/scim/v2/ServiceProviderConfig", kind: "raw" },
    { operationId: "GetScimUser", resource: "scim", method: "getUser", httpMethod: "GET", path: "/v1/auth/scim/v2/Users/{id}", kind: "raw" },
    { operationId: "ListScimGroups", resource: "scim", method: "listGroups", httpMethod: "GET", path: "/v1/auth/scim/v2/Groups", kind: "raw" },
    { operationId: "ListResourceTypes", resource: "scim", method: "listResourceTypes", httpMethod: "GET", path: "/v1/auth/scim/v2/ResourceTypes", kind: "raw" },
    { operationId: "ListSchemas", resource: "scim", method: "listSchemas", httpMethod: "GET", path: "/v1/auth/scim/v2/Schemas", kind: "raw" },
    { operationId: "ListScimUsers", resource: "scim", method: "listUsers", httpMethod: "GET", path: "/v1/auth/scim/v2/Users", kind: "raw" },
    { operationId: "PatchScimGroup", resource: "scim", method: "patchGroup", httpMethod: "PATCH", path: "/v1/auth/scim/v2/Groups/{id}", kind: "raw" },
    { operationId: "PatchScimUser", resource: "scim", method: "patchUser", httpMethod: "PATCH", path: "/v1/auth/scim/v2/Users/{id}", kind: "raw" },
    { operationId: "RejectDiscoveryWrite", resource: "scim", method: "rejectDiscoveryWrite", httpMethod: "POST", path: "/v1/auth/scim/v2/ServiceProviderConfig", kind: "raw" },
    { operationId: "RejectDiscoveryWrite10", resource: "scim", method: "rejectDiscoveryWrite10", httpMethod: "PUT", path: "/v1/auth/scim/v2/ResourceTypes/{id}", kind: "raw" },
    { operationId: "RejectDiscoveryWrite11", resource: "scim", method: "rejectDiscoveryWrite11", httpMethod: "PATCH", path: "/v1/auth/scim/v2/ResourceTypes/{id}", kind: "raw" },
    { operationId: "RejectDiscoveryWrite12", resource: "scim", method: "rejectDiscoveryWrite12", httpMethod: "DELETE", path: "/v1/auth/scim/v2/ResourceTypes/{id}", kind: "raw" },
    { operationId: "RejectDiscoveryWrite13", resource: "scim", method: "rejectDiscoveryWrite13", httpMethod: "POST", path: "/v1/auth/scim/v2/Schemas", kind: "raw" },
    { operationId: "RejectDiscoveryWrite14", resource: "scim", method: "rejectDiscoveryWrite14", httpMethod: "PUT", path: "/v1/auth/scim/v2/Schemas", kind: "raw" },
    { operationId: "RejectDiscoveryWrite15", resource: "scim", method: "rejectDiscoveryWrite15", httpMethod: "PATCH", path: "/v1/auth/scim/v2/Schemas", kind: "raw" },
    { operationId: "RejectDiscoveryWrite16", resource: "scim", method: "rejectDiscoveryWrite16", httpMethod: "DELETE", path: "/v1/auth/scim/v2/Schemas", kind: "raw" },
    { operationId: "RejectDiscoveryWrite17", resource: "scim", method: "rejectDiscoveryWrite17", httpMethod: "POST", path: "/v1/auth/scim/v2/Schemas/{id}", kind: "raw" },
    { operationId: "RejectDiscoveryWrite18", resource: "scim", method: "rejectDiscoveryWrite18", httpMethod: "PUT", path: "/v1/auth/scim/v2/Schemas/{id}", kind: "raw" },
    { operationId: "RejectDiscoveryWrite19", resource: "scim", method: "rejectDiscoveryWrite19", httpMethod: "PATCH", path: "/v1/auth/scim/v2/Schemas/{id}", kind: "raw" },
    { operationId: "RejectDiscoveryWrite2", resource: "scim", method: "rejectDiscoveryWrite2", httpMethod: "PUT", path: "/v1/auth/scim/v2/ServiceProviderConfig", kind: "raw" },
    { operationId: "RejectDiscoveryWrite20", resource: "scim", method: "rejectDiscoveryWrite20", httpMethod: "DELETE", path: "/v1/auth/scim/v2/Schemas/{id}", kind: "raw" },
    { operationId: "RejectDiscoveryWrite3", resource: "scim", method: "rejectDiscoveryWrite3", httpMethod: "PATCH", path: "/v1/auth/scim/v2/ServiceProviderConfig", kind: "raw" },
    { operationId: "RejectDiscoveryWrite4", resource: "scim", method: "rejectDiscoveryWrite4", httpMethod: "DELETE", path: "/v1/auth/scim/v2/ServiceProviderConfig", kind: "raw" },
    { operationId: "RejectDiscoveryWrite5", resource: "scim", method: "rejectDiscoveryWrite5", httpMethod: "POST", path: "/v1/auth/scim/v2/ResourceTypes", kind: "raw" },
    { operationId: "RejectDiscoveryWrite6", resource: "scim", method: "rejectDiscoveryWrite6", httpMethod: "PUT", path: "/v1/auth/scim/v2/ResourceTypes", kind: "raw" },
    { operationId: "RejectDiscoveryWrite7", resource: "scim", method: "rejectDiscoveryWrite7", httpMethod: "PATCH", path: "/v1/auth/scim/v2/ResourceTypes", kind: "raw" },
    { operationId: "RejectDiscoveryWrite8", resource: "scim", method: "rejectDiscoveryWrite8", httpMethod: "DELETE", path: "/v1/auth/scim/v2/ResourceTypes", kind: "raw" },
    { operationId: "RejectDiscoveryWrite9", resource: "scim", method: "rejectDiscoveryWrite9", httpMethod: "POST", path: "/v1/auth/scim/v2/ResourceTypes/{id}", kind: "raw" },
    { operationId: "ReplaceScimGroup", resource: "scim", method: "replaceGroup", httpMethod: "PUT", path: "/v1/auth/scim/v2/Groups/{id}", kind: "raw" },
    { operationId: "ReplaceScimUser", resource: "scim", method: "replaceUser", httpMethod: "PUT", path: "/v1/auth/scim/v2/Users/{id}", kind: "raw" },
    { operationId: "SearchScimGroups", resource: "scim", method: "searchGroups", httpMethod: "POST", path: "/v1/auth/scim/v2/Groups/.search", kind: "raw" },
    { operationId: "SearchScimResources", resource: "scim", method: "searchResources", httpMethod: "POST", path: "/v1/auth/scim/v2/.search", kind: "raw" },
    { operationId: "SearchScimUsers", resource: "scim", method: "searchUsers", httpMethod: "POST", path: "/v1/auth/scim/v2/Users/.search", kind: "raw" },
    { operationId: "CreateScimToken", resource: "scimTokens", method: "create", httpMethod: "POST", path: "/v1/auth/scim/tokens", kind: "json" },
    { operationId: "ListScimTokens", resource: "scimTokens", method: "list", httpMethod: "GET", path: "/v1/auth/scim/tokens", kind: "json" },
    { operationId: "RevokeScimToken", resource: "scimTokens", method: "revoke", httpMethod: "POST", path: "/v1/auth/scim/tokens/{id}/revoke", kind: "json" },
    { operationId: "GetUsage", resource: "usage", method: "get", httpMethod: "GET", path: "/v1/usage", kind: "json" },
    { operationId: "CreateWebhookEndpoint", resource: "webhooks", method: "create", httpMethod: "POST", path: "/v1/webhooks", kind: "json" },
    { operationId: "DeleteWebhookEndpoint", resource: "webhooks", method: "delete", httpMethod: "DELETE", path: "/v1/webhooks/{id}", kind: "json" },
    { operationId: "GetWebhookEndpoint", resource: "webhooks", method: "get", httpMethod: "GET", path: "/v1/webhooks/{id}", kind: "json" },
    { operationId: "GetWebhookEndpointSecret", resource: "webhooks", method: "getSecret", httpMethod: "GET", path: "/v1/webhooks/{id}/secret", kind: "json" },
    { operationId: "ListWebhookEndpoints", resource: "webhooks", method: "list", httpMethod: "GET", path: "/v1/webhooks", kind: "json" },
    { operationId: "ListWebhookDeliveries", resource: "webhooks", method: "listDeliveries", httpMethod: "GET", path: "/v1/webhooks/{webhook_id}/deliveries", kind: "json" },
    { operationId: "PingWebhookEndpoint", resource: "webhooks", method: "ping", httpMethod: "POST", path: "/v1/webhooks/{id}/ping", kind: "json" },
    { operationId: "ReplayWebhookDelivery", resource: "webhooks", method: "replayDelivery", httpMethod: "POST", path: "/v1/webhooks/{webhook_id}/deliveries/{id}/replay", kind: "json" },
    { operationId: "UpdateWebhookEndpoint", resource: "webhooks", method: "update", httpMethod: "PATCH", path: "/v1/webhooks/{id}", kind: "json" },
];
