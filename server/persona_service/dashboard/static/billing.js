// Billing: the subscription (plan, period, change, cancel, resume) and the
// invoices with their PDFs (a 307 to a short-lived signed URL, followed with
// the credential, then opened).

import { choices, get, post, resolveRedirect } from "./api.js";
import { badge, busy, confirmDialog, errorBox, field, h, loading, money, pager, replace, table, when } from "./ui.js";

function subscriptionView(sub, plans, reload, context) {
  const out = h("div", { "aria-live": "polite" });
  const plan = h("select", { name: "plan" }, plans.map((p) => h("option", { value: p, selected: p === sub.plan }, p)));
  const change = h("button", { type: "submit", class: "primary" }, "Change plan");
  const form = h("form", { class: "row wrap" }, field("Plan", plan), change);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (plan.value === sub.plan) return;
    if (!(await confirmDialog(`Move to ${plan.value} now? Up a tier is invoiced at once (prorated); down a tier credits the next renewal.`, "Change plan"))) return;
    busy(change, out, async () => {
      await post("/v1/billing/subscription/change", { plan: plan.value });
      await context.refreshIdentity();
    });
  });
  const cancel = h("button", { type: "button", class: "danger" }, "Cancel at period end");
  cancel.addEventListener("click", async () => {
    if (!(await confirmDialog("Cancel the subscription? It falls to free at the end of the period.", "Cancel subscription"))) return;
    busy(cancel, out, async () => reload(await post("/v1/billing/subscription/cancel")));
  });
  const resume = h("button", { type: "button" }, "Resume");
  resume.addEventListener("click", () => busy(resume, out, async () => reload(await post("/v1/billing/subscription/resume"))));
  return h("div", {},
    h("dl", { class: "dl" },
      h("dt", {}, "Plan"), h("dd", {}, badge(sub.plan), ` ${money(sub.priceMinor, sub.currency)} a month`),
      h("dt", {}, "Status"), h("dd", {}, badge(sub.status)),
      h("dt", {}, "Current period"), h("dd", {}, when(sub.currentPeriodStart), " – ", when(sub.currentPeriodEnd)),
      h("dt", {}, "Credit"), h("dd", {}, money(sub.creditMinor || 0, sub.currency)),
      sub.cancelAtPeriodEnd ? [h("dt", {}, "Cancellation"), h("dd", { class: "warning" }, "Ends at the period end, then free.")] : null),
    form,
    h("div", { class: "row" }, sub.cancelAtPeriodEnd ? resume : sub.plan !== "free" ? cancel : null),
    out);
}

function pdfButton(invoice) {
  const out = h("span");
  const button = h("button", { type: "button", class: "small", "aria-label": `PDF of invoice ${invoice.number}` }, "PDF");
  button.addEventListener("click", () => {
    // The tab opens within the click (no popup blocker), then goes to the
    // signed URL, which works about 30 seconds; without a tab, a link.
    const tab = window.open("", "_blank");
    busy(button, out, async () => {
      try {
        const url = await resolveRedirect(`/v1/billing/invoices/${encodeURIComponent(invoice.invoiceId)}/pdf`);
        if (tab) {
          tab.opener = null;
          tab.location.href = url;
        } else {
          replace(out, " ", h("a", { href: url, target: "_blank", rel: "noopener", class: "pdf-link" }, "Open the PDF"));
        }
      } catch (error) {
        if (tab) tab.close();
        throw error;
      }
    });
  });
  return h("span", {}, button, out);
}

export function render(main, params, context) {
  const sub = h("section", { class: "panel", "aria-labelledby": "subscription" }, h("h2", { id: "subscription" }, "Subscription"), loading());
  const invoices = h("section", { "aria-labelledby": "invoices" }, h("h2", { id: "invoices" }, "Invoices"));
  main.append(h("h1", {}, "Billing"), sub, invoices);

  async function show(subscription) {
    const plans = await choices("post", "/v1/billing/subscription/change", "plan");
    replace(sub, h("h2", { id: "subscription" }, "Subscription"), subscriptionView(subscription, plans, show, context));
  }
  get("/v1/billing/subscription").then(show).catch((error) => replace(sub, h("h2", { id: "subscription" }, "Subscription"), errorBox(error)));
  invoices.append(pager((cursor) => get("/v1/billing/invoices", { limit: 20, cursor }), (items) => table([
    ["Number", (i) => i.number],
    ["Status", (i) => badge(i.status)],
    ["Amount due", (i) => money(i.amountDueMinor, i.currency)],
    ["Paid", (i) => money(i.amountPaidMinor, i.currency)],
    ["Period", (i) => [when(i.periodStart), " – ", when(i.periodEnd)]],
    ["Due", (i) => when(i.dueDate)],
    ["Lines", (i) => (i.lineItems || []).map((l) => l.description).join("; ")],
    ["", pdfButton],
  ], items, { caption: "Invoices" }), { emptyText: "No invoices yet." }));
}
