// Persona versions, pinned sessions and models, search and sort, and the cost preview (#41) on the session stack.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { NotFoundError, StateConflictError } from "@persona-service/sdk";
import { client } from "../test-support/helpers.mjs";

describe("persona versions", () => {
  test("list, read, diff, roll back and pin a version", async () => {
    const { sdk } = client();
    const persona = await sdk.personas.create({ intent: "A meticulous cartographer who maps forgotten islands" });
    const refined = await sdk.personas.refine(persona.id, { instruction: "more adventurous" });
    assert.equal(refined.version, 2);
    const versions = [];
    for await (const v of sdk.personas.listVersionsIter(persona.id, { limit: 1 })) versions.push(v.version);
    assert.deepEqual(versions, [2, 1]);
    const first = await sdk.personas.getVersion(persona.id, 1);
    assert.equal(first.kind, "create");
    assert.deepEqual(first.soul, persona.soul);
    const diff = await sdk.personas.diffVersions(persona.id, { fromVersion: 1, toVersion: 2 });
    assert.ok(diff.changes.length > 0 && diff.changes.every((c) => /^(soul|voice)\./.test(c.field)));
    const rolled = await sdk.personas.rollback(persona.id, { version: 1, note: "undo" });
    assert.equal(rolled.version, 3);
    assert.deepEqual(rolled.soul, persona.soul);
    assert.equal((await sdk.personas.getVersion(persona.id, 3)).sourceVersion, 1);
    await assert.rejects(sdk.personas.rollback(persona.id, { version: 3 }), StateConflictError);
    await assert.rejects(sdk.personas.getVersion(persona.id, 99), NotFoundError);
    const session = await sdk.chat.createSession({ personaId: persona.id, personaVersion: 2 });
    assert.equal(session.personaVersion, 2);
    const model = `persona://${persona.id}@2`;
    assert.equal((await sdk.openai.getModel(model)).id, model);
  });
});

describe("search, sort and the cost preview", () => {
  test("q and orderBy walk every page in order", async () => {
    const { sdk } = client();
    const names = ["Tamsin Orrery", "Felix Orrery", "Ines Orrery"];
    for (const name of names) await sdk.personas.create({ intent: `${name}, who builds brass planetariums`, displayName: name });
    const found = [];
    for await (const p of sdk.personas.listIter({ q: "orrery", orderBy: "display_name", limit: 1 })) found.push(p.displayName);
    assert.deepEqual(found, [...names].sort());
    const desc = await sdk.personas.list({ q: "ORRERY", orderBy: "display_name desc" });
    assert.deepEqual(desc.items.map((p) => p.displayName), [...names].sort().reverse());
  });

  test("a preview estimates and spends nothing", async () => {
    const { sdk } = client();
    const body = { intent: "A gentle beekeeper who talks to her hives" };
    const preview = await sdk.personas.preview(body);
    assert.ok(preview.estimatedInputTokens > 0 && preview.estimatedOutputTokens > 0);
    assert.equal(preview.steps.length, 5);
    assert.equal(preview.quota.wouldUse, 1);
    assert.deepEqual(await sdk.personas.preview(body), preview);
  });
});
