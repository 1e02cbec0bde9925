// Verification of a REAL delivery: tests/sdk/test_typescript_sdk.py pinged an
// endpoint on a local receiver and wrote the raw body, the headers and the
// endpoint's secret to PERSONA_SDK_WEBHOOK_DELIVERY.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as sdk from "@persona-service/sdk";
import { constructEvent, signWebhook, verifyWebhook, WebhookVerificationError } from "@persona-service/sdk/webhooks";
import { env, rejection } from "../test-support/helpers.mjs";

const delivery = JSON.parse(readFileSync(env("PERSONA_SDK_WEBHOOK_DELIVERY"), "utf8"));
const body = new Uint8Array(Buffer.from(delivery.bodyBase64, "base64"));
const header = delivery.headers["x-service-signature"];
const { secret } = delivery;
const t = Number(/(?:^|,)t=(\d+)/.exec(header)[1]);

test("the subpath and the package export the same functions", () => {
  assert.equal(sdk.verifyWebhook, verifyWebhook);
  assert.equal(sdk.constructEvent, constructEvent);
  assert.equal(sdk.WebhookVerificationError, WebhookVerificationError);
});

test("a real delivery verifies with its endpoint's secret (bytes or text), also beside another secret", async () => {
  assert.match(header, /^t=\d+,v1=[0-9a-f]{64}$/);
  assert.equal(await verifyWebhook(body, header, secret), true);
  assert.equal(await verifyWebhook(new TextDecoder().decode(body), header, secret), true);
  assert.equal(await verifyWebhook(body, header, ["whsec_previous_or_next", secret]), true, "rotation: either secret");
  assert.equal(await signWebhook(body, secret, t), header, "the SDK signs as the server does");
});

test("a wrong secret, a stale timestamp or a changed body fail", async () => {
  assert.equal(await verifyWebhook(body, header, "whsec_wrong"), false);
  assert.equal(await verifyWebhook(body, header, secret.slice(0, -1)), false);
  assert.equal(await verifyWebhook(body, header, secret, { now: t + 301 }), false);
  assert.equal(await verifyWebhook(body, header, secret, { now: t - 301 }), false);
  assert.equal(await verifyWebhook(body, header, secret, { now: t + 299 }), true);
  assert.equal(await verifyWebhook(body, header, secret, { now: t + 3600, toleranceSeconds: 3600 }), true);
  assert.equal(await verifyWebhook(body, header, secret, { now: t + 86400, toleranceSeconds: null }), true);
  const changed = new Uint8Array(body);
  changed[changed.length - 2] ^= 1;
  assert.equal(await verifyWebhook(changed, header, secret), false);
  const forged = header.slice(0, -1) + (header.endsWith("0") ? "1" : "0");
  assert.equal(await verifyWebhook(body, forged, secret), false);
  assert.equal(await verifyWebhook(body, undefined, secret), false);
});

test("constructEvent returns the event, or throws WebhookVerificationError", async () => {
  const event = await constructEvent(body, header, secret);
  assert.equal(event.type, "webhook.endpoint.test_ping");
  assert.match(event.id, /^evt_/);
  assert.ok(event.occurredAt && event.orgId && event.workspaceId);
  const wrong = await rejection(constructEvent(body, header, "whsec_wrong"));
  assert.ok(wrong instanceof WebhookVerificationError);
  assert.equal(wrong.reason, "signature_mismatch");
  const stale = await rejection(constructEvent(body, header, secret, { now: new Date((t + 301) * 1000) }));
  assert.equal(stale.reason, "timestamp_out_of_tolerance");
  assert.equal((await rejection(constructEvent(body, null, secret))).reason, "missing_header");
});
