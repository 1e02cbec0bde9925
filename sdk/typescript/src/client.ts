import { Core, type ClientOptions } from "./core.js";
import { createResources, type Resources } from "./generated.js";

/**
 * The Persona Service client: one property per resource (`client.personas`,
 * `client.chat`, `client.webhooks`, …), generated from the OpenAPI document.
 *
 * ```ts
 * const client = new PersonaClient({ apiKey: process.env.PERSONA_API_KEY, baseUrl: "https://api.example.com" });
 * const persona = await client.personas.create({ intent: "A patient gardener who names every snail" });
 * ```
 */
export class PersonaClient extends Core {
  constructor(options: ClientOptions = {}) {
    super(options);
    Object.assign(this, createResources(this));
  }
}

// The resources are assigned in the constructor; this declares them on the class.
export interface PersonaClient extends Resources {}
