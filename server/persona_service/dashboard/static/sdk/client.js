// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
import { Core } from "./core.js";
import { createResources } from "./generated.js";
export class PersonaClient extends Core {
    constructor(options = {}) {
        super(options);
        Object.assign(this, createResources(this));
    }
}
