// A strict TypeScript caller of simplequeue, typed by openapi-typescript from openapi/openapi.json
// (generated/schema.d.ts, not committed) and calling through openapi-fetch. That it compiles under
// `tsc --strict` proves a caller may omit every defaulted request field; running it against a live
// `simplequeue serve` proves the generated types describe what the service answers.
//
// Usage: node dist/push_pop.js <base url>
import createClient from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";

type ErrorCode = components["schemas"]["ErrorCode"];

function fail(message: string): never {
  throw new Error(message);
}

// Exhaustive over the 409 codes: a code added to the spec without a case here fails to compile.
function explain(code: ErrorCode): string {
  switch (code) {
    case "LeaseMismatch":
    case "LeaseExpired":
      return "the lease is not ours any more";
    case "ItemDead":
      return "the item is dead";
    case "TooManyQueues":
      return "the service holds its most queues";
    default:
      return `unexpected: ${code}`;
  }
}

async function main(baseUrl: string): Promise<void> {
  const client = createClient<paths>({ baseUrl });
  const queue = `ts-${Date.now()}`;

  // Only `payload`: queue, priority, delay and the rest take the server's defaults.
  const defaulted = await client.POST("/push", { body: { payload: { hello: "world" } } });
  if (defaulted.error !== undefined) fail(`push failed: ${defaulted.error.error}`);
  if (defaulted.data.queue !== "default") fail(`default queue not applied: ${defaulted.data.queue}`);

  const pushed = await client.POST("/push", { body: { payload: { n: 1 }, queue } });
  if (pushed.error !== undefined) fail(`push failed: ${pushed.error.error}: ${pushed.error.detail}`);
  const id: string = pushed.data.id;
  const created: boolean = pushed.data.created;
  if (!created) fail("the push was taken for a duplicate");

  // Only `queue`: max_items, wait_seconds and lease_seconds take their defaults.
  const popped = await client.POST("/pop", { body: { queue } });
  if (popped.error !== undefined) fail(`pop failed: ${popped.error.error}`);
  const [item] = popped.data.items;
  if (item === undefined) fail("nothing was popped");
  if (item.id !== id) fail(`popped ${item.id}, pushed ${id}`);
  if (popped.data.items.length !== 1) fail("max_items' default (1) was not applied");
  const leaseToken: string = item.lease_token;

  // The queues, a page at a time (the default queue and ours: two pages of one).
  const first = await client.GET("/queues", { params: { query: { limit: 1 } } });
  if (first.error !== undefined) fail(`listing queues failed: ${first.error.error}`);
  const cursor: string | null = first.data.next_cursor;
  if (first.data.queues.length !== 1 || cursor === null) fail("a first page of one queue without a cursor");
  const next = await client.GET("/queues", { params: { query: { limit: 1, cursor } } });
  if (next.error !== undefined) fail(`the next page failed: ${next.error.error}`);
  if (next.data.queues[0]?.name === first.data.queues[0]?.name) fail("the next page repeated the first");

  const completed = await client.DELETE("/items/{item_id}", {
    params: { path: { item_id: id }, query: { lease_token: leaseToken } },
  });
  if (completed.error !== undefined) fail(`complete failed: ${completed.error.error}`);
  if (completed.response.status !== 204) fail(`complete answered ${completed.response.status}`);

  // A typed error: completing it again is 404 ItemNotFound, in the one envelope.
  const again = await client.DELETE("/items/{item_id}", { params: { path: { item_id: id } } });
  if (again.error === undefined) fail("completing twice succeeded");
  const code: ErrorCode = again.error.error;
  const detail: string = again.error.detail;
  if (code !== "ItemNotFound") fail(`expected ItemNotFound, got ${code} (${explain(code)})`);
  if (again.response.status !== 404) fail(`expected 404, got ${again.response.status}`);

  // A typed validation error names its fields.
  const invalid = await client.POST("/pop", { body: { queue, max_items: 0 } });
  if (invalid.error === undefined) fail("max_items 0 was accepted");
  if (invalid.error.error !== "ValidationError") fail(`expected ValidationError, got ${invalid.error.error}`);
  const where = invalid.error.fields?.[0]?.loc.join(".") ?? fail("a ValidationError without fields");

  console.log(`ok: pushed, popped and completed ${id}; then ${code} (${detail}); then ${where} invalid`);
}

const baseUrl = process.argv[2] ?? fail("usage: node dist/push_pop.js <base url>");
await main(baseUrl);
